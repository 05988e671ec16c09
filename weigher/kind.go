package weigher

import (
	"bytes"
	"math"
	"strings"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/spec"

	"github.com/tidwall/gjson"
)

// Kind is the API a request calls, which decides how its body is weighed and
// how its response's usage is read. Everything the package knows about a
// kind is its row in one table (kinds, below); a Kind beyond the table reads
// as KindOther. The zero value is KindOther.
type Kind uint8

const (
	// KindOther is any request the weigher does not weigh; it counts as a
	// request only.
	KindOther Kind = iota
	// KindChat is OpenAI POST /v1/chat/completions
	// (https://platform.openai.com/docs/api-reference/chat/create).
	KindChat
	// KindResponses is OpenAI POST /v1/responses
	// (https://platform.openai.com/docs/api-reference/responses/create).
	KindResponses
	// KindCompletions is OpenAI's legacy POST /v1/completions
	// (https://platform.openai.com/docs/api-reference/completions/create).
	KindCompletions
	// KindEmbeddings is OpenAI POST /v1/embeddings
	// (https://platform.openai.com/docs/api-reference/embeddings/create).
	KindEmbeddings
	// KindMessages is Anthropic POST /v1/messages
	// (https://platform.claude.com/docs/en/api/messages).
	KindMessages
	// KindCountTokens is Anthropic POST /v1/messages/count_tokens: free of
	// charge upstream (https://platform.claude.com/docs/en/build-with-claude/token-counting,
	// "Token counting is free to use" with its own requests-per-minute
	// limit), so it is recognised — to be limited as a request and kept
	// apart from /v1/messages — but not weighed, and has no usage.
	KindCountTokens
	// KindUnmetered is an endpoint that spends tokens or money upstream but
	// that llmguard does not weigh (batches, images, audio, realtime,
	// assistants and threads, fine-tuning, files, uploads, vector stores,
	// Anthropic's message batches: see [Classify]). A caller under a token
	// or dollar limit is refused it unless the operator lists it as
	// unmetered; otherwise it counts as a request only.
	KindUnmetered
	// KindImages is OpenAI POST /v1/images/generations for a model billed
	// in tokens (images.go); a per-image-billed model's generation is
	// unmetered.
	KindImages

	// numKinds counts the kinds above and sizes the table: a new kind goes
	// before it, and TestKindTable fails until the kind has its row.
	numKinds
)

// kindRow is everything the package knows about one Kind. A weighed kind
// has all three functions; a kind that is not weighed has none of them.
type kindRow struct {
	// name is the metric label ([Kind.String]).
	name string
	// paths are the upstream paths a POST of this kind is sent to, matched
	// exactly by [KindOf] (no query, no trailing slash).
	paths []string
	// weighed: requests of this kind are weighed in tokens ([Kind.Weighed]).
	weighed bool
	// weigh estimates a request body ([Weigher.Weigh]).
	weigh func(w *Weigher, body []byte, as func(string) string) Estimate
	// usage reads a non-streamed response's usage ([ParseUsage]), its body
	// nested at most maxDepth levels (0: DefaultMaxDepth).
	usage func(body []byte, maxDepth int) (Usage, bool)
	// outputField names the request fields that cap its output, as its API
	// spells them ([Kind.OutputField]); "" for a kind without output.
	outputField string
	// outputUncountable: the output is not text llmguard can count (images):
	// an answer without usage keeps its output reservation.
	outputUncountable bool
	// usageOptIn: a stream of this kind reports its usage only when the
	// request asks with stream_options.include_usage (OpenAI's chat and
	// legacy completions, https://platform.openai.com/docs/api-reference/chat/create#chat-create-stream_options).
	usageOptIn bool
	// stream reads one SSE event of a streamed response ([Stream.Event]),
	// recording the usage it reports in s.
	stream func(s *Stream, eventType, data []byte) StreamUpdate
	// answerText, when set, reads the output text of a JSON answer (root,
	// checked already), calling add with each value that may hold some
	// (answerOutput): an answer whose usage reports 0 output tokens is
	// charged at least that text ([Weigher.ParseUsage]). It reports
	// whether the answer also holds output it cannot read as text
	// (encrypted reasoning: hidden).
	answerText func(root gjson.Result, add func(gjson.Result)) (hidden bool)
	// unreadUsage is the event, written around a usage value, that
	// [Stream.UnreadUsage] reads as one that an event relayed unread
	// held (the usage between its two halves); "" halves for a kind
	// whose unread events' usage is not read.
	unreadUsage [2]string
	// notOutput are the members of a JSON answer that hold no output
	// text ([Kind.AnswerNotOutput]).
	notOutput []string
	// outputRoots are the top-level members of a JSON answer whose
	// elements are its output ([Kind.AnswerOutputRoots]).
	outputRoots []string
}

// kinds is the table of request kinds, indexed by Kind. Chat and legacy
// completions report usage in the same shape (prompt_tokens /
// completion_tokens), so both read it with parseChatUsage.
var kinds = [numKinds]kindRow{
	KindOther: {name: "other"},
	KindChat: {
		name: "chat", paths: []string{"/v1/chat/completions"}, weighed: true,
		weigh: (*Weigher).chat, usage: parseChatUsage, stream: (*Stream).chatEvent, usageOptIn: true,
		answerText: chatAnswerText, outputField: "max_completion_tokens or max_tokens",
		unreadUsage: [2]string{`{"choices":[],"usage":`, `}`}, notOutput: chatNotOutput, outputRoots: []string{"choices"},
	},
	KindResponses: {
		name: "responses", paths: []string{"/v1/responses"}, weighed: true,
		weigh: (*Weigher).responses, usage: parseResponsesUsage, stream: (*Stream).responsesEvent,
		answerText: responsesAnswerText, outputField: "max_output_tokens",
		unreadUsage: [2]string{`{"type":"response.completed","response":{"usage":`, `}}`}, notOutput: responsesNotOutput,
		outputRoots: []string{"output"},
	},
	KindCompletions: {
		name: "completions", paths: []string{"/v1/completions"}, weighed: true,
		weigh: (*Weigher).completions, usage: parseChatUsage, stream: (*Stream).completionsEvent, usageOptIn: true,
		answerText: chatAnswerText, outputField: "max_tokens",
		unreadUsage: [2]string{`{"choices":[],"usage":`, `}`}, notOutput: chatNotOutput, outputRoots: []string{"choices"},
	},
	KindEmbeddings: {
		name: "embeddings", paths: []string{"/v1/embeddings"}, weighed: true,
		weigh: (*Weigher).embeddings, usage: parseEmbeddingsUsage, stream: notStreamed, outputRoots: []string{"data"},
	},
	KindMessages: {
		name: "messages", paths: []string{"/v1/messages"}, weighed: true,
		weigh: (*Weigher).messages, usage: parseMessagesUsage, stream: (*Stream).messagesEvent,
		answerText: messagesAnswerText, outputField: "max_tokens",
		unreadUsage: [2]string{`{"type":"message_delta","usage":`, `}`}, notOutput: messagesNotOutput,
		outputRoots: []string{"content"},
	},
	KindCountTokens: {name: "count_tokens", paths: []string{"/v1/messages/count_tokens"}},
	KindUnmetered:   {name: "unmetered"}, // found by family, not by path: see Classify
	KindImages: {
		name: "images", paths: []string{"/v1/images/generations"}, weighed: true,
		weigh: (*Weigher).images, usage: parseImagesUsage, stream: (*Stream).imagesEvent, outputUncountable: true,
	},
}

// row is k's row in the table; a Kind beyond the table is KindOther.
func (k Kind) row() *kindRow {
	if k < numKinds {
		return &kinds[k]
	}
	return &kinds[KindOther]
}

// String is the kind's metric-label name: "other", "chat", "responses",
// "completions", "embeddings", "messages", "count_tokens"; "other" for a
// value that is no kind.
func (k Kind) String() string { return k.row().name }

// Path is the kind's endpoint as OpenAI (or Anthropic) spells it, e.g.
// "/v1/chat/completions": the path rules' paths are matched against for a
// request of this kind, whatever its own spelling; "" for KindOther,
// KindUnmetered and a value that is no kind.
func (k Kind) Path() string {
	if ps := k.row().paths; len(ps) > 0 {
		return ps[0]
	}
	return ""
}

