package weigher

// Estimate is what the weigher makes of a request body before it is
// forwarded: the input tokens counted locally and the output reservation.
type Estimate struct {
	// Model is the request's "model" field, "" when absent or unparseable.
	Model string
	// InputTokens is the locally counted prompt size in tokens (framing,
	// names, tools and images included).
	InputTokens int64
	// OutputTokens is the output reservation in tokens: max_completion_tokens,
	// else max_tokens, else the model's default — times n (default 1).
	OutputTokens int64
	// Stream is true when the request asks for a streamed (SSE) response.
	Stream bool
	// IncludeUsage is true when a streaming request already sets
	// stream_options.include_usage.
	IncludeUsage bool
	// Parsed is false when the body could not be parsed and the estimate is
	// the conservative byte-based fallback.
	Parsed bool
}

// Usage is what an upstream reports a request really used, in tokens.
// InputTokens includes CachedInputTokens (OpenAI's prompt_tokens semantics);
// OutputTokens includes ReasoningTokens.
// The zero value is "nothing used".
type Usage struct {
	// InputTokens is the prompt size in tokens (OpenAI prompt_tokens).
	InputTokens int64
	// CachedInputTokens is the part of InputTokens served from the prompt
	// cache, in tokens (OpenAI prompt_tokens_details.cached_tokens).
	CachedInputTokens int64
	// OutputTokens is the generated size in tokens (OpenAI completion_tokens).
	OutputTokens int64
	// ReasoningTokens is the part of OutputTokens spent on hidden reasoning,
	// in tokens (OpenAI completion_tokens_details.reasoning_tokens).
	ReasoningTokens int64
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }
