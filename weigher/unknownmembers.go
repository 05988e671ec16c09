package weigher

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Members llmguard does not know inside the objects it weighs.
//
// The official APIs refuse a member they do not define ("Extra inputs are
// not permitted"), but a lenient OpenAI- or Anthropic-compatible server
// may not: LiteLLM passes a message's unknown members on, and a server
// whose chat template writes a message, a content part or a tool out as
// its JSON (a template's tojson filter, as vLLM's and llama.cpp's may
// use) bills every member it holds. So each member of a message, a
// content part or block, a tool call, a Responses input item or a
// Messages tool or tool_choice that is neither weighed by the rules of its
// flavor nor one its API defines as carrying no text it bills (ids,
// statuses, cache_control, citations…) is weighed by unknownMember, its
// key and value, as input. A member the API defines is weighed as the API
// bills it, so a body the official API takes weighs what it did.

// unknownMember weighs a member llmguard does not know, key k with value
// v, as a lenient upstream that writes it into the prompt bills it: the
// text of its key and of its value (countValue: a string by its text,
// another value by its JSON text), in enc's tokens; a null value weighs
// nothing. Saturates at maxTokens.
func unknownMember(enc counter, k string, v gjson.Result) int64 {
	if v.Type == gjson.Null || v.Raw == "" {
		return 0
	}
	return min(countText(enc, k)+countValue(enc, v), maxTokens)
}

// memberTokens weighs member k: v of an object, as definedMember does
// when the API defines k (known), else as unknownMember does.
func memberTokens(enc counter, k string, v gjson.Result, known bool) int64 {
	if known {
		return definedMember(enc, k, v)
	}
	return unknownMember(enc, k, v)
}

// unknownMembers is the sum of unknownMember over the members of the
// object obj (its JSON text, which passed jsonscan) that known does not
// name; 0 when obj is not an object. Saturates at maxTokens.
func unknownMembers(enc counter, obj gjson.Result, known func(k string) bool) int64 {
	if !obj.IsObject() {
		return 0
	}
	var n int64
	rawMembers(obj.Raw, func(k string, v gjson.Result) bool {
		n = min(n+memberTokens(enc, k, v, known(k)), maxTokens)
		return true
	})
	return n
}

// framingMaxBytes is the most JSON text, in bytes, a member the APIs
// define as carrying no text they bill (framingKey: an id, a status, a
// type, an index, a cache_control) holds in a body the official APIs
// take: their ids are at most 40 to 64 characters (OpenAI's item ids 53
// with their quotes, Anthropic's toolu_ ids about 32), their types,
// statuses and formats shorter, a cache_control object
// {"type":"ephemeral","ttl":"1h"} 31.
const framingMaxBytes = 64

// framingKey reports whether k names a member that the APIs define as
// carrying no text they bill, in any of the objects the weigher reads:
// ids, types, statuses, indexes and flags. Such a member weighs nothing
// while its value is one the official API takes (definedMember).
func framingKey(k string) bool {
	switch k {
	case "id", "type", "status", "index", "format", "call_id", "tool_call_id", "tool_use_id",
		"is_error", "prefix", "cache_control", "detail", "caller", "defer_loading", "strict",
		"eager_input_streaming", "allowed_callers", "display_width_px", "display_height_px",
		"display_number", "enable_zoom", "max_characters":
		return true
	}
	return false
}

// definedMember weighs a member k, value v, that the API of the object
// holding it defines: nothing, unless k is a framingKey whose value holds
// more than framingMaxBytes bytes of JSON — a 3,000-word "id" or
// "status", which the official API refuses and a lenient upstream that
// writes the object out as its JSON bills — weighed then as
// unknownMember weighs it. A member the API defines as text is weighed by
// the rules of its flavor, not here.
func definedMember(enc counter, k string, v gjson.Result) int64 {
	if !framingKey(k) || len(v.Raw) <= framingMaxBytes {
		return 0
	}
	return unknownMember(enc, k, v)
}

