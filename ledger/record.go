package ledger

import "time"

// Record is what one forwarded request cost: the ledger's only line type,
// one JSON object per line in the file and in the stream's "r" field.
//
// Token counts follow weigher.Usage: InputTokens includes CachedInputTokens
// and CacheWriteTokens, and OutputTokens includes ReasoningTokens. They are
// the upstream's counts when it reported usage, zero when it did not (an
// upstream error, an aborted stream); EstimatedInputTokens is always the
// proxy's own estimate made before forwarding, and EstimatedOutputTokens
// the output it reserved.
//
// A Record holds no prompt, no completion and no raw API key; keep it so
// (TestRecordJSONKeys pins the exact set of JSON keys). Its zero value is a
// valid, empty record. A Record is a plain value: copy it freely.
type Record struct {
	// TS is when the request finished. It is written in UTC as RFC 3339
	// with nanoseconds; Writer.Write sets it to the current time when zero.
	TS time.Time `json:"ts"`
	// RequestID is the proxy's id of the request (the one Reconcile is
	// applied once for).
	RequestID string `json:"request_id"`
	// KeyID identifies the caller's API key, already hashed by the caller:
	// never the key itself.
	KeyID  string `json:"key_id"`
	User   string `json:"user"`
	Tenant string `json:"tenant"`
	// Model is the model the request named.
	Model string `json:"model"`
	// Flavor is the API flavor (proxy.Flavor's String: "openai", …).
	Flavor string `json:"flavor"`
	// Status is the HTTP status answered to the client (a 5xx or 502 when
	// the upstream failed or could not be reached).
	Status int `json:"status"`

	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	// CacheWrite1hTokens is the part of CacheWriteTokens written with
	// Anthropic's 1-hour TTL, priced above the 5-minute writes
	// (spec.Usage.CacheWrite1hTokens).
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	ReasoningTokens    int64 `json:"reasoning_tokens"`
	// AudioInputTokens and AudioOutputTokens are the parts of InputTokens
	// and OutputTokens that are audio, priced at the model's audio prices;
	// WebSearches counts the searches billed per search on top of the
	// tokens (spec.Usage). With them every priced part of CostMicroUSD is
	// in the record (trial3: a 1-hour cache write's cost could not be
	// recomputed from the record).
	AudioInputTokens  int64 `json:"audio_input_tokens"`
	AudioOutputTokens int64 `json:"audio_output_tokens"`
	WebSearches       int64 `json:"web_searches"`
	// FileSearches counts the file search calls billed per call
	// (spec.Usage.FileSearches); SearchContextSize is the size ("low",
	// "medium", "high"; "" for none) of the per-request search fee charged
	// (Perplexity's Sonar, OpenAI's search models); SearchResults the web
	// results of OpenRouter's web plugin charged; SearchFeeMicroUSD the
	// part of CostMicroUSD those search fees and WebSearches make, in
	// micro-USD, rounded up on its own (policy.Price.SearchMicroUSD).
	FileSearches      int64  `json:"file_searches"`
	SearchContextSize string `json:"search_context_size"`
	SearchResults     int64  `json:"search_results"`
	SearchFeeMicroUSD int64  `json:"search_fee_micro_usd"`
	// ContainerGB is the container gigabyte-sessions charged for the
	// request's hosted code interpreter and shell tools, $0.03 each
	// (spec.Usage.ContainerGB, policy.ContainerGBPicoUSD): 1 for a default
	// 1 GB container, 64 for a 64 GB one.
	ContainerGB int64 `json:"container_gb"`
	// ImageTokens is the image output tokens of the Responses
	// image_generation tool charged, at $40 per million
	// (spec.Usage.ImageTokens, policy.ImageTokenPicoUSD).
	ImageTokens int64 `json:"image_tokens"`
	// CodeExecutionMinutes is the container-minutes of Anthropic's code
	// execution tool charged, at $0.05 an hour
	// (spec.Usage.CodeExecutionMinutes, policy.CodeExecutionMinutePicoUSD).
	CodeExecutionMinutes int64 `json:"code_execution_minutes"`
	EstimatedInputTokens int64 `json:"estimated_input_tokens"`
	// EstimatedOutputTokens is the output reserved at admission, in
	// tokens, whatever the unit of the request's tightest limit (see
	// Reserved): the request's maximum or the model's default, times its
	// choices (weigher.Estimate.OutputTokens). With EstimatedInputTokens it
	// is the token reservation a settlement corrected.
	EstimatedOutputTokens int64 `json:"estimated_output_tokens"`

	// Reserved is what admission took from the request's tightest limit
	// before forwarding, in that limit's unit (ReservedUnit).
	Reserved int64 `json:"reserved"`
	// ReservedUnit names Reserved's unit: "tokens", "requests" or
	// "micro_usd" (empty when the request matched no limit). Without it a
	// Reserved of 1 could be one request or one token.
	ReservedUnit string `json:"reserved_unit"`
	// CostMicroUSD is the request's actual cost in millionths of a US
	// dollar, from the upstream's usage and the model's price.
	CostMicroUSD int64 `json:"cost_micro_usd"`
	// Unmetered marks a call to an endpoint that spends tokens or money
	// upstream but that llmguard does not weigh, let through by the
	// operator's unmetered_paths: its cost is not in the token counts or
	// CostMicroUSD, and must be read from the upstream's own bill.
	Unmetered bool `json:"unmetered"`
	// UsageImplausible marks a request whose upstream reported more than it
	// can plausibly have billed (weigher.Weigher.Ceiling: the model's
	// window per call, its choices, its reservation): the token counts
	// and CostMicroUSD are then charged at that ceiling, and
	// ReportedInputTokens and ReportedOutputTokens hold the figures the
	// upstream reported (read saturating at 1e15 tokens), for finance to
	// take up with the upstream. Both are 0 when false.
	// ReportedCostMicroUSD is the cost it reported (a LiteLLM cost header,
	// an OpenRouter usage.cost; at most $1e12) when that was above the
	// request's cost ceiling and CostMicroUSD was charged at it; 0 otherwise.
	UsageImplausible     bool  `json:"usage_implausible"`
	ReportedInputTokens  int64 `json:"reported_input_tokens"`
	ReportedOutputTokens int64 `json:"reported_output_tokens"`
	ReportedCostMicroUSD int64 `json:"reported_cost_micro_usd"`
	// ServiceTier is the service tier CostMicroUSD is priced in ("default",
	// "priority" or "flex", as OpenAI spells them): the dearer of the tier
	// the request asked for (its service_tier, else default_service_tier)
	// and the tier its answer says it was served at. "" when the request is
	// not priced (unpriced model, not weighed, billed per image).
	ServiceTier string `json:"service_tier"`
}

// Fields lists Record's JSON keys in the order they are written. It is the
// whole schema: no other key is ever written.
func Fields() []string {
	return []string{
		"ts", "request_id", "key_id", "user", "tenant", "model", "flavor", "status",
		"input_tokens", "cached_input_tokens", "cache_write_tokens", "cache_write_1h_tokens", "output_tokens",
		"reasoning_tokens", "audio_input_tokens", "audio_output_tokens", "web_searches",
		"file_searches", "search_context_size", "search_results", "search_fee_micro_usd", "container_gb", "image_tokens", "code_execution_minutes", "estimated_input_tokens", "estimated_output_tokens", "reserved", "reserved_unit",
		"cost_micro_usd", "unmetered", "usage_implausible", "reported_input_tokens",
		"reported_output_tokens", "reported_cost_micro_usd", "service_tier",
	}
}
