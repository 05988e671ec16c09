package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
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
	var s topUsage
	var got []string
	for len(b) > 0 {
		n := min(size, len(b))
		s.scan(b[:n], func(v []byte) { got = append(got, strings.TrimSpace(string(v))) })
		b = b[n:]
	}
	return got
}

// TestTopUsage: the top-level "usage" value is found wherever it stands,
// split anywhere; a "usage" nested deeper, inside a string, escaped, or
// longer than usageMaxBytes is not.
func TestTopUsage(t *testing.T) {
	u := `{"prompt_tokens":9,"completion_tokens":4000,"details":{"a":[1,"}"]}}`
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`{"id":"x","choices":[{"usage":{"a":1}}],"usage":` + u + `}`, []string{u}},
		{`{"usage" : ` + u + ` ,"system_fingerprint":"fp"}`, []string{u}},
		{`{"content":"\"usage\":{\"a\":1}","usage":7}`, []string{"7"}},
		{`{"usag\u0065":` + u + `}`, nil},
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
// for a valid JSON object, the value of its top-level "usage" as
// encoding/json reads it (the last, of a key written twice), when written
// without escapes and within usageMaxBytes.
func FuzzTopUsage(f *testing.F) {
	for _, s := range []string{`{"usage":{"a":1}}`, `{"a":"\"","usage":[1,{"b":"}"}]}`, `{"x":{"usage":1},"usage":2}`, `{"usage":`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, size uint8) {
		whole := usagesInPieces(b, len(b)+1)
		if pieces := usagesInPieces(b, int(size)%16+1); strings.Join(pieces, "|") != strings.Join(whole, "|") {
			t.Fatalf("%q: %q whole, %q in pieces", b, whole, pieces)
		}
		var doc map[string]json.RawMessage
		if json.Unmarshal(b, &doc) != nil || bytes.Contains(b, []byte(`\`)) {
			return
		}
		v, ok := doc["usage"]
		if !ok || len(v) > usageMaxBytes-64 {
			return
		}
		if len(whole) == 0 || whole[len(whole)-1] != string(v) {
			t.Fatalf("%q: found %q, encoding/json %q", b, whole, v)
		}
	})
}
