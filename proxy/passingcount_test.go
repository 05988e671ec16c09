package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// unescapeInPieces decodes b through one jsonUnescaper fed in pieces of
// size bytes (the last shorter), then its end.
func unescapeInPieces(b []byte, size int) []byte {
	var u jsonUnescaper
	var out []byte
	for len(b) > 0 {
		n := min(size, len(b))
		out = append(out, u.decode(b[:n])...)
		b = b[n:]
	}
	return append(out, u.end()...)
}

// TestJSONUnescaper: a JSON string's escapes decode as encoding/json
// decodes them, split anywhere; a malformed escape passes as its raw
// bytes, never fewer.
func TestJSONUnescaper(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`plain text`, `plain text`},
		{`\u4e2d\u6587`, "中文"},
		{`\ud83d\ude00!`, "😀!"},
		{`a\"b\\c\/d\b\f\n\r\t`, "a\"b\\c/d\b\f\n\r\t"},
		{`\\u4e2d`, `\u4e2d`},
		{`\\\u4e2d`, `\中`},
		{`\ud83d`, `\ud83d`},              // a lone high surrogate, cut
		{`\ud83dx`, `\ud83dx`},            // followed by no escape
		{`\ud83d\n`, "\\ud83d\n"},         // by another escape
		{`\ud83d\u0041`, `\ud83dA`},       // by no low surrogate
		{`\ud83d\ud83d\ude00`, `\ud83d😀`}, // the second high one pairs
		{`\ude00`, `\ude00`},              // a lone low surrogate
		{`\x41`, `\x41`},
		{`\u12g4`, `\u12g4`},
		{`\u12\n`, "\\u12\n"},
		{`end\`, `end\`},
		{`\u00e9\u0000`, "é\x00"},
	} {
		for size := 1; size <= len(tc.in); size++ {
			if got := string(unescapeInPieces([]byte(tc.in), size)); got != tc.want {
				t.Errorf("%q in pieces of %d: %q, want %q", tc.in, size, got, tc.want)
				break
			}
		}
	}
}

// FuzzJSONUnescaper: any bytes, never a panic; split anywhere, the same
// result; a valid JSON string of valid UTF-8 decodes as encoding/json
// decodes it, but for a lone surrogate, which encoding/json replaces with
// U+FFFD and the unescaper passes raw (six bytes rather than three).
func FuzzJSONUnescaper(f *testing.F) {
	for _, s := range []string{`\u4e2d`, `\ud83d\ude00`, `\ud83d\u`, `a\"\\`, `\`, `\\\\\u`, `\uDBFF\uDFFF`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, size uint8) {
		whole := unescapeInPieces(b, len(b)+1)
		if pieces := unescapeInPieces(b, int(size)%16+1); string(pieces) != string(whole) {
			t.Fatalf("%q: %q whole, %q in pieces of %d", b, whole, pieces, int(size)%16+1)
		}
		doc := append(append([]byte{'"'}, b...), '"')
		var s string
		if utf8.Valid(b) && json.Unmarshal(doc, &s) == nil && !strings.ContainsRune(s, utf8.RuneError) && string(whole) != s {
			t.Fatalf("%q decodes to %q, encoding/json to %q", b, whole, s)
		}
	})
}

// usagesInPieces is every top-level usage value topUsage finds in b fed in
// pieces of size bytes.
func usagesInPieces(b []byte, size int) []string {
	got, _ := scanInPieces(b, size)
	return got
}

// scanInPieces is every top-level usage value topUsage finds in b fed in
// pieces of size bytes, and the service tier it reads.
func scanInPieces(b []byte, size int) ([]string, string) {
	var s topUsage
	var got []string
	for len(b) > 0 {
		n := min(size, len(b))
		s.scan(b[:n], func(v []byte) { got = append(got, strings.TrimSpace(string(v))) })
		b = b[n:]
	}
	return got, s.tier
}

