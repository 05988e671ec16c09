// Package ledger records what every forwarded request really cost. It sits
// at the end of the request flow: once the proxy has forwarded a request and
// reconciled its buckets with the upstream's usage (or seen the upstream
// fail), it hands one Record to a Writer, which queues it without blocking
// and lets a goroutine append it, in batches, to a JSON-lines file rotated by
// size (lumberjack) and, optionally, to a Redis stream trimmed to an
// approximate length. Exactly one record is written per forwarded request,
// upstream errors included. A Record has no field for a prompt, a completion
// or an API key: only a hash of the key (KeyID), the identities the limits
// are keyed on, token counts and the cost in micro-USD.
//
// The reading side backs reports and invoices: ReadFiles reads the current
// file and its rotated backups (plain or gzip), ScanStream reads a time range
// back from the stream, and Summarize adds records up per tenant, user and
// model in exact integers.
//
// The file is the ledger of record. The stream is a convenience for reports
// across nodes: a batch that Redis refuses, or that arrives while Redis is
// known to be down, is counted and dropped from the stream only, never
// retried, and never delays the file.
package ledger
