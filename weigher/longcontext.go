package weigher

import "bytes"

// LongContextInputTokens is the context window, in tokens, of a Claude
// model called with Anthropic's 1M-context beta (request header
// "anthropic-beta: context-1m-2025-08-07"; Claude Sonnet 4 and later
// Sonnet and Opus models, https://platform.claude.com/docs/en/build-with-claude/context-windows):
// up to 1,000,000 input tokens, five times the 200,000 the same model
// reads without it.
const LongContextInputTokens = 1_000_000

// LongContextBeta reports whether value, an anthropic-beta header value
// (a comma-separated list of beta names), asks for a long context window:
// a beta whose name holds "context-1m", ASCII case aside (the dated
// context-1m-2025-08-07 and any later date of it). It never allocates.
func LongContextBeta(value []byte) bool {
	const token = "context-1m"
	for i := 0; i+len(token) <= len(value); i++ {
		if bytes.EqualFold(value[i:i+len(token)], []byte(token)) {
			return true
		}
	}
	return false
}

// WithLongContext is e for a request whose headers opt into Anthropic's
// 1M-context beta (LongContextBeta): LongContext set, and, for a request
// with hidden context (ServerContext), the input reserved raised to
// LongContextInputTokens, since the upstream may fill that larger window
// with context the body does not show; reconciliation gives back what it
// did not use.
func WithLongContext(e Estimate) Estimate {
	e.LongContext = true
	if e.ServerContext {
		e.InputTokens = max(e.InputTokens, LongContextInputTokens)
	}
	return e
}