// KindPaths returns the endpoint path of every kind that has one
// ([Kind.Path]), in kind order: the paths llmguard recognises as their
// APIs spell them. A new slice each call.
func KindPaths() []string {
	var ps []string
	for k := range Kind(numKinds) {
		if p := k.Path(); p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// Weighed reports whether requests of kind k are weighed in tokens: their
// body is estimated ([Weigher.Weigh]) and their response's usage read
// ([ParseUsage], [Stream]). False for KindOther, KindCountTokens and a value
// that is no kind, whose requests count as requests only.
func (k Kind) Weighed() bool { return k.row().weighed }

// OutputField names the request fields that cap a request's output as
// kind k's API spells them — "max_completion_tokens or max_tokens" for
// chat, "max_output_tokens" for Responses, "max_tokens" for legacy
// completions and Anthropic's Messages — for a refusal that tells the
// caller what to lower; "" for a kind without output to cap (embeddings,
// images, and every kind not weighed).
func (k Kind) OutputField() string { return k.row().outputField }

// OutputUncountable reports whether the output of kind k is not text that
// can be counted locally (generated images): a streamed answer whose usage
// was not reported then keeps its output reservation.
func (k Kind) OutputUncountable() bool { return k.row().outputUncountable }

// OutputTextChecked reports whether a usage of kind k is checked against
// the output text of its answer ([Weigher.ParseUsage]: a usage reporting 0
// output tokens, or fewer than [OutputCheckBytes] allows for the text, is
// charged at least the text): chat, Responses, legacy completions and
// Messages, whose answers carry generated text. False for embeddings
// (an answer of numbers, its usage reporting no output), images and every
// kind not weighed.
func (k Kind) OutputTextChecked() bool { return k.row().answerText != nil }

// AnswerNotOutput are the members of a JSON answer of kind k that hold no
// output text, each a path of member names from the answer's top, dotted,
// "*" for any element of an array: a chat or legacy completion's
// choices.*.logprobs (per token: the token, its bytes and its top
// alternatives, tens of bytes a token beside the content that holds the
// text), a Responses answer's echoed request (instructions, tools, text
// format and schema…) and its output parts' logprobs. The answer's text
// ([Weigher.ParseUsage]'s answerText) is never under one of them; an
// answer relayed unread is counted as text but for their values (proxy).
// Members not listed, known or not, may hold output. Nil for a kind
// without a JSON answer of text.
func (k Kind) AnswerNotOutput() []string { return k.row().notOutput }

// AnswerOutputRoots are the top-level members of a JSON answer of kind k
// whose elements are the answer's output: a chat or legacy completion's
// choices (https://platform.openai.com/docs/api-reference/chat/object,
// /completions/object), a Responses answer's output items
// (/responses/object), an embeddings answer's data (/embeddings/object),
// a Messages answer's content blocks
// (https://platform.claude.com/docs/en/api/messages). An error body
// (OpenAI's {"error":…}, Anthropic's {"type":"error","error":…}) has none
// of them: an answer under an error status that holds an element of one
// is an answer the upstream generated, and bills (proxy). Nil for a kind
// without a JSON answer of its own.
func (k Kind) AnswerOutputRoots() []string { return k.row().outputRoots }

// StreamUsageOptIn reports whether a streamed answer of kind k carries its
// usage only when the request sets stream_options.include_usage (chat and
// legacy completions); the proxy sets it for the caller to read the usage.
func (k Kind) StreamUsageOptIn() bool { return k.row().usageOptIn }

// KindOf classifies a request by method and upstream path (query string
// removed; one trailing slash ignored). Only POST to a path of the kind
// table (named on each Kind constant) is recognised; anything else is
// KindOther. It does not allocate.
func KindOf(method, path string) Kind {
	if method != "POST" {
		return KindOther
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	for _, r := range kindPaths {
		if r.path == path {
			return r.kind
		}
	}
	return KindOther
}

// kindPath is one upstream path of the kind table and its kind.
type kindPath struct {
	path string
	kind Kind
}

// kindPaths is every path in the kind table, flattened for [KindOf].
var kindPaths = func() []kindPath {
	var ps []kindPath
	for k := range kinds {
		for _, p := range kinds[k].paths {
			ps = append(ps, kindPath{p, Kind(k)})
		}
	}
	return ps
}()

// Weigh estimates body as a request of kind k: [Weigher.Chat],
// [Weigher.Responses], [Weigher.Completions], [Weigher.Embeddings] or
// [Weigher.Messages]. A kind that is not [Kind.Weighed] (KindOther,
// KindCountTokens) gets the zero Estimate with Parsed true. Each checks the
// body in one flat pass first (strict syntax in UTF-8, nesting within
// [Options.MaxDepth], keys named twice or in two cases), so a body that is
// too deep, ambiguous or not strict JSON is reported (Estimate.Fault,
// Parsed false) before any recursive parser reads it. A request with
// hidden context (Estimate.ServerContext) reserves at least the model's
// largest input ([Model.MaxInputTokens]). It never panics and never keeps
// body.
func (w *Weigher) Weigh(k Kind, body []byte) Estimate {
	r := k.row()
	if !r.weighed {
		return Estimate{Parsed: true}
	}
	return w.hidden(w.weighRow(r, body, nil))
}

// WeighAs is [Weigher.Weigh] with the body weighed as a request for model
// (its tokenizer, its default output reservation, its Estimate.Model),
// whatever model the body names; an empty model is Weigh.
func (w *Weigher) WeighAs(k Kind, body []byte, model string) Estimate {
	if model == "" {
		return w.Weigh(k, body)
	}
	return w.WeighResolved(k, body, func(string) string { return model })
}

// WeighResolved is [Weigher.Weigh] with the body weighed as a request for
// the model resolve returns for the model the body names ("" when it names
// none): in one pass, whatever the mapping needs to see. An Azure OpenAI
// deployment is weighed as the model it serves this way. A nil resolve is
// Weigh.
func (w *Weigher) WeighResolved(k Kind, body []byte, resolve func(bodyModel string) string) Estimate {
	r := k.row()
	if !r.weighed {
		return Estimate{Parsed: true}
	}
	return w.hidden(w.weighRow(r, body, resolve))
}

// modelNamed is the model a body naming model is weighed as: as(name)
// when as is set, the name otherwise (copied, through names: body is not
// kept).
func modelNamed(model gjson.Result, as func(string) string, names *modelNames) string {
	name := ""
	if model.Type == gjson.String {
		name = model.Str
	}
	if as != nil {
		if m := as(name); m != name {
			return m
		}
	}
	return names.name(name)
}

// ParseUsage reads the usage of a non-streamed JSON response of kind k:
// [ParseChatUsage], [ParseResponsesUsage], [ParseCompletionsUsage],
// [ParseEmbeddingsUsage] or [ParseMessagesUsage]. ok is false for a body with
// no usage (an error body), for a body nested deeper than [DefaultMaxDepth]
// (checked by a flat scan before anything parses it), and for a kind that is
// not [Kind.Weighed] (KindOther, KindCountTokens). It never panics and never
// keeps body.
func ParseUsage(k Kind, body []byte) (Usage, bool) { return parseUsage(k, body, 0) }

// ParseUsage is [ParseUsage] with w's nesting limit ([Options.MaxDepth]):
// a response nested deeper is not read (ok false), so the request keeps its
// reservation. est (not nil; read, never kept or changed) is the
// request's estimate: its Model is the model the request was weighed as,
// its OutputTokens the output reserved. A chat,
// completions, Responses or Messages answer
// whose usage reports 0 output tokens (a valid usage: an answer stopped at
// once, or by a content filter) but that carries output text anyway is
// charged at least that text, counted piece by piece (see answerOutput;
// the body is read in place, no copy of it made) with model's tokenizer,
// never with that of the model the answer names (an upstream's name,
// which may be anything): a lenient upstream cannot hand out text for
// free by reporting 0. Nor by reporting a small output beside much text:
// an answer longer than OutputCheckBytes allows for the output it
// reports has its text counted too, and is charged at least that text
// (an honest usage counts every token of it, and more: reasoning,
// framing). An answer so counted that also holds output llmguard cannot
// read (hidden: an encrypted reasoning_details item, a redacted_thinking
// block, a reasoning item's encrypted_content), or answers a request
// whose model may reason unseen (est.HiddenReasoning), and whose usage
// leaves no token for it (output at or below the text counted) is charged
// at least est.OutputTokens, as a stream whose output was not all counted
// is (StreamUpdate.Uncounted): the reasoning was billed, its length
// unknown (an o3 answer of 3 words reporting 0 output tokens was charged
// its text, 2 tokens, where its stream twin kept the reservation). An
// answer that names a key twice (two usage
// objects, a figure named twice) is read both ways a parser may read it,
// first member and last, and settles at the dearer of the two
// (dupKeyUsage); when either reading has no usage, ok is false.
func (w *Weigher) ParseUsage(k Kind, body []byte, est *Estimate) (Usage, bool) {
	u, ok := parseUsage(k, body, w.maxDepth)
	if !ok {
		u, ok = dupKeyUsage(k, body, w.maxDepth)
	}
	if ok && (u.OutputTokens == 0 || int64(len(body)) > OutputCheckBytes(u.OutputTokens)) {
		text, hidden := w.answerTokens(k, body, est.Model)
		if (hidden || est.HiddenReasoning) && u.OutputTokens <= text {
			text = max(text, est.OutputTokens)
		}
		u.OutputTokens = max(u.OutputTokens, text)
	}
	return u, ok
}

// answerTokens counts the output text of answer body of kind k
// (answerOutput) in tokens of model's tokenizer, saturating at maxTokens,
// and reports whether the answer holds hidden output too. Its count is
// its own, not the caller's Usage: a Usage captured by the closure would
// live on the heap on every ParseUsage call.
func (w *Weigher) answerTokens(k Kind, body []byte, model string) (out int64, hidden bool) {
	enc := w.encoder(model)
	hidden = answerOutput(k, body, func(p string) {
		out = min(out+countText(enc, p), maxTokens)
	})
	return out, hidden
}

// OutputCheckBytes is the most bytes of answer (a JSON answer's body, or
// a stream's output text) that a usage reporting out output tokens is
// taken at its word for: outputCheckBytesPerToken bytes a token plus
// outputCheckSlack. An honest answer holds fewer (English prose is about
// 4.5 bytes of text a token in o200k_base, code 3.5, CJK 3 or less, and a
// JSON answer's framing a few hundred bytes), so its text is not counted
// and the reported usage, which is the bill, settles it; past it the
// text is counted and the output charged is never below that count. A
// usage that under-reports its output by less than this lets the rest
// through: at most 1 − b/6 of the output, for text of b bytes a token
// (a quarter for English prose). Saturates at math.MaxInt64.
func OutputCheckBytes(out int64) int64 {
	if out < 0 || out > (math.MaxInt64-outputCheckSlack)/outputCheckBytesPerToken {
		return math.MaxInt64
	}
	return out*outputCheckBytesPerToken + outputCheckSlack
}

// outputCheckBytesPerToken and outputCheckSlack: see OutputCheckBytes.
const (
	outputCheckBytesPerToken = 6
	outputCheckSlack         = 1024
)

// AnswerOutputTokens counts the output text a non-streamed JSON answer of
// kind k carries (a chat or completions answer's content, refusal,
// reasoning (reasoning_details' text too) and tool calls; a Responses
// answer's output items, calls' code, commands and diffs included; a Messages
// answer's text, thinking and tool_use blocks: answerOutput), in tokens of
// the tokenizer of model, the model the request was weighed as. It is
// what a success answer that reports no usage is charged at least, as a
// stream without usage is charged its text: the upstream generated the
// text it carries, whatever output the request reserved (a default
// reservation, a max_completion_tokens an upstream ignores). An answer
// that is not strict JSON, nests deeper than w's limit or names a key
// twice (read differently by different parsers) gives 0, so its
// reservation stands. Saturates at maxTokens; never panics, never keeps
// body.
func (w *Weigher) AnswerOutputTokens(k Kind, body []byte, model string) int64 {
	if k.row().answerText == nil || jsonscan.Check(body, jsonscan.Options{MaxDepth: w.maxDepth, DuplicateKeys: true}) != nil {
		return 0
	}
	out, _ := w.answerTokens(k, body, model)
	return out
}

// CutAnswerUsage is what a non-streamed JSON answer of kind k shows it
// cost when its body was cut short (jsonscan's Truncated: an HTTP/1.0 or
// close-delimited answer whose upstream closed early, a Content-Length or
// chunked body that broke off), in tokens: OutputTokens is the whole body
// read so far, counted as text in the tokenizer of model (its keys and
// framing too: an upper bound, a few dozen tokens over the text for a chat
// answer), or the output of a usage the part that came holds (a server
// that writes its usage first), when that is more; InputTokens is that
// usage's input, 0 without one. Such an answer's usage, when it had one,
// was usually in the part that never came, yet the upstream generated the
// text that did come and bills it, and bills the input a usage that came
// reports (adv30: a cut answer's input was the estimate whatever its usage
// said). Other fields are zero. It is the zero Usage for a body that is
// not cut (see [Weigher.AnswerOutputTokens] for a whole one), and for a
// kind whose answers carry no text (answerText: images, embeddings), whose
// bodies (base64) are not tokens. Each figure saturates at maxTokens;
// never panics, never keeps body.
func (w *Weigher) CutAnswerUsage(k Kind, body []byte, model string) Usage {
	if k.row().answerText == nil {
		return Usage{}
	}
	if jsonscan.ReasonOf(jsonscan.Check(body, jsonscan.Options{MaxDepth: -1})) != jsonscan.Truncated {
		return Usage{}
	}
	cut := Usage{OutputTokens: min(w.CountText(model, bodyString(body)), maxTokens)}
	// A usage the upstream wrote before the cut (a server that puts it
	// first) is read as a whole answer's is, alone in a document of its
	// own: its output counts when it says more than the text (reasoning
	// the body never showed), and its input as it says.
	if v := gjson.GetBytes(body, "usage"); v.IsObject() {
		doc := make([]byte, 0, len(v.Raw)+len(`{"usage":}`))
		doc = append(append(append(doc, `{"usage":`...), v.Raw...), '}')
		if u, ok := parseUsage(k, doc, w.maxDepth); ok {
			cut.OutputTokens = min(max(cut.OutputTokens, u.OutputTokens), maxTokens)
			cut.InputTokens = min(max(u.InputTokens, 0), maxTokens)
		}
	}
	// The tier it was served at, when named before the cut (a Responses
	// object names it before its usage): a name cut short is unread, and
	// priced as the dearest tier.
	if cut.OutputTokens > 0 || cut.InputTokens > 0 {
		// A key in quotes is never inside a string (its quotes would be
		// escaped there), so one in the last bytes that gjson cannot read
		// is a member cut in its value.
		if v := gjson.GetBytes(body, "service_tier"); v.Exists() {
			cut.ServiceTier = servedTier(v.Raw)
		} else if bytes.Contains(body[max(0, len(body)-64):], []byte(`"service_tier"`)) {
			cut.ServiceTier = spec.TierUnread
		}
	}
	return cut
}

func parseUsage(k Kind, body []byte, maxDepth int) (Usage, bool) {
	r := k.row()
	if !r.weighed {
		return Usage{}, false
	}
	return r.usage(body, maxDepth)
}

// chatNotOutput are the members of a chat or legacy completions answer
// that hold no output text (https://platform.openai.com/docs/api-reference/chat/object,
// /completions/object): its identifiers, model, fingerprint, tier and
// usage, each choice's index, finish_reason and logprobs; vLLM's
// prompt_logprobs, prompt_token_ids and a choice's token_ids and
// stop_reason (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html).
var chatNotOutput = []string{
	"id", "object", "created", "model", "system_fingerprint", "service_tier", "usage",
	"prompt_logprobs", "prompt_token_ids",
	"choices.*.index", "choices.*.finish_reason", "choices.*.logprobs",
	"choices.*.token_ids", "choices.*.stop_reason", "choices.*.prompt_logprobs",
}

// responsesNotOutput are the members of a Responses answer that hold no
// output text (https://platform.openai.com/docs/api-reference/responses/object):
// its identifiers, status, model, usage and tier, the request it echoes
// (instructions, tools, tool_choice, text — the output format and its
// schema —, reasoning — effort and summary setting —, prompt, metadata
// and the sampling settings), and the logprobs of its output parts.
var responsesNotOutput = []string{
	"id", "object", "created_at", "completed_at", "status", "model", "usage", "service_tier",
	"instructions", "tools", "tool_choice", "text", "reasoning", "prompt", "metadata",
	"include", "truncation", "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
	"previous_response_id", "conversation", "background", "store", "parallel_tool_calls",
	"max_output_tokens", "max_tool_calls", "temperature", "top_p", "top_logprobs", "incomplete_details",
	"output.*.content.*.logprobs",
}

// messagesNotOutput are the members of a Messages answer that hold no
// output text (https://platform.claude.com/docs/en/api/messages): its
// id, type, role, model, stop reason and usage (a stop_sequence is text
// the model wrote: counted).
var messagesNotOutput = []string{"id", "type", "role", "model", "stop_reason", "usage"}