// TestTopUsageTier: the service tier topUsage reads is a top-level
// service_tier's (a chat completion, each chunk of a stream), or a
// Responses terminal event's response.service_tier, split anywhere (a
// top-level one as soon as its value ends: an answer cut after it is
// priced at it; a terminal event's once the event ends); one nested
// elsewhere, in a string, or in a response.created event (the tier asked)
// is not; two that differ, a value too long or not a string are
// spec.TierUnread (priced at the dearest).
func TestTopUsageTier(t *testing.T) {
	long := `"` + strings.Repeat("p", spec.MaxServiceTierBytes+1) + `"`
	for _, tc := range []struct {
		in, want string
	}{
		{`{"id":"x","service_tier":"priority","usage":{"a":1}}`, "priority"},
		{`{"service_tier" : "flex" }`, "flex"},
		{`{"service_tier":"priority","choices":[{"message":{"content":"cut before its end`, "priority"},
		{`{"type":"response.completed","response":{"service_tier":"priority","output":[{"text":"cut`, ""},
		{`{"service_tier":null}`, ""},
		{`{"service_tier":"pri\u006frity"}`, "priority"},
		{`{"service_tier":` + long + `}`, spec.TierUnread},
		{`{"service_tier":"` + strings.Repeat(`\u0070`, tierMaxBytes) + `"}`, spec.TierUnread},
		{`{"service_tier":7}`, spec.TierUnread},
		{`{"service_tier":{"a":"priority"}}`, spec.TierUnread},
		{`{"choices":[{"service_tier":"priority"}],"x":{"service_tier":"flex"}}`, ""},
		{`{"content":"\"service_tier\":\"priority\""}`, ""},
		{`{"service_tie\u0072":"priority"}`, "priority"}, // a key escaped reads as parsers read it
		{"data: {\"service_tier\":\"priority\",\"choices\":[]}\n\ndata: {\"service_tier\":\"priority\"}\n\ndata: [DONE]\n\n", "priority"},
		{"data: {\"service_tier\":\"priority\"}\n\ndata: {\"service_tier\":\"default\"}\n\n", spec.TierUnread},
		{"data: {\"service_tier\":\"priority\"}\n\ndata: {\"choices\":[]}\n\n", "priority"},
		{"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"service_tier\":\"auto\"}}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"service_tier\":\"x\"}],\"service_tier\":\"priority\",\"usage\":{}}}\n\n", "priority"},
		{`{"response":{"service_tier":"priority"},"type":"response.incomplete"}`, "priority"},
		{`{"type":"response.failed","response":{"service_tier":"flex"}}`, "flex"},
		{`{"type":"response.created","response":{"service_tier":"auto"}}`, ""},
		{`{"type":"response.in_progress","response":{"service_tier":"priority"}}`, ""},
		{`{"type":"response.completed","response":["service_tier","priority"]}`, ""},
		{`{"type":"response.completed","x":{"response":{"service_tier":"priority"}}}`, ""},
	} {
		for size := 1; size <= len(tc.in); size += 5 {
			if _, got := scanInPieces([]byte(tc.in), size); got != tc.want {
				t.Errorf("%.120q in pieces of %d: tier %q, want %q", tc.in, size, got, tc.want)
				break
			}
		}
	}
}

// TestTopUsage: the top-level "usage" value is found wherever it stands,
// split anywhere, its key escaped or not; a "usage" nested deeper, inside
// a string, or longer than usageMaxBytes is not.
func TestTopUsage(t *testing.T) {
	u := `{"prompt_tokens":9,"completion_tokens":4000,"details":{"a":[1,"}"]}}`
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`{"id":"x","choices":[{"usage":{"a":1}}],"usage":` + u + `}`, []string{u}},
		{`{"usage" : ` + u + ` ,"system_fingerprint":"fp"}`, []string{u}},
		{`{"content":"\"usage\":{\"a\":1}","usage":7}`, []string{"7"}},
		{`{"usag\u0065":` + u + `}`, []string{u}}, // a key escaped reads as parsers read it
		{`{"usage":{"pad":"` + strings.Repeat("x", usageMaxBytes) + `"}}`, nil},
		{`{"x":{"usage":1}} {"usage":2}`, []string{"2"}},
		{`["usage",{"usage":1}]`, nil},
		{`{"usage":` + u, nil}, // cut: never ended
	} {
		for size := 1; size <= len(tc.in); size += 7 {
			if got := usagesInPieces([]byte(tc.in), size); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%.80q in pieces of %d: %q, want %q", tc.in, size, got, tc.want)
				break
			}
		}
	}
}

