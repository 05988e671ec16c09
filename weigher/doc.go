// Package weigher turns a request body into a cost estimate before the proxy
// forwards it, and reads back what the upstream says the request really used.
//
// In the request flow (DESIGN.md §1, step 3 "weigh") the proxy hands the raw
// body of an OpenAI /v1/chat/completions call to [Weigher.Chat]. The body is
// parsed once, without building a tree (gjson over a zero-copy string view),
// and its text is counted in the model's tiktoken encoding (o200k_base,
// cl100k_base: an allocation-free counter checked against tiktoken-go, see
// bpe.go; legacy encodings: tiktoken-go itself), plus the chat framing
// tokens, tool definitions and images,
// following OpenAI's published counting rules. The output reservation comes
// from max_completion_tokens / max_tokens (times n) or the model's configured
// default. A body that is not JSON never fails or panics: it gets a
// conservative byte-based estimate ([Weigher.Bytes]) and is forwarded anyway,
// so the upstream judges it.
//
// After the call, the usage tap (DESIGN.md §1, step 7) reads the upstream's
// real usage with [ParseChatUsage] (a JSON response) or [ParseChatChunk] (one
// SSE data payload of a stream), and a stream the client abandons is charged
// its streamed text, counted with [Weigher.CountText].
//
// Vocabularies are the offline copies embedded by
// github.com/pkoukk/tiktoken-go-loader: the package installs that loader
// once, before it builds any encoder, so it never reaches for the network.
// Encoders are built by [New] at start-up; a *Weigher is immutable afterwards
// and safe for concurrent use.
package weigher