// chatMessageKnown reports whether k is a member of a chat message that
// the API defines (https://platform.openai.com/docs/api-reference/chat/create,
// every role's members), or one an OpenAI-compatible upstream reads with
// a meaning of its own that the weigher weighs (reasoning, reasoning_content,
// reasoning_details) or that carries no text (LiteLLM's cache_control, an
// answer's annotations echoed back, DeepSeek's and Mistral's prefix flag).
func chatMessageKnown(k string) bool {
	switch k {
	case "role", "content", "name", "refusal", "tool_calls", "tool_call_id", "function_call", "audio",
		"reasoning", "reasoning_content", "reasoning_details", "annotations", "cache_control", "prefix":
		return true
	}
	return false
}

// chatPartKnown reports whether k is a member of a chat content part of
// any type partTally and partWeight weigh (text, refusal, image_url,
// input_audio, file), or its cache_control (LiteLLM, Anthropic-compatible
// gateways): a part of a type they do not know is weighed whole.
func chatPartKnown(k string) bool {
	switch k {
	case "type", "text", "refusal", "image_url", "input_audio", "file", "cache_control":
		return true
	}
	return false
}

// chatImageURLKnown: the members of a chat image part's image_url object.
func chatImageURLKnown(k string) bool { return k == "url" || k == "detail" }

// chatFileKnown: the members of a chat file part's file object.
func chatFileKnown(k string) bool { return k == "file_id" || k == "file_data" || k == "filename" }

// chatToolCallKnown: the members of an element of a chat message's
// tool_calls (index: a streamed delta's, echoed back).
func chatToolCallKnown(k string) bool {
	switch k {
	case "id", "type", "function", "custom", "index":
		return true
	}
	return false
}

// responsesItemKnown reports whether k is a member of a Responses input
// item of type typ that the API defines and item weighs or that carries
// no text (ids, statuses); items of other types are weighed whole.
func responsesItemKnown(typ, k string) bool {
	switch k {
	case "type", "id", "status":
		return true
	}
	switch typ {
	case "", "message":
		return k == "role" || k == "content" || k == "name" // name: chat's, read leniently
	case "function_call":
		return k == "call_id" || k == "name" || k == "arguments"
	case "custom_tool_call":
		return k == "call_id" || k == "name" || k == "input"
	case "function_call_output", "custom_tool_call_output":
		return k == "call_id" || k == "output"
	case "reasoning":
		return k == "summary" || k == "content" || k == "encrypted_content"
	case "computer_call_output":
		return k == "call_id" || k == "output" || k == "acknowledged_safety_checks"
	}
	return true // weighed whole, or as hidden context
}

// responsesPartKnown reports whether k is a member of a Responses content
// part of type typ that the API defines (text parts' annotations and
// logprobs are an answer's, echoed back); parts of other types are
// weighed whole.
func responsesPartKnown(typ, k string) bool {
	if k == "type" {
		return true
	}
	switch typ {
	case "input_text", "output_text", "text", "summary_text", "reasoning_text":
		return k == "text" || k == "annotations" || k == "logprobs"
	case "refusal":
		return k == "refusal"
	case "input_image", "computer_screenshot":
		return k == "image_url" || k == "file_id" || k == "detail"
	case "input_file":
		return k == "file_id" || k == "file_url" || k == "file_data" || k == "filename"
	}
	return true
}

// claudeMessageKnown: the members of a Messages message.
func claudeMessageKnown(k string) bool { return k == "role" || k == "content" }

