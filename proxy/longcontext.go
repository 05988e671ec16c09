package proxy

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/weigher"
)

// anthropicBeta is the request field naming the Anthropic betas a call
// opts into (a comma-separated list; the field may be repeated).
var anthropicBeta = []byte("anthropic-beta")

// longContext reports whether the request h heads opts into Anthropic's
// 1M-token context window: an anthropic-beta field, its name in any case,
// any of its repeats, naming a context-1m beta (weigher.LongContextBeta).
// Such a call may read up to weigher.LongContextInputTokens of input
// whatever the model's configured max_input_tokens, so its hidden-context
// reservation and usage ceiling take that window (weigher.WithLongContext).
// Any weighed request carrying it is taken at its word, Messages or not: a
// gateway may pass the field on to Claude from another API's request, and
// the field only ever raises the caller's own reservation. It never
// allocates.
func longContext(h *fasthttp.RequestHeader) bool {
	for k, v := range h.All() {
		if bytes.EqualFold(k, anthropicBeta) && weigher.LongContextBeta(v) {
			return true
		}
	}
	return false
}
