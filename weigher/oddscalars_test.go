package weigher

import (
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/tidwall/gjson"
)

// TestOddValuesWeighedByJSONText: a member read as text given as another
// value — a number of any length as a chat content or a Messages system,
// an object as a role, a name, a refusal, a call's name, a tool's name
// or a block's title — is weighed by its JSON text, as a lenient
// upstream that writes it out bills it (each weighed 0 or a few tokens
// before: a 9,000-digit number is some 1,500 tokens of text).
func TestOddValuesWeighedByJSONText(t *testing.T) {
	w := testWeigher(t)
	digits := "1" + strings.Repeat("2", 8999)
	words := `{"x":"` + strings.Repeat("word ", 3000) + `"}`
	const least = 1000
	for _, tc := range []struct {
		name string
		kind Kind
		body string
	}{
		{"chat content number", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":` + digits + `}]}`},
		{"chat role object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":` + words + `,"content":"hi"}]}`},
		{"chat name number", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","name":` + digits + `,"content":"hi"}]}`},
		{"chat call name object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","tool_calls":[{"function":{"name":` + words + `,"arguments":"{}"}}]}]}`},
		{"chat function_call name object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"assistant","function_call":{"name":` + words + `}}]}`},
		{"chat tool_choice object", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tool_choice":` + words + `}`},
		{"chat tool_choice string", KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tool_choice":"` + strings.Repeat("word ", 3000) + `"}`},
		{"responses tool_choice object", KindResponses, `{"model":"gpt-4o-mini","input":"hi","tool_choice":` + words + `}`},
		{"responses name number", KindResponses, `{"model":"gpt-4o-mini","input":[{"role":"user","name":` + digits + `,"content":"hi"}]}`},
		{"messages system number", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"system":` + digits + `,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages content number", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":` + digits + `}]}`},
		{"messages tool description object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":` + words + `,"input_schema":{}}]}`},
		{"messages tool_choice name object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":` + words + `}}`},
		{"messages thinking object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":` + words + `,"signature":"s"}]}]}`},
		{"messages redacted_thinking object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":` + words + `}]}]}`},
		{"messages search_result source object", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"search_result","source":` + words + `,"title":"t","content":[]}]}]}`},
	} {
		e := w.Weigh(tc.kind, []byte(tc.body))
		if e.Fault != FaultNone || e.InputTokens < least {
			t.Errorf("%s: %d input tokens (fault %v), want %d or more", tc.name, e.InputTokens, e.Fault, least)
		}
	}
}

// TestTokenCountReadsPythonNumbers: an output limit given as a string is
// read as Python's int() or float() reads it — digits of other scripts,
// underscores, a number past float64's range at maxTokens — and one
// Python refuses is not read.
func TestTokenCountReadsPythonNumbers(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64
		ok   bool
	}{
		{"15000", 15000, true},
		{" 15000\n", 15000, true},
		{"15_000", 15000, true},
		{"１５０００", 15000, true},             // fullwidth
		{"١٥٠٠٠", 15000, true},             // Arabic-Indic
		{"१५०००", 15000, true},             // Devanagari
		{"\U0001D7D9\U0001D7DD", 15, true}, // mathematical double-struck 1, 5
		{"1e400", maxTokens, true},
		{"-1e400", 0, false},
		{"1e-400", 0, false},
		{"x", 0, false},
		{"0x10", 0, false},
	} {
		n, ok := tokenCount(gjson.Parse(strconv.Quote(tc.s)))
		if n != tc.want || ok != tc.ok {
			t.Errorf("tokenCount(%q) = %d, %v, want %d, %v", tc.s, n, ok, tc.want, tc.ok)
		}
	}
}

// FuzzTokenCount: tokenCount of any string never panics and reads a
// count in [0, maxTokens]; numericText leaves no non-ASCII digit and,
// for a string of ASCII and other scripts' digits alone, as many digits.
func FuzzTokenCount(f *testing.F) {
	for _, s := range []string{"15000", "１５０００", "١٥٠٠٠", "1e400", "-1e400", "1_000", " 7\n", "\U0001D7D9", "x٣", "٣.٥e٢"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := tokenCount(gjson.Parse(strconv.Quote(s))); n < 0 || n > maxTokens || !ok && n != 0 {
			t.Fatalf("tokenCount(%q) = %d, %v", s, n, ok)
		}
		out, ok := numericText(s)
		for _, c := range out {
			if ok && c >= 0x80 && unicode.IsDigit(c) {
				t.Fatalf("numericText(%q) = %q: a digit left", s, out)
			}
		}
	})
}