// claudeBlockKnown reports whether k is a member of a Messages content
// block of type typ that the API defines
// (https://platform.claude.com/docs/en/api/messages): a block's
// cache_control, and citations, whose cited text is not billed as input
// when passed back; blocks of types block does not know are weighed whole.
func claudeBlockKnown(typ, k string) bool {
	switch k {
	case "type", "cache_control":
		return true
	}
	switch typ {
	case "text":
		return k == "text" || k == "citations"
	case "image":
		return k == "source"
	case "document":
		return k == "source" || k == "title" || k == "context" || k == "citations"
	case "search_result":
		return k == "source" || k == "title" || k == "content" || k == "citations"
	case "thinking":
		return k == "thinking" || k == "signature"
	case "redacted_thinking":
		return k == "data"
	case "tool_use", "server_tool_use", "mcp_tool_use":
		return k == "id" || k == "name" || k == "input" || k == "server_name" || k == "caller"
	}
	// tool_result and the server tools' *_tool_result blocks
	return k == "tool_use_id" || k == "content" || k == "is_error"
}

// claudeToolKnown reports whether k is a member of a Messages tool whose
// type is typ ("" or "custom": a client tool; an Anthropic-defined one by
// its prefix, see definedTools) that the API defines
// (https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview,
// each tool's page) and tools weighs or that carries no text.
func claudeToolKnown(typ, k string) bool {
	switch k {
	case "type", "name", "cache_control", "defer_loading", "allowed_callers", "strict":
		return true
	}
	switch {
	case typ == "" || typ == "custom":
		return k == "description" || k == "input_schema" || k == "input_examples" || k == "eager_input_streaming"
	case strings.HasPrefix(typ, "computer_"):
		return k == "display_width_px" || k == "display_height_px" || k == "display_number" || k == "enable_zoom"
	case strings.HasPrefix(typ, "text_editor_"):
		return k == "max_characters"
	}
	return false
}

// blockWeighed reports whether block weighs a Messages content block of
// type typ by its members (claudeBlockKnown's types); a block of any
// other type is weighed whole, as hidden context.
func blockWeighed(typ string) bool {
	switch typ {
	case "text", "image", "document", "search_result", "thinking", "redacted_thinking",
		"tool_use", "server_tool_use", "mcp_tool_use":
		return true
	}
	return toolResultType(typ)
}

// toolResultType reports whether a Messages block of type typ is a tool's
// result: tool_result, or a server tool's (web_search_tool_result and the
// like: any type ending in _tool_result), which block weighs by its
// content. blockWeighed and block read it from here alike.
func toolResultType(typ string) bool {
	return typ == "tool_result" || strings.HasSuffix(typ, "_tool_result")
}

// definedTool reports whether typ names an Anthropic-defined client tool
// (definedTools: bash, text editor, computer use, memory), weighed by its fixed
// definition size.
func definedTool(typ string) bool {
	for _, d := range definedTools {
		if strings.HasPrefix(typ, d.prefix) {
			return true
		}
	}
	return false
}

// claudeSourceKnown reports whether k is a member of a Messages image or
// document block's source of any type the API defines (base64, url, file,
// text, content: https://platform.claude.com/docs/en/api/messages).
func claudeSourceKnown(k string) bool {
	switch k {
	case "type", "media_type", "data", "url", "file_id", "content":
		return true
	}
	return false
}

// topMember is one member of a JSON object: its key and value.
type topMember struct {
	k string
	v gjson.Result
}

// unknownTops are the top-level members of a body that its API does not
// define, kept while the body's members are walked and weighed once the
// model's encoding is known: a gateway such as LiteLLM passes a parameter
// it does not know to the provider, which may bill it (an Anthropic
// "system", a Cohere "chat_history").
type unknownTops []topMember

// note keeps k and v when known (chatTopKnown, responsesTopKnown,
// completionsTopKnown, messagesTopKnown) does not define k and v is not
// null.
func (u *unknownTops) note(known func(string) bool, k string, v gjson.Result) {
	if !known(k) && v.Type != gjson.Null {
		*u = append(*u, topMember{k: k, v: v})
	}
}

// add returns in plus the tokens of every member kept (unknownMember, by
// key and value in enc), at most maxTokens.
func (u unknownTops) add(enc counter, in int64) int64 {
	for _, m := range u {
		in = min(in+unknownMember(enc, m.k, m.v), maxTokens)
	}
	return in
}

