// Package proxy is llmguard's fasthttp request handler. For each request it
// identifies the caller, weighs the body, takes the cost from every matching
// bucket in one two-phase store call, and then either answers 429 (the
// caller contract of DESIGN.md §6) or forwards to the upstream, relays the
// answer untouched (SSE streamed event by event), reads the usage on the way
// and reconciles each bucket with actual − reserved.
package proxy
