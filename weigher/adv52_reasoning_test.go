package weigher

import "testing"

// Which bodies mark a request's reasoning as hidden
// (Estimate.HiddenReasoning): what a lenient upstream may reason on, read
// as the upstreams read it, and nothing that turns reasoning off.
func TestHiddenReasoningAsked(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		kind Kind
		body string
		want bool
	}{
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, false},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"minimal"}`, true},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"reasoning_effort":" None "}`, false},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"reasoning_effort":null}`, false},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"reasoning":{"exclude":true}}`, true},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"reasoning":{"enabled":false}}`, false},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"reasoning":{"effort":"none"}}`, false},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":2000}}`, true},
		{KindChat, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}}`, false},
		{KindChat, `{"model":"openai/o4-mini","messages":[{"role":"user","content":"hi"}]}`, true},
		{KindChat, `{"model":"gpt-5-mini","messages":[{"role":"user","content":"hi"}]}`, true},
		{KindChat, `{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`, true},
		{KindResponses, `{"model":"gpt-4o-mini","input":"hi","reasoning":{"effort":null}}`, true},
		{KindResponses, `{"model":"gpt-4o-mini","input":"hi","reasoning":null}`, false},
		{KindResponses, `{"model":"gpt-4o-mini","input":"hi"}`, false},
		{KindResponses, `{"model":"o3","input":"hi"}`, true},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"adaptive"}}`, true},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"Disabled"}}`, false},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		est := w.Weigh(tc.kind, []byte(tc.body))
		if !est.Parsed {
			t.Fatalf("%s: not parsed: %s", tc.body, est.FaultDetail)
		}
		if est.HiddenReasoning != tc.want {
			t.Errorf("%s: HiddenReasoning %v, want %v", tc.body, est.HiddenReasoning, tc.want)
		}
	}
}
