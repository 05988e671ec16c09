package spec

import "strings"

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
	// writes gateways report in its shape: LiteLLM's
	// cache_creation_input_tokens beside a chat usage and
	// prompt_tokens_details.cache_creation_tokens, OpenRouter's
	// prompt_tokens_details.cache_write_tokens, Azure AI Foundry's
	// Responses input_tokens_details.cache_write_tokens).
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
	// WebSearchPreview is set when WebSearches were run by OpenAI's
	// Responses web_search_preview tool for a model that does not reason
	// (gpt-4o, gpt-4.1 and their minis), which OpenAI bills $25 per 1,000
	// calls, its search content tokens free, against $10 for the
	// web_search tool and for reasoning models (its pricing page, built-in
	// tools: "Web search preview (non-reasoning models)",
	// https://platform.openai.com/docs/pricing). The request decides it
	// (weigher.Estimate.WebSearchPreview), not the answer.
	WebSearchPreview bool
	// CodeExecutionMinutes is the container-minutes of Anthropic's code
	// execution tool (code_execution_*) charged for the request, billed
	// $0.05 an hour per container, at least 5 minutes an execution
	// (Anthropic's pricing page, "Code execution tool";
	// policy.CodeExecutionMinutePicoUSD). No usage reports the time
	// (usage.server_tool_use counts web searches and fetches only): the
	// request's (weigher.Estimate.CodeExecutionMinutes) is charged. A
	// uint16 in the padding after WebSearchPreview: a Usage does not grow.
	CodeExecutionMinutes uint16
	// ImageTokens is the image output tokens the Responses
	// image_generation tool wrote for the request, billed at the image
	// model's image output price on top of the tokens (gpt-image-1: $40
	// per million; a 1024x1024 image 272, 1,056 or 4,160 tokens at low,
	// medium or high quality, 100 more for each partial image streamed:
	// OpenAI's image generation guide and pricing page;
	// policy.ImageTokenPicoUSD). The answer's image_generation_call items
	// (each by its size and quality) or its tool_usage.image_gen tokens,
	// the larger. An int32 in the padding after WebSearchPreview.
	ImageTokens int32
	// FileSearches is how many file searches the upstream ran for the
	// request, billed per call on top of the tokens (OpenAI Responses:
	// the file_search_call items of the output, $2.50 per 1,000 calls,
	// its pricing page's built-in tools, Responses API only).
	FileSearches int64
	// SearchContext is the search context size of the per-request search
	// fee the upstream billed (Perplexity's Sonar models: usage
	// search_context_size, a fee per 1,000 requests by size, its pricing
	// page's request pricing; OpenAI's search models, whose usage names
	// none: the size the request asked, charged as reserved);
	// SearchContextNone: no such fee.
	SearchContext SearchContextSize
	// ContainerGB is the container gigabyte-sessions the upstream may have
	// opened for the request's hosted code interpreter and shell tools
	// (OpenAI Responses), billed $0.03 a GB per container session on top
	// of the tokens: $0.03 for the default 1 GB container, $0.12 for 4 GB,
	// $0.48 for 16 GB, $1.92 for 64 GB (OpenAI's pricing page, built-in
	// tools, the 20-minute session rate; a container "auto" is opened for
	// the request whether or not the model calls the tool). No usage
	// reports it: the request's (weigher.Estimate.ContainerGB) is charged.
	// An int32 in the padding after SearchContext: a Usage does not grow.
	ContainerGB int32
	// SearchResults is how many web results OpenRouter's web plugin
	// (plugins [{"id": "web"}], or a ":online" model) fetched for the
	// request with its Exa engine, billed $4 per 1,000 results on top of
	// the tokens (https://openrouter.ai/docs/features/web-search,
	// pricing). Its usage reports no count: the max_results asked (5 by
	// default) is charged.
	SearchResults int64
	// ServiceTier is the service tier the answer says it was served at,
	// which may not be the one the request asked for: OpenAI's
	// service_tier of a chat completion, of a streamed chunk or of a
	// Responses response ("default", "priority", "flex", "scale"; a
	// request sent with none or "auto" is served at the project's own
	// default, which may be priority,
	// https://developers.openai.com/api/docs/guides/priority-processing).
	// It is the name as written when it is a string of at most
	// MaxServiceTierBytes bytes; TierUnread when the answer names one
	// llmguard cannot take as written (not a string, longer, or two
	// readings of it that disagree: two members of the name, two chunks
	// of a stream); "" when it names none (or null). Anthropic's Messages
	// usage also names a service_tier, which is not read: its Priority
	// Tier is bought as committed capacity, each token billed at the
	// standard rate
	// (https://platform.claude.com/docs/en/api/service-tiers).
	ServiceTier string
	// BilledMicroUSD is what the upstream says it billed for the request,
	// in micro-USD rounded up: OpenRouter's usage.cost, in credits (1
	// credit = 1 USD), which it reports in every answer's usage, JSON or
	// the last event of a stream, without being asked (its usage
	// accounting guide, https://openrouter.ai/docs/use-cases/usage-accounting:
	// usage {include: true} "deprecated and [has] no effect"). It is the
	// price of the provider OpenRouter routed to, which a provider object
	// (order, only, ignore, sort…) or a fallback may make dearer than the
	// price table's. A request is charged the larger of this and its
	// tokens at the table's price (policy.Price.MicroUSD). 0: none
	// reported.
	BilledMicroUSD int64
}

