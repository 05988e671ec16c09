package obs

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/llmguard/llmguard/ledger"
)

// Entry is what is known of one settled request: its ledger record (id,
// hashed key id, user, tenant, model, flavor, client status, actual
// tokens, reservation, cost in micro-USD) and what the transport adds. It
// holds no prompt or completion text and no raw key. The zero value is an
// empty entry; an Entry is a plain value.
type Entry struct {
	ledger.Record
	// Outcome is the request's requests_total outcome (meter.Outcome:
	// allowed, limited, unauthorized, invalid, upstream_error, fail_open, …).
	Outcome string
	// Limit names the limit that denied the request (or refused it as
	// fail-closed, unmetered or unpriced), "" when none did.
	Limit string
	// Kind is the endpoint's kind (weigher.Kind: chat, responses, …), ""
	// before the request was routed.
	Kind string
	// EstimatedOutputTokens is the output reserved at admission, in tokens.
	EstimatedOutputTokens int64
	// Overhead is llmguard's own time: from the request's body being read
	// until its answer is handed to the client, less Upstream and Wait.
	Overhead time.Duration
	// Wait is how long the request was held waiting for its buckets
	// (on_limit: wait); zero when it was not held.
	Wait time.Duration
	// Upstream is the time spent waiting on the upstream: until its
	// response headers, plus reading its body when it is not streamed (for
	// a stream, its time to first byte).
	Upstream time.Duration
	// Duration is the request's whole time, from its arrival until it was
	// settled (a stream's end included).
	Duration time.Duration
	// ClientGone: the client left before its streamed answer ended.
	ClientGone bool
	// TraceID is the request's trace id (32 hex digits) when tracing is on,
	// "" otherwise.
	TraceID string
}

// field is one access-log field and span attribute: its name and how it
// is read from an Entry, as a string, an integer or a boolean (exactly one
// of str, num, flag is set).
type field struct {
	name string
	str  func(*Entry) string
	num  func(*Entry) int64
	flag func(*Entry) bool
}

func durationUS(d time.Duration) int64 { return d.Microseconds() }

// fields is the whole schema of an access-log line, in the order written;
// each is also the span attribute "llmguard.<name>". Token counts are in
// tokens, cost in micro-USD, times in microseconds (_us).
var fields = []field{
	{name: "request_id", str: func(e *Entry) string { return e.RequestID }},
	{name: "key_id", str: func(e *Entry) string { return e.KeyID }},
	{name: "user", str: func(e *Entry) string { return e.User }},
	{name: "tenant", str: func(e *Entry) string { return e.Tenant }},
	{name: "model", str: func(e *Entry) string { return e.Model }},
	{name: "flavor", str: func(e *Entry) string { return e.Flavor }},
	{name: "kind", str: func(e *Entry) string { return e.Kind }},
	{name: "status", num: func(e *Entry) int64 { return int64(e.Status) }},
	{name: "outcome", str: func(e *Entry) string { return e.Outcome }},
	{name: "limit", str: func(e *Entry) string { return e.Limit }},
	{name: "estimated_input_tokens", num: func(e *Entry) int64 { return e.EstimatedInputTokens }},
	{name: "estimated_output_tokens", num: func(e *Entry) int64 { return e.EstimatedOutputTokens }},
	{name: "input_tokens", num: func(e *Entry) int64 { return e.InputTokens }},
	{name: "cached_input_tokens", num: func(e *Entry) int64 { return e.CachedInputTokens }},
	{name: "output_tokens", num: func(e *Entry) int64 { return e.OutputTokens }},
	{name: "reasoning_tokens", num: func(e *Entry) int64 { return e.ReasoningTokens }},
	{name: "reserved", num: func(e *Entry) int64 { return e.Reserved }},
	{name: "reserved_unit", str: func(e *Entry) string { return e.ReservedUnit }},
	{name: "cost_micro_usd", num: func(e *Entry) int64 { return e.CostMicroUSD }},
	{name: "overhead_us", num: func(e *Entry) int64 { return durationUS(e.Overhead) }},
	{name: "upstream_us", num: func(e *Entry) int64 { return durationUS(e.Upstream) }},
	{name: "wait_us", num: func(e *Entry) int64 { return durationUS(e.Wait) }},
	{name: "duration_us", num: func(e *Entry) int64 { return durationUS(e.Duration) }},
	{name: "client_gone", flag: func(e *Entry) bool { return e.ClientGone }},
}

// Fields lists the access log's field names in the order they are written
// (trace_id follows them when tracing is on). It is the whole schema.
func Fields() []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return names
}

// spanKeys are the span attribute keys of fields, "llmguard.<name>".
var spanKeys = func() []attribute.Key {
	keys := make([]attribute.Key, len(fields))
	for i, f := range fields {
		keys[i] = attribute.Key("llmguard." + f.name)
	}
	return keys
}()

// appendAttrs appends e's access-log attributes to dst.
func (e *Entry) appendAttrs(dst []slog.Attr) []slog.Attr {
	for _, f := range fields {
		switch {
		case f.str != nil:
			dst = append(dst, slog.String(f.name, f.str(e)))
		case f.num != nil:
			dst = append(dst, slog.Int64(f.name, f.num(e)))
		default:
			dst = append(dst, slog.Bool(f.name, f.flag(e)))
		}
	}
	if e.TraceID != "" {
		dst = append(dst, slog.String("trace_id", e.TraceID))
	}
	return dst
}

// SpanAttributes appends e's fields to dst as span attributes
// ("llmguard.<name>", the access log's names) and returns it.
func (e *Entry) SpanAttributes(dst []attribute.KeyValue) []attribute.KeyValue {
	for i, f := range fields {
		switch {
		case f.str != nil:
			dst = append(dst, spanKeys[i].String(f.str(e)))
		case f.num != nil:
			dst = append(dst, spanKeys[i].Int64(f.num(e)))
		default:
			dst = append(dst, spanKeys[i].Bool(f.flag(e)))
		}
	}
	return dst
}
