// Package weigher turns a request body into a cost estimate before the proxy
// forwards it, and reads back what the upstream says the request really used.
//
// In the request flow (DESIGN.md §1, step 3 "weigh") the proxy classifies a
// request with [KindOf] and hands its raw body to [Weigher.Weigh], or to one
// flavor directly: [Weigher.Chat] (OpenAI /v1/chat/completions),
// [Weigher.Responses] (/v1/responses), [Weigher.Completions] (legacy
// /v1/completions), [Weigher.Embeddings] (/v1/embeddings) and
// [Weigher.Messages] (Anthropic /v1/messages; /v1/messages/count_tokens is
// recognised as [KindCountTokens] and not weighed). The body is first
// checked by one flat, non-recursive pass (internal/jsonscan: strict syntax
// in UTF-8 without a byte-order mark, nesting within [Options.MaxDepth],
// keys named twice or in two cases), then parsed once,
// without building a tree (gjson over a zero-copy string view), and its text
// is counted in the model's tiktoken encoding (o200k_base, cl100k_base: an
// allocation-free counter checked against tiktoken-go, see bpe.go; legacy
// encodings: tiktoken-go itself), plus the framing tokens, tool definitions,
// images and documents, following the providers' published counting rules.
// Claude has no public tokenizer: its text is counted in o200k_base times a
// per-model safety factor (claude.go). The output reservation comes from the
// request's maximum or the model's configured default. A body that every
// upstream might not read as the weigher does — not strict UTF-8 JSON, not
// an object, a key twice or in another case (also a key that is a field the
// weigher reads, fields.go, only when case is ignored), nested too deep —
// never fails or panics: it gets a byte-based estimate ([Weigher.Bytes])
// with Parsed false and Estimate.Fault saying why, for the proxy to refuse.
// Weighing takes time linear in the body whatever its shape (see
// BenchmarkBodyShapes).
//
// After the call, the usage tap (DESIGN.md §1, step 7) reads the upstream's
// real usage with [ParseUsage] (a JSON response) or a [Stream] fed every SSE
// event of a streamed one; usage is normalised to OpenAI's semantics
// ([Usage]: input includes cached and cache-written tokens). A stream that
// ends without usage is settled by [Stream.Settle] from the reported figures,
// the estimate and its streamed text counted with [Weigher.CountText].
//
// Vocabularies are the offline copies embedded by
// github.com/pkoukk/tiktoken-go-loader: the package installs that loader
// once, before it builds any encoder, so it never reaches for the network.
// Encoders are built by [New] at start-up; a *Weigher is immutable afterwards
// and safe for concurrent use.
package weigher
