package weigher

import "testing"

// OutputCeiling: an entry point (Weigh, WeighAs) sets it, for an estimate
// whose output is the model's default, to the configured
// Model.MaxOutputTokens; a body that states its maximum, a name not
// configured and a configured model without a maximum leave it 0, and
// Chat (not an entry point) never sets it.
func TestOutputCeilingOnlyWhenDefaulted(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"capped":   {MaxOutputTokens: 16384},
		"uncapped": {SafetyFactor: 1.5},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body string
		want       int64
	}{
		{"default, capped", `{"model":"capped","messages":[{"role":"user","content":"hi"}]}`, 16384},
		{"default, capped, in capitals", `{"model":"CAPPED","messages":[{"role":"user","content":"hi"}]}`, 16384},
		{"max_tokens, capped", `{"model":"capped","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, 0},
		{"max_completion_tokens, capped", `{"model":"capped","max_completion_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, 0},
		{"default, uncapped", `{"model":"uncapped","messages":[{"role":"user","content":"hi"}]}`, 0},
		{"default, not configured", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 0},
	}
	for _, c := range cases {
		e := w.Weigh(KindChat, []byte(c.body))
		if !e.Parsed || e.OutputCeiling != c.want {
			t.Errorf("%s: ceiling %d (parsed %v, defaulted %v), want %d", c.name, e.OutputCeiling, e.Parsed, e.OutputDefaulted, c.want)
		}
		if got := w.WeighAs(KindChat, []byte(c.body), "capped"); c.want == 0 && got.OutputDefaulted && got.OutputCeiling != 16384 {
			t.Errorf("%s as capped: ceiling %d, want 16384", c.name, got.OutputCeiling)
		}
		if e := w.Chat([]byte(c.body)); e.OutputCeiling != 0 {
			t.Errorf("%s through Chat: ceiling %d, want 0", c.name, e.OutputCeiling)
		}
	}
}
