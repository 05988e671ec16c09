// Package meter is llmguard's admission and settlement, without HTTP: the
// core every transport (today the fasthttp proxy) calls once per request.
//
// Admit takes a request's principal, estimate, route and policy; it prices
// the model, matches the rules that apply, takes the reservation from every
// bucket at once in one two-phase store call (a denial spends nothing),
// falls back to the per-node bucket for fail-open rules or refuses for a
// fail-closed one while the store is unavailable (DESIGN.md §7), reports
// budget warnings, and returns an Exchange holding the verdict. Settle,
// once per admitted Exchange, turns what the request really used (or an
// outcome: an upstream error, an unknown usage, a request never forwarded)
// into every bucket's delta, reconciles them in the store that took the
// reservation, records the metrics and writes the ledger record.
//
// Metrics are llmguard's request collectors (the transport counts requests
// and upstream answers in the same label caps). The tests are timelines on
// the memory store and a clock they move: admit, settle, admit again, read
// the levels; a store that fails on cue drives fail-open and fail-closed.
package meter
