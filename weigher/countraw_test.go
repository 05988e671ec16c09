package weigher

import (
	"encoding/json"
	"strings"
	"testing"
)

// countRawCases are JSON values, as written in a body: strings with and
// without escapes (surrogate pairs, lone surrogates, long runs), and values
// that are not strings.
var countRawCases = []string{
	`""`, `"plain text, no escape"`, `"a \"quoted\" word\nand a line"`, `"\u00e9t\u00e9 \ud83d\ude00 \ud83d alone"`,
	`"tab\there\\back\/slash"`, `"` + strings.Repeat(`x\n`, 3000) + `"`, `null`, `12`, `{"a":"b\n"}`, `["\n"]`, `true`,
}

// checkCountRaw checks countRaw against the path it replaced,
// countText(enc, rawString(v)), for the value raw in every encoding, twice
// (the second time with a pooled buffer another string left behind).
func checkCountRaw(t *testing.T, w *Weigher, raw string) {
	t.Helper()
	v := rawValue(raw)
	for name, enc := range w.encoders {
		want := countText(enc, rawString(v))
		for pass := range 2 {
			if got := countRaw(enc, v); got != want {
				t.Fatalf("%s, pass %d, %.80q: countRaw %d, countText(rawString) %d", name, pass, raw, got, want)
			}
		}
	}
}

// TestCountRawSameAsRawString: countRaw counts what the decoding copy
// counted, on strings escaped or not and on other values.
func TestCountRawSameAsRawString(t *testing.T) {
	w := testWeigher(t)
	for _, raw := range countRawCases {
		checkCountRaw(t, w, raw)
	}
}

// FuzzCountRawSameAsRawString: countRaw against countText(rawString) on
// the fuzzer's text written as a JSON string (escaped as encoding/json
// escapes it, and with every '/' escaped too), and on its bytes as a value
// when they are one that passes jsonscan's check.
func FuzzCountRawSameAsRawString(f *testing.F) {
	for _, raw := range countRawCases {
		f.Add(raw)
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, s string) {
		q, _ := json.Marshal(s)
		checkCountRaw(t, w, string(q))
		checkCountRaw(t, w, strings.ReplaceAll(string(q), "/", `\/`))
		if s != "" && json.Valid([]byte(s)) && strings.TrimSpace(s) == s && s[0] == '"' {
			checkCountRaw(t, w, s)
		}
	})
}