// MaxServiceTierBytes is the longest service tier name a usage keeps
// ([Usage.ServiceTier]), in bytes: OpenAI's longest is 8 ("priority").
const MaxServiceTierBytes = 32

// TierUnread is the [Usage.ServiceTier] of an answer that names its
// service tier in a way llmguard does not take as written; it is no
// tier's name, so it is priced as an unknown tier: the dearest
// (policy.Policy.Quote).
const TierUnread = "?"

// SearchContextSize is the search context size a per-request search fee
// is billed at (Perplexity's web_search_options.search_context_size, which
// its usage reports as search_context_size). The zero value is
// SearchContextNone: the request was billed no per-request search fee.
type SearchContextSize uint8

// Search context sizes, in the order of searchContextNames.
const (
	// SearchContextNone: no per-request search fee.
	SearchContextNone SearchContextSize = iota
	// SearchContextLow is "low" (Perplexity's default).
	SearchContextLow
	// SearchContextMedium is "medium".
	SearchContextMedium
	// SearchContextHigh is "high"; a size the usage names that llmguard
	// does not know is read as it, the dearest.
	SearchContextHigh
)

// searchContextNames is each SearchContextSize's name, indexed by value.
var searchContextNames = names[SearchContextSize]{SearchContextNone: "", SearchContextLow: "low", SearchContextMedium: "medium", SearchContextHigh: "high"}

// String is the size's name as Perplexity spells it ("low", "medium",
// "high"; "" for none); a value outside the enum is "unknown(<n>)".
func (s SearchContextSize) String() string { return searchContextNames.of(s) }

// ParseSearchContextSize reads a usage's search_context_size: "low",
// "medium" or "high" (any case, surrounding space ignored) are those
// sizes, "" is SearchContextNone, and any other name SearchContextHigh
// (a size the upstream billed that llmguard does not know is charged at
// the dearest it knows).
func ParseSearchContextSize(s string) SearchContextSize {
	s = strings.TrimSpace(s)
	for i, n := range searchContextNames {
		if strings.EqualFold(s, n) {
			return SearchContextSize(i)
		}
	}
	return SearchContextHigh
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
var sourceNames = names[Source]{
	SourceReported: "reported",
	SourcePartial:  "partial",
	SourceCounted:  "counted",
	SourceRefund:   "refund",
	SourceReserved: "reserved",
}

// String is the source's metric-label name; a value outside the enum is
// "unknown(<n>)".
func (s Source) String() string { return sourceNames.of(s) }

// Known reports whether the source carries a usage to charge (reported,
// partial or counted), rather than a refund or the reservation.
func (s Source) Known() bool { return s <= SourceCounted }
