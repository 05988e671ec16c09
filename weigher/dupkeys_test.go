package weigher

import (
	"strings"
	"testing"
)

func TestDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"plain", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`, false},
		{"top-level twice", `{"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}`, true},
		{"escaped spelling of the same key", `{"max_tokens":1,"max\u005ftokens":100000}`, true},
		{"nested in a content part", `{"messages":[{"content":[{"type":"text","text":"","text":"long"}]}]}`, true},
		{"same key in sibling objects is fine", `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`, false},
		{"many keys, duplicate late", `{` + manyKeys(40) + `,"k3":0}`, true},
		{"many keys, none repeated", `{` + manyKeys(40) + `}`, false},
		{"too deep", strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200), true},
		{"not JSON", `{"a":`, false},
	} {
		if got := DuplicateKeys([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"k` + string(rune('a'+i%26)) + string(rune('0'+i/26)) + `":0`
	}
	// "k3" is not among them: the "many keys, duplicate late" case adds it twice below.
	return strings.Join(parts, ",") + `,"k3":1`
}

func FuzzDuplicateKeys(f *testing.F) {
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"a":[{"b":1},{"b":1,"b":2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		DuplicateKeys(b) // must not panic or stall
	})
}

func BenchmarkDuplicateKeys(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[` + strings.Repeat(`{"role":"user","content":[{"type":"text","text":"hello world"}]},`, 40) +
		`{"role":"user","content":"end"}],"max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if DuplicateKeys(body) {
			b.Fatal("duplicate")
		}
	}
}
