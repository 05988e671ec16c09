package weigher

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// TestUnescapeJSON: escapes decoded as gjson decodes them, surrogate pairs
// and lone surrogates included.
func TestUnescapeJSON(t *testing.T) {
	for _, raw := range []string{
		`""`, `"plain"`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u00e9t\u00C9"`, `"\ud83d\ude00!"`,
		`"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\ude00\ud83d\ude00"`, `"\ud83d\\"`, `"\u0000"`,
		"\"caf\xc3\xa9 \\n \xe6\x97\xa5\"", `"\\\\\\"`, `"ends with \u0041"`,
	} {
		if jsonscan.Check([]byte(raw), jsonscan.Options{}) != nil {
			t.Fatalf("%s is not valid JSON", raw)
		}
		if got, want := unescapeJSON(raw[1:len(raw)-1]), gjson.Parse(raw).Str; got != want {
			t.Errorf("%s: %q, gjson %q", raw, got, want)
		}
	}
}

// FuzzUnescapeJSON: for every string that passes jsonscan, unescapeJSON
// gives what gjson gives, and rawString what gjson's String gives.
func FuzzUnescapeJSON(f *testing.F) {
	for _, s := range []string{`"a\nb"`, `"\ud83d\ude00"`, `"\ud800\u0041"`, `"x\u00e9\"y"`, "\"\xff\\t\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || jsonscan.Check([]byte(raw), jsonscan.Options{}) != nil {
			return
		}
		want := gjson.Parse(raw).Str
		if got := unescapeJSON(raw[1 : len(raw)-1]); got != want {
			t.Fatalf("%q: %q, gjson %q", raw, got, want)
		}
		if got := rawString(rawValue(raw)); got != want {
			t.Fatalf("%q: rawString %q, gjson %q", raw, got, want)
		}
	})
}
