package spec

// Usage is what an upstream reports a request really used, in tokens,
// normalised to OpenAI's semantics whatever the flavor:
// InputTokens includes CachedInputTokens and CacheWriteTokens, and
// OutputTokens includes ReasoningTokens. The zero value is "nothing used".
type Usage struct {
	// InputTokens is the whole prompt size in tokens, cached and
	// cache-written tokens included (OpenAI prompt_tokens / input_tokens;
	// Anthropic input_tokens + cache_creation_input_tokens +
	// cache_read_input_tokens).
	InputTokens int64
	// CachedInputTokens is the part of InputTokens read from the prompt
	// cache, in tokens (OpenAI prompt_tokens_details.cached_tokens /
	// input_tokens_details.cached_tokens; Anthropic cache_read_input_tokens).
	CachedInputTokens int64
	// CacheWriteTokens is the part of InputTokens written to the prompt
	// cache, in tokens (Anthropic cache_creation_input_tokens, priced above
	// ordinary input; 0 for OpenAI, whose caching is implicit, but for the
	// cache_creation_input_tokens LiteLLM reports beside a chat usage).
	CacheWriteTokens int64
	// CacheWrite1hTokens is the part of CacheWriteTokens written with the
	// 1-hour TTL, in tokens (Anthropic
	// cache_creation.ephemeral_1h_input_tokens, priced above the 5-minute
	// writes); the rest of CacheWriteTokens is 5-minute writes.
	CacheWrite1hTokens int64
	// OutputTokens is the generated size in tokens (OpenAI completion_tokens
	// / output_tokens; Anthropic output_tokens, thinking included).
	OutputTokens int64
	// ReasoningTokens is the part of OutputTokens spent on hidden reasoning,
	// in tokens (OpenAI completion_tokens_details.reasoning_tokens /
	// output_tokens_details.reasoning_tokens; Anthropic reports none
	// separately, so 0).
	ReasoningTokens int64
	// AudioInputTokens is the part of InputTokens that is audio, in tokens
	// (OpenAI prompt_tokens_details.audio_tokens: gpt-4o-audio-preview,
	// gpt-audio and their minis bill audio input at 8–16× their text input
	// price, https://developers.openai.com/api/docs/models/gpt-audio).
	AudioInputTokens int64
	// AudioOutputTokens is the part of OutputTokens that is audio, in
	// tokens (OpenAI completion_tokens_details.audio_tokens, billed at the
	// model's audio output price).
	AudioOutputTokens int64
	// WebSearches is how many web searches the upstream ran for the
	// request, billed per search on top of the tokens (Anthropic
	// usage.server_tool_use.web_search_requests: $10 per 1,000 searches,
	// its web search tool guide and pricing page; OpenAI Responses: the
	// web_search_call items of the output, $10 per 1,000 calls, its
	// pricing page).
	WebSearches int64
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Source says where a settled usage comes from: what the upstream reported,
// what llmguard counted itself, or nothing at all. The zero value is
// SourceReported.
type Source uint8

// Sources of a settled usage, in the order of sourceNames.
const (
	// SourceReported is the upstream's final usage, as reported.
	SourceReported Source = iota
	// SourcePartial mixes reported figures (a Messages stream's input from
	// message_start, a cumulative output) with the estimate's input and the
	// locally counted output for what was not reported.
	SourcePartial
	// SourceCounted is the estimate's input plus the locally counted
	// output: nothing was reported (the client left, or the stream broke).
	SourceCounted
	// SourceRefund is an upstream error with no usage and no output: every
	// reservation is given back (DESIGN.md §2), the Usage is zero.
	SourceRefund
	// SourceReserved is an answer whose usage is unknown (not reported and
	// not countable): the reservation stands as the charge.
	SourceReserved
)

// sourceNames is the metric-label name of each Source, indexed by value.
var sourceNames = []string{
	SourceReported: "reported",
	SourcePartial:  "partial",
	SourceCounted:  "counted",
	SourceRefund:   "refund",
	SourceReserved: "reserved",
}

// String is the source's metric-label name; a value outside the enum is
// "unknown(<n>)".
func (s Source) String() string { return name(sourceNames, int(s)) }

// Known reports whether the source carries a usage to charge (reported,
// partial or counted), rather than a refund or the reservation.
func (s Source) Known() bool { return s <= SourceCounted }