// FuzzTopUsage: any bytes, never a panic; split anywhere, the same values;
// for a valid JSON object, the same tier when spread over SSE data lines,
// and the value of its top-level "usage" as encoding/json reads it (the
// last, of a key written twice), when written without escapes, once
// (case folded) and within usageMaxBytes.
func FuzzTopUsage(f *testing.F) {
	for _, s := range []string{`{"usage":{"a":1}}`, `{"a":"\"","usage":[1,{"b":"}"}]}`, `{"x":{"usage":1},"usage":2}`, `{"usage":`} {
		f.Add([]byte(s), uint8(3))
	}
	for _, s := range []string{`{"service_tier":"priority","usage":{}}`, `{"type":"response.completed","response":{"service_tier":"flex"}}`,
		"data: {\"service_tier\":\"priority\"}\n\ndata: [DONE]\n\n", `{"service_tier":"pri\u006frity"}`,
		"data: {\"service\\u005ftier\":\ndata: \"priority\"}\r\n\r\n", "event: response.completed\ndata: {\"response\":{\"service_tier\":\"flex\"}}\n\n"} {
		f.Add([]byte(s), uint8(5))
	}
	f.Fuzz(func(t *testing.T, b []byte, size uint8) {
		whole, tier := scanInPieces(b, len(b)+1)
		if pieces, ptier := scanInPieces(b, int(size)%16+1); strings.Join(pieces, "|") != strings.Join(whole, "|") || ptier != tier {
			t.Fatalf("%q: %q and tier %q whole, %q and %q in pieces", b, whole, tier, pieces, ptier)
		}
		if len(tier) > spec.MaxServiceTierBytes && tier != spec.TierUnread {
			t.Fatalf("%q: tier %q kept, over %d bytes", b, tier, spec.MaxServiceTierBytes)
		}
		var doc map[string]json.RawMessage
		if json.Unmarshal(b, &doc) != nil {
			return
		}
		// Spread over SSE data lines where JSON allows a line break (as
		// json.Indent breaks it), the same tier.
		var spread bytes.Buffer
		if json.Indent(&spread, b, "", " ") == nil {
			framed := "data: " + strings.ReplaceAll(spread.String(), "\n", "\ndata: ") + "\n\n"
			if _, ftier := scanInPieces([]byte(framed), int(size)%16+1); ftier != tier {
				t.Fatalf("%q: tier %q, spread over data lines %q", b, tier, ftier)
			}
		}
		folded := jsonscan.FoldKey(nil, b)
		if bytes.Contains(b, []byte(`\`)) {
			return
		}
		// A valid object naming its tier once (its keys folded as
		// memberOf folds them): the tier the held answer's reader reads
		// (weigher.AnswerServedTier).
		if _, resp := doc["response"]; !resp && bytes.Count(folded, []byte(`"service_tier"`)) == 1 {
			if want := weigher.AnswerServedTier(b); tier != want {
				t.Fatalf("%q: tier %q, the held answer's reader %q", b, tier, want)
			}
		}
		v, ok := doc["usage"]
		if !ok || len(v) > usageMaxBytes-64 || bytes.Count(folded, []byte(`"usage"`)) > 1 {
			return
		}
		if len(whole) == 0 || whole[len(whole)-1] != string(v) {
			t.Fatalf("%q: found %q, encoding/json %q", b, whole, v)
		}
	})
}

// TestTapTruncatedEventTier: a stream event passed unread in Truncated
// pieces (over the scanner's limit: a Responses response.completed that
// repeats a long output once the answer budget is full) is unseen by the
// stream reader; its response.service_tier was lost, and the stream
// settled at the tier asked. It is read from the pieces (usageTap's
// truncated), split anywhere, and joins the tier the stream settles at.
func TestTapTruncatedEventTier(t *testing.T) {
	text := strings.Repeat("word ", 400)
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"service_tier\":\"auto\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"" + text + "\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" +
		text + text + "\"}]}],\"service_tier\":\"priority\",\"usage\":{\"input_tokens\":9,\"output_tokens\":401,\"total_tokens\":410}}}\n\n"
	for _, size := range []int{1, 7, 100, 4096, len(stream)} {
		tap := newUsageTap(weigher.NewStream(weigher.KindResponses), false, true, func(s string) int64 { return int64(len(s)) })
		tap.sc.MaxEventBytes = 3000 // the delta fits, response.completed does not
		for b := []byte(stream); len(b) > 0; {
			n := min(size, len(b))
			tap.feed(b[:n])
			b = b[n:]
		}
		if !tap.unreadData {
			t.Fatalf("pieces of %d: response.completed was read: not the case under test", size)
		}
		if u, _ := tap.settle(weigher.Estimate{InputTokens: 9, OutputTokens: 100}); u.ServiceTier != "priority" {
			t.Errorf("pieces of %d: settled at tier %q, want priority (response.completed's)", size, u.ServiceTier)
		}
	}
}
