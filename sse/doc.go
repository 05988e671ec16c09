// Package sse splits an upstream text/event-stream response into
// server-sent events while keeping the exact bytes of each one.
//
// In the request flow the proxy copies every chunk it reads from the
// upstream into a [Scanner] before (or instead of) writing it to the client.
// The scanner parses events with the WHATWG "event stream interpretation"
// rules (CRLF, LF or CR line endings, one leading BOM, comments, field:value
// with one optional space, data lines joined by LF) so the proxy can read
// token usage from the final chunk, and it hands back each event's raw bytes
// so the proxy can forward them unchanged or drop one whole event (a
// usage-only chunk it asked for on the client's behalf). Concatenating every
// raw slice delivered, in order, followed by [Scanner.Buffered] at end of
// stream, reproduces the input exactly, however the input was split into
// reads. Memory is bounded by [Scanner.MaxEventBytes]: a larger event is
// passed through in pieces flagged [Event.Truncated], never dropped or
// reordered.
//
// The package uses only the standard library, never panics on any input,
// and allocates nothing per event once its buffers have grown.
package sse
