package weigher

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
	// n. Responses: max_output_tokens, else the model's default. Completions:
	// max_tokens (default 16) times max(n, best_of) times the number of
	// prompts, plus the echoed prompt. Embeddings: 0. Messages: max_tokens,
	// else the model's default.
	OutputTokens int64
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
	// Parsed is false when the body could not be parsed and the estimate is
	// the conservative byte-based fallback.
	Parsed bool
	// DuplicateKeys is set when an object of the body names a key twice
	// (see [DuplicateKeys]): parsers disagree on which value counts, so the
	// estimate may not be what the upstream serves. Parsed is then false
	// and the estimate byte-based.
	DuplicateKeys bool
	// TooDeep is set when the body nests more arrays and objects than
	// [Options.MaxDepth] allows (found by a flat scan, before any parser
	// recursed into it). Parsed is then false and the estimate byte-based;
	// the proxy refuses such a body rather than forward what it could not
	// weigh.
	TooDeep bool
}

// Usage is what an upstream reports a request really used, in tokens,
// normalised to OpenAI's semantics whatever the flavor:
// InputTokens includes CachedInputTokens and CacheWriteTokens, and
// OutputTokens includes ReasoningTokens. (Anthropic reports input_tokens
// excluding both cache fields; [ParseMessagesUsage] adds them back.)
// The zero value is "nothing used".
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
	// ordinary input; always 0 for OpenAI, whose caching is implicit).
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
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }
