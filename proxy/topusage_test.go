package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmguard/llmguard/spec"
)

// TestTopUsageReadsAsParsersDo (tier35): an answer relayed unread names
// its tier, type, response or usage in shapes the parsers of the
// upstream's SDKs read as those members — a key or a value written with
// an escape, a key in another case (encoding/json ignores it), a member
// named twice (first-wins or last-wins), an SSE event whose JSON is
// spread over several data lines (the client joins them), or whose type is
// its event field alone — and topUsage reads each as they do, split
// anywhere. Before, each was read at the tier asked (""), or the tier of
// one of two members only.
func TestTopUsageReadsAsParsersDo(t *testing.T) {
	completed := func(resp string) string { return `{"type":"response.completed","response":` + resp + `}` }
	for _, tc := range []struct {
		name, in, tier string
		usages         []string
	}{
		{name: "key escaped", in: `{"service\u005ftier":"priority"}`, tier: "priority"},
		{name: "key all escaped", in: `{"\u0073\u0065\u0072\u0076\u0069\u0063\u0065\u005f\u0074\u0069\u0065\u0072":"priority"}`, tier: "priority"},
		{name: "key short-escaped", in: `{"service_tie\/r":"x","servic\u0065_tier":"flex"}`, tier: "flex"},
		{name: "value escaped", in: `{"service_tier":"priorit\u0079"}`, tier: "priority"},
		{name: "key in capitals", in: `{"SERVICE_TIER":"priority"}`, tier: "priority"},
		{name: "key with a long s", in: `{"ſervice_tier":"priority"}`, tier: "priority"},
		{name: "type escaped", in: `{"type":"response.complete\u0064","response":{"service_tier":"priority"}}`, tier: "priority"},
		{name: "response key escaped", in: `{"type":"response.completed","r\u0065sponse":{"servic\u0065_tier":"priority"}}`, tier: "priority"},
		{name: "type named twice, terminal first", in: `{"type":"response.completed","response":{"service_tier":"priority"},"type":"response.in_progress"}`, tier: "priority"},
		{name: "type named twice, terminal last", in: `{"type":"response.in_progress","response":{"service_tier":"priority"},"type":"response.completed"}`, tier: "priority"},
		{name: "response named twice", in: completed(`{"service_tier":"priority"},"response":{"service_tier":"default"}`), tier: spec.TierUnread},
		{name: "response tier named twice", in: completed(`{"service_tier":"priority","service_tier":"default"}`), tier: spec.TierUnread},
		{name: "top tier named twice", in: `{"service_tier":"priority","service_tier":"default"}`, tier: spec.TierUnread},
		{name: "usage named twice", in: `{"usage":{"a":1},"usage":{"b":2}}`, usages: []string{`{"a":1}`, `{"b":2}`}},
		{name: "usage key escaped", in: `{"\u0075sage":{"a":1}}`, usages: []string{`{"a":1}`}},
		{name: "a terminal event's response usage", in: `{"type":"response.completed","response":{"id":"r","usage":{"a":1}}}`, usages: []string{`{"a":1}`}},
		{name: "its type after it", in: `{"response":{"usage":{"a":1}},"type":"response.incomplete"}`, usages: []string{`{"a":1}`}},
		{name: "its type in the event field", in: "event: response.completed\ndata: {\"response\":{\"usage\":{\"a\":1}}}\n\n", usages: []string{`{"a":1}`}},
		{name: "its type in the event field after it", in: "data: {\"response\":{\"usage\":{\"a\":1}}}\nevent: response.completed\n\n", usages: []string{`{"a":1}`}},
		{name: "not a terminal event's response usage", in: `{"type":"response.created","response":{"usage":{"a":1}}}`},
		{name: "a response usage cut with its event", in: "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"a\":1}}\n\n"},
		{name: "a malformed key escape is no key", in: `{"service\u00_tier":"priority"}`},
		{name: "an unknown escape in a type", in: `{"type":"response.complete\d","response":{"service_tier":"priority"}}`},
		// SSE framing.
		{name: "data lines", in: "data: {\"id\":\"x\",\ndata: \"service_tier\":\ndata: \"priority\",\"usage\":\ndata: {\"a\":1}}\n\n", tier: "priority", usages: []string{"{\"a\":1}"}},
		{name: "data lines, CRLF", in: "data: {\"service_tier\"\r\ndata:   :  \"priority\"}\r\n\r\n", tier: "priority"},
		{name: "data lines, CR", in: "data:{\"service_tier\":\rdata:\"priority\"}\r\r", tier: "priority"},
		{name: "data lines around a comment and an id", in: "data: {\"service_tier\":\n: keep-alive {\nid: 7\"\ndata: \"priority\"}\n\n", tier: "priority"},
		{name: "a data field alone", in: "data: {\"service_tier\":\ndata\ndata: \"priority\"}\n\n", tier: "priority"},
		{name: "after a BOM", in: "\ufeffdata: {\"service_tier\":\ndata: \"priority\"}\n\n", tier: "priority"},
		{name: "responses data lines", in: "event: response.completed\ndata: {\"type\":\"response.completed\",\ndata: \"response\":{\"output\":[],\ndata: \"service_tier\":\"priority\"}}\n\n", tier: "priority"},
		{name: "type in the event field first", in: "event: response.completed\ndata: {\"response\":{\"service_tier\":\"priority\"}}\n\n", tier: "priority"},
		{name: "type in the event field last", in: "data: {\"response\":{\"service_tier\":\"priority\"}}\nevent: response.completed\n\n", tier: "priority"},
		{name: "event field of another event", in: "event: response.created\ndata: {\"response\":{\"service_tier\":\"auto\"}}\n\n" +
			"data: {\"response\":{\"service_tier\":\"flex\"}}\nevent: response.failed\n\n", tier: "flex"},
		{name: "an event ended inside its JSON", in: "data: {\"service_tier\":\"priority\",\"choices\":[\n\ndata: {\"service_tier\":\"priority\"}\n\n", tier: "priority"},
		{name: "a value cut by its event's end", in: "data: {\"service_tier\":\"prio\n\ndata: {\"x\":1}\n\n", tier: spec.TierUnread},
		{name: "a data line's prefix is not JSON", in: "data: {\"choices\":[],\ndata: \"x\":1}\n\ndata: {\"service_tier\":\"flex\"}\n\n", tier: "flex"},
		{name: "a field that is not data", in: "data: {\"choices\":[],\ndatum: {\"service_tier\":\"priority\"}\ndata: \"x\":1}\n\n"},
		{name: "leading spaces, then a field", in: "  data: {\"service_tier\":\"flex\"}\n\ndata: {\"service_tier\":\ndata: \"flex\"}\n\n", tier: "flex"},
		{name: "JSON with line breaks", in: "{\n  \"service_tier\":\n  \"priority\"\n}\n", tier: "priority"},
		{name: "JSON after a BOM", in: "\ufeff{\"service_tier\":\"flex\"}", tier: "flex"},
	} {
		for size := 1; size <= len(tc.in); size += 3 {
			got, tier := scanInPieces([]byte(tc.in), size)
			if tier != tc.tier || strings.Join(got, "|") != strings.Join(tc.usages, "|") {
				t.Errorf("%s, in pieces of %d: tier %q and usages %q, want %q and %q", tc.name, size, tier, got, tc.tier, tc.usages)
				break
			}
		}
	}
}

// FuzzUnescapeKey: any bytes, never a panic; a valid JSON string decodes
// as encoding/json decodes it (a lone surrogate as U+FFFD), and a string
// encoding/json refuses is refused, or holds no escape (a control byte,
// which unescapeKey does not look for: no member's name holds one).
func FuzzUnescapeKey(f *testing.F) {
	for _, s := range []string{`service\u005ftier`, `\ud83d\ude00`, `\ud83d`, `a\"\\\/\b\f\n\r\t`, `\u00`, `\x`, `\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := unescapeKey(nil, b)
		var want string
		err := json.Unmarshal(append(append([]byte{'"'}, b...), '"'), &want)
		switch {
		case err == nil && (!ok || string(got) != want) && utf8.Valid(b):
			t.Fatalf("%q: %q (ok %v), encoding/json %q", b, got, ok, want)
		case err != nil && ok && bytes.IndexByte(b, '\\') >= 0 && !bytes.ContainsAny(b, "\"\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f") && utf8.Valid(b):
			t.Fatalf("%q: read as %q, encoding/json refuses it: %v", b, got, err)
		}
	})
}
