// Package loadbench is the load benchmark behind cmd/llmguard-bench: it
// measures what llmguard costs on top of a plain reverse proxy, end to end,
// with every process's CPU read from its own accounting.
//
// [Run] starts, each as a separate process on 127.0.0.1 (the program run
// again as "child ROLE", see [Child]): the mock upstream (internal/mockllm),
// a bare fasthttp reverse proxy that forwards as llmguard's proxy package
// does and nothing more (the floor), llmguard on the in-memory store, and
// llmguard on Redis with a redis-server it starts. It then sends each the
// same bounded load, cell by cell — chat-completion bodies of agent
// conversations (conversation.go, corpus.go) of a given size, cold or warm,
// JSON or SSE, at a given concurrency — and returns one [Row] per cell and
// target: requests/s, latency quantiles, CPU per request of the proxy
// process (getrusage, read by the child itself) and of redis-server
// (/proc), and llmguard's own count of allowed requests and store errors
// from its /metrics. [Report.Markdown] prints them as one table with the
// latency added against the mock and the ratios to the bare proxy.
//
// Nothing here is on llmguard's request path; the package only drives it.
package loadbench
