// Package obs is llmguard's per-request observability: the access log (one
// structured slog line per request, written once the request is settled)
// and OpenTelemetry tracing (a span per request, exported over OTLP). Both
// are off by default; the proxy holds a nil *AccessLog and a nil *Tracing
// then, and pays nothing for them per request.
//
// The proxy fills one Entry per request from its settlement's ledger
// record (ledger.Record: tokens, cost, reservation) and what only the
// transport knows (outcome, denying limit, overhead, upstream latency); the
// access log writes it and the request's root span carries it as
// attributes. An Entry never holds prompt or completion text, a raw key or
// an upstream credential: the key appears only as its hashed id.
package obs