// chatTopKnown reports whether k is a top-level member of a chat body
// that the chat API defines
// (https://platform.openai.com/docs/api-reference/chat/create), or one
// the weigher reads with a meaning of its own (vLLM's, OpenRouter's,
// Azure's, Gemini's: see Weigher.chat). Any other is weighed by its key
// and value (unknownMember): LiteLLM "treats any non-openai param as a
// provider-specific param, and passes it to the provider in the request
// body" (https://docs.litellm.ai/docs/completion/provider_specific_params),
// where an Anthropic "system" or a Cohere "chat_history" is billed as
// input; a sampling parameter (top_k: 40) weighs a few tokens.
func chatTopKnown(k string) bool {
	switch k {
	case "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
		"logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
		"parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
		"prompt_cache_retention", "reasoning_effort", "response_format", "safety_identifier", "seed",
		"service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
		"top_logprobs", "top_p", "user", "verbosity", "web_search_options",
		// read by the weigher (chat.go)
		"data_sources", "dataSources", "plugins", "extra_body", "google", "chat_template", "documents",
		"chat_template_kwargs", "min_tokens", "ignore_eos", "n_predict", "max_length", "n_cmpl", "best_of", "reasoning", "mm_processor_kwargs", "prompt":
		return true
	}
	return false
}

// responsesTopKnown reports whether k is a top-level member of a
// Responses body that the Responses API defines
// (https://platform.openai.com/docs/api-reference/responses/create), or
// one the weigher reads with a meaning of its own (OpenRouter's
// "plugins": see Weigher.Responses). Any other is weighed by its key and
// value (unknownMember), as chatTopKnown's are: LiteLLM passes a
// parameter it does not know to the provider, which may bill it.
func responsesTopKnown(k string) bool {
	switch k {
	case "model", "input", "instructions", "background", "context_management", "conversation", "include",
		"max_output_tokens", "max_tool_calls", "metadata", "parallel_tool_calls", "previous_response_id",
		"prompt", "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier",
		"service_tier", "store", "stream", "stream_options", "temperature", "text", "tool_choice", "tools",
		"top_logprobs", "top_p", "truncation", "user",
		// read by the weigher (responses.go)
		"plugins", "max_tokens", "n_predict":
		return true
	}
	return false
}

// completionsTopKnown reports whether k is a top-level member of a legacy
// completions body that the completions API defines
// (https://platform.openai.com/docs/api-reference/completions/create), or
// one the weigher reads with a meaning of its own (vLLM's and
// OpenRouter's: see Weigher.Completions). Any other is weighed by its key
// and value (unknownMember), as chatTopKnown's are.
func completionsTopKnown(k string) bool {
	switch k {
	case "model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens",
		"n", "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix", "temperature",
		"top_p", "user",
		// read by the weigher (completions.go)
		"plugins", "prompt_embeds", "min_tokens", "ignore_eos", "n_predict", "max_length", "n_cmpl":
		return true
	}
	return false
}

// messagesTopKnown reports whether k is a top-level member of a Messages
// body that the Messages API defines
// (https://platform.claude.com/docs/en/api/messages, its beta members
// included), Bedrock's and Vertex AI's "anthropic_version", or one the
// weigher reads with a meaning of its own (OpenRouter's "plugins": see
// Weigher.Messages). Any other is weighed by its key and value
// (unknownMember), as chatTopKnown's are: a gateway that passes it on
// (LiteLLM's provider-specific parameters) may have it billed.
func messagesTopKnown(k string) bool {
	switch k {
	case "model", "messages", "max_tokens", "cache_control", "container", "context_management", "diagnostics",
		"fallback_credit_token", "inference_geo", "mcp_servers", "metadata", "output_config", "output_format",
		"service_tier", "speed", "stop_sequences", "stream", "system", "temperature", "thinking",
		"tool_choice", "tools", "top_k", "top_p", "user_profile_id", "anthropic_version",
		// read by the weigher (messages.go)
		"plugins":
		return true
	}
	return false
}
