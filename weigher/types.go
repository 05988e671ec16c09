package weigher

import "github.com/llmguard/llmguard/spec"

// Estimate is what the weigher makes of a request body before it is
// forwarded: the input tokens counted locally and the output reservation.
// The zero value is "nothing to reserve".
type Estimate struct {
	// Model is the request's "model" field, "" when absent or unparseable.
	Model string
	// InputTokens is the locally estimated prompt size in tokens (framing,
	// names, tools, images and documents included). For a model with a
	// [Model.SafetyFactor] (every Claude model by default) the text part is
	// scaled by that factor.
	InputTokens int64
	// OutputTokens is the output reservation in tokens. Chat:
	// max_completion_tokens, else max_tokens, else the model's default, times
	// Choices. Responses: max_output_tokens, else the model's default. Completions:
	// max_tokens, else the model's default (at least 16), times max(n,
	// best_of) times the number of prompts, plus the echoed prompt.
	// Embeddings: 0. Messages: max_tokens, else the model's default.
	OutputTokens int64
	// OutputCeiling is, for a request with OutputDefaulted, the model's
	// documented maximum output per completion in tokens
	// ([Model.MaxOutputTokens]; 0: unknown), which a learned reservation
	// must not exceed. Only the entry points (Weigh, WeighAs,
	// WeighResolved) set it.
	OutputCeiling int64
	// Choices is how many completions OutputTokens covers: a chat
	// request's max(n, llama.cpp's n_cmpl, TensorRT-LLM's best_of) (at
	// least 1); a legacy completions request's max(n,
	// best_of) times its prompts; 1 for every other kind.
	Choices int64
	// OutputFields are where a chat, Responses, Messages or legacy
	// completions body holds its output maximum (max_completion_tokens and
	// max_tokens; max_output_tokens and llama.cpp's max_tokens; max_tokens;
	// max_tokens): the byte offsets [Start, End) of each such member's
	// value in the body weighed, in body order, unused entries zero (End
	// 0). The proxy splices a lowered (cap_output) or pinned
	// (output_reservation.pin) maximum there and nowhere else: the body
	// passed the strict scan (no key twice, not even in another case), so
	// these are the only members an upstream reads.
	OutputFields [2]FieldSpan
	// Stream is true when the request asks for a streamed (SSE) response.
	Stream bool
	// IncludeUsage is true when a streamed response will carry the
	// upstream's usage without the proxy asking for it: a chat or
	// completions request that sets stream_options.include_usage, and every
	// Responses or Messages stream (those always end with usage). When
	// Stream is true and IncludeUsage false, the proxy may add
	// stream_options.include_usage itself (chat and completions only).
	IncludeUsage bool
	// ServerContext is true when the request pulls context the upstream
	// stores and the body does not show: a Responses request with
	// previous_response_id, conversation, a stored prompt template
	// ("prompt"), or item_reference input items. InputTokens then covers only
	// the body's own content, a lower bound of the real input; the
	// reconciliation with the reported usage settles the difference.
	ServerContext bool
	// GeoPinned is set for a Messages request whose "inference_geo" pins
	// inference to a geography (anything but "global" or null): Anthropic
	// bills it at 1.1x the model's token prices (data residency,
	// https://platform.claude.com/docs/en/build-with-claude/data-residency).
	GeoPinned bool
	// LongContext is set for a request whose headers opt into Anthropic's
	// 1M-context beta (WithLongContext): its model may read up to
	// LongContextInputTokens of input whatever its own window
	// (Model.MaxInputTokens), which the usage ceiling (Weigher.Ceiling)
	// then takes at least.
	LongContext bool
	// OutputDefaulted is set when a chat, Responses, Messages or (without
	// echo) legacy completions request names no output maximum (the field
	// absent, null or not a count):
	// OutputTokens is then the model's default per completion times
	// Choices, which a learned reservation may replace (package reserve).
	OutputDefaulted bool // beside the other one-byte fields: an Estimate, inside every exchange, keeps no padding word (proxy.TestExchangeSize)
	// CodeExecutionMinutes is the container-minutes a Messages request's
	// Anthropic code execution tool (code_execution_*) is reserved
	// (codeExecutionMinutes: codeExecutionReservedMinutes, 60, for a
	// request naming one), billed $0.05 an hour per container
	// (spec.Usage.CodeExecutionMinutes). Reserved, and charged as reserved:
	// no usage reports the execution time. A uint16 in the padding after
	// LongContext, so that an Estimate does not grow.
	CodeExecutionMinutes uint16
	// WebSearches is the most web searches a request's tools may run, each
	// billed $0.01 on top of the tokens (spec.Usage.WebSearches): for a
	// Messages request with Anthropic web search tools the sum of their
	// max_uses (20 for a tool without one); for a Responses request with
	// a web_search tool its max_tool_calls (20 without one). Reserved at
	// admission, reconciled with the searches the answer reports.
	WebSearches int64
	// WebSearchPreview is set for a Responses request whose web searches
	// (WebSearches) OpenAI bills at its web_search_preview tool's fee for
	// a model that does not reason, $25 per 1,000 calls against $10
	// (spec.Usage.WebSearchPreview; previewSearchPriced).
	WebSearchPreview bool
	// SearchContext is the search context size of the per-request search
	// fee a chat request will incur (spec.Usage.SearchContext;
	// SearchContextNone: none): a Perplexity Sonar model's, an OpenAI
	// search model's, any model's sent web_search_options, OpenRouter's
	// native web search; the size web_search_options.search_context_size
	// asks, else the upstream's default (Perplexity "low", OpenAI and
	// others "medium"), "high" when it cannot be read (searchAsk.fees).
	// Reserved at admission; settlement charges the size the usage
	// reports, or this one when it reports none (OpenAI's does not).
	SearchContext spec.SearchContextSize
	// ContainerGB is the container gigabyte-sessions a Responses request's
	// hosted code interpreter and shell tools may open (containerGB: each
	// container's memory_limit in GB, 1 by default, 64 for a container
	// named by id or a size llmguard cannot read), each billed $0.03 a GB
	// per session on top of the tokens (spec.Usage.ContainerGB). Reserved,
	// and charged as reserved: no usage reports a container. An int32 in
	// the padding after SearchContext, so that an Estimate, which every
	// exchange holds, does not grow (proxy's TestExchangeSize).
	ContainerGB int32
	// SearchResults is the web results OpenRouter's web plugin may fetch
	// for a chat request (plugins [{"id": "web"}] or a ":online" model,
	// with its Exa engine): its max_results, 5 when it names none, each
	// billed $4 per 1,000 (spec.Usage.SearchResults). Reserved, and
	// charged as reserved (no usage reports the count).
	SearchResults int64
	// PredictionTokens is, for a chat request with a Predicted Outputs
	// "prediction", its tokens times Choices: included in OutputTokens,
	// since the prediction's rejected tokens are billed as output on top
	// of what the model writes. Such a request's output maximum is not
	// lowered (cap_output), which would not bound them.
	PredictionTokens int64
	// OutputPinned is set when the body asks for output its maximum does
	// not bound: OpenRouter's reasoning.max_tokens (a reasoning budget the
	// gateway may grant beside the answer's maximum, included in
	// OutputTokens) or vLLM's min_tokens (the fewest tokens a completion
	// writes, whatever the maximum). Such a request's output maximum is
	// not lowered (cap_output): lowering it would not lower what the
	// upstream bills.
	OutputPinned bool
	// Audio is set for a chat request that sends or asks for audio, whose
	// audio tokens the upstream bills at the model's audio prices (8–16×
	// its text prices): an input_audio content part, an assistant message
	// that refers to an earlier audio answer ("audio": {"id"}, also
	// ServerContext: the upstream reads that audio back as input), an
	// "audio" output request, or "modalities" naming anything but "text"
	// (https://platform.openai.com/docs/api-reference/chat/create); for a
	// Responses request, an input part that sends audio
	// (responsesPartAudio: input_audio, an audio input_file, a
	// data:audio/… input_image).
	Audio bool
	// FileSearches is the most file search calls a Responses request's
	// file_search tools may make (responsesFileSearchCalls: its
	// max_tool_calls, else defaultWebSearchUses, 20, as a web_search tool
	// is reserved), each billed $2.50 per 1,000 on top of the tokens
	// (spec.Usage.FileSearches). Reserved at admission, reconciled with the
	// file_search_call items of the answer. An int32 in the padding after
	// Audio, so that an Estimate does not grow.
	FileSearches int32
	// Images is the number of images an image generation request asks
	// for ("n", default 1); ImageSize and ImageQuality are its "size" and
	// "quality" as sent, lowercased ("" when absent, not strings, or
	// longer than 32 bytes): what a model billed per image is priced by.
	Images                  int64
	ImageSize, ImageQuality string
	// Background is set for a Responses request run in the background
	// ("background" present and neither false nor null;
	// https://platform.openai.com/docs/guides/background): the upstream
	// answers before the run, with no usage, and the run goes on, billed,
	// whether or not a stream of it reaches its end. Its reservation is
	// all it is charged, so it must be bounded: the proxy refuses one with
	// OutputDefaulted, unless output_reservation.pin writes its
	// reservation into it as max_output_tokens.
	Background bool
	// HiddenReasoning is set for a chat, Responses or Messages request
	// whose model may reason before it answers, in tokens billed as
	// output that a stream never shows whole (OpenAI's chat streams carry
	// none of a reasoning model's reasoning; its Responses streams show a
	// reasoning item, at most a summary of it; Claude 4's thinking
	// streams as a summary): a body asking for reasoning (a
	// reasoning_effort other than "none", a reasoning object not turned
	// off, a Gemini thinking budget; outputFloor.hiddenReasoning; a
	// "thinking" not disabled, thinkingAsks: Messages, or chat through a
	// gateway) or a model of a family that reasons by default (OpenAI's
	// o-series and gpt-5 and later, Gemini). A stream of such a request
	// that ends without a usage is charged at least its output
	// reservation (proxy's settleStream): its visible text is not what
	// it cost. A bool in the padding after Background.
	HiddenReasoning bool
	// ImageTokens is the image output tokens a Responses request's
	// image_generation tool may write (imageGenTokens: the tool's size,
	// quality and partial_images, the dearest for "auto" or absent, times
	// its max_tool_calls, else defaultWebSearchUses, 20), billed at
	// $40 per million (spec.Usage.ImageTokens). Reserved at admission,
	// reconciled with the image_generation_call items the answer holds. An
	// int32 in the padding after Background.
	ImageTokens int32
	// ServiceTier is a chat or Responses request's "service_tier" as sent
	// ("auto", "default", "flex", "priority"; OpenAI's API reference), ""
	// when absent, not a string, or longer than 32 bytes (no tier is): the
	// tier the request is priced in. A Messages request's is FastModeTier
	// when it asks for fast mode, "" otherwise.
	ServiceTier string
	// Parsed is false when the body could not be weighed exactly as every
	// upstream reads it and the estimate is the conservative byte-based
	// fallback; Fault then says why.
	Parsed bool
	// Fault is why the body could not be weighed (FaultNone when Parsed):
	// not strict JSON, not an object, not UTF-8, a byte-order mark, a key
	// twice or in another case, too deep. The proxy refuses such a body
	// with 400 and the fault's code rather than forward it.
	Fault Fault
	// FaultDetail says where and what the fault is, for the caller's
	// message: a byte offset, the offending key (quoted, cut to 64 bytes),
	// "NaN and Infinity are not JSON numbers"… "" when Parsed.
	FaultDetail string
	// DuplicateKeys is set when an object of the body names a key twice
	// (see [DuplicateKeys]), or two keys that differ only in case
	// (FaultCaseVariantKey): parsers disagree on which value counts, so the
	// estimate may not be what the upstream serves. Parsed is then false
	// and the estimate byte-based.
	DuplicateKeys bool
	// TooDeep is set when the body nests more arrays and objects than
	// [Options.MaxDepth] allows (found by a flat scan, before any parser
	// recursed into it). Parsed is then false and the estimate byte-based;
	// the proxy refuses such a body rather than forward what it could not
	// weigh.
	TooDeep bool
	// CacheWrite is set when a chat or Messages request asks the upstream
	// to write its prompt to the cache ("cache_control" anywhere in the
	// body: Anthropic, and Claude behind OpenAI-compatible gateways), which
	// Anthropic bills at 1.25× the input price; CacheWrite1h when it also
	// names the 1-hour TTL ("1h"), billed at 2× (cachewrite.go). The
	// reservation then prices all of InputTokens at that write price.
	CacheWrite, CacheWrite1h bool
	// Bounded is set when part of the body's text was counted with the
	// weigher's upper bound instead of exactly (the body is larger than
	// [Options.ExactMaxBytes], or counting it exactly took longer than
	// [Options.CountTimeBudget]): InputTokens is then at least the exact
	// figure (see bound.go for how much more, per kind of text), Parsed
	// stays true, and reconciliation with the reported usage refunds the
	// excess as for any estimate.
	Bounded bool
	// NamesMaxTokens is set when a chat body names max_tokens (whatever its
	// value): one of OutputFields is that member. A chat body whose
	// OutputFields hold only max_completion_tokens is bounded by them only
	// on a server that reads that name (OpenAI's, vLLM), not on one that
	// reads max_tokens alone (Ollama, llama.cpp, TabbyAPI).
	NamesMaxTokens bool
	// MaxCompletionOnly is a chat body's max_completion_tokens as the
	// weigher read it (tokenCount: 1.0, "1" and 1e0 read as 1; capped at
	// maxTokens), in tokens per completion, when max_tokens holds no count
	// (absent, or 0, -1, null, a word); 0 otherwise. The reservation was
	// made from it, and a server that reads only max_tokens (Ollama,
	// llama.cpp, TabbyAPI; -1 there is "no limit") ignores it, so the proxy
	// writes it into max_tokens for such a server.
	MaxCompletionOnly int64
}

// Usage is what an upstream reports a request really used, in tokens:
// the one token-count type, defined in package spec ([spec.Usage]) so that
// pricing (policy), settlement (meter) and the ledger read the same fields
// the weigher fills. (Anthropic reports input_tokens excluding both cache
// fields; [ParseMessagesUsage] adds them back.)
type Usage = spec.Usage

// FieldSpan is where one member's value lies in a request body: byte
// offsets [Start, End) into the body as weighed. The zero value (End 0)
// is "none".
type FieldSpan struct{ Start, End int }

// spanOf is e's value span as a FieldSpan.
func spanOf(e elements) FieldSpan { return FieldSpan{Start: int(e.at.Start), End: int(e.at.End)} }

// addField records sp in the first free entry of fs (a third is dropped:
// no kind reads more than two output fields).
func addField(fs *[2]FieldSpan, sp FieldSpan) {
	for i := range fs {
		if fs[i].End == 0 {
			fs[i] = sp
			return
		}
	}
}
