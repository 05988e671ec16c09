package weigher

// Unit tests of the thirteenth adversarial round (2026-12-05).

import "testing"

// A top-level member the Responses, legacy completions or Messages API
// defines, or one the weigher reads with a meaning of its own, keeps the
// weight it had (nothing, for these: sampling and bookkeeping
// parameters); any other is weighed by its key and value text.
func TestTopLevelMembersDefinedOrUnknown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		k       Kind
		base    string // a body ending before its closing brace
		defined string // members the API defines, none of them billed
	}{
		// context_management with a threshold out of the call's reach: one
		// it cannot read may compact at any size (responsesCompaction).
		{"responses", KindResponses, `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":16`,
			`"include":["reasoning.encrypted_content"],"metadata":{"a":"b"},"parallel_tool_calls":true,` +
				`"prompt_cache_key":"k","prompt_cache_retention":"24h","safety_identifier":"s","store":false,` +
				`"stream_options":{"include_obfuscation":false},"temperature":0.5,"top_logprobs":2,"top_p":0.9,` +
				`"truncation":"auto","user":"u","context_management":[{"type":"compaction","compact_threshold":200000}],"max_tool_calls":3,"background":false,"service_tier":"auto"`},
		{"completions", KindCompletions, `{"model":"gpt-4o-mini","prompt":"hi","max_tokens":16`,
			`"frequency_penalty":0.1,"logit_bias":{"50256":-100},"logprobs":2,"presence_penalty":0.1,"seed":7,` +
				`"stop":["\n"],"temperature":0.5,"top_p":0.9,"user":"u","stream_options":{"include_usage":true},"n":1,"best_of":1,"echo":false`},
		{"messages", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]`,
			`"metadata":{"user_id":"u"},"service_tier":"auto","stop_sequences":["x"],"temperature":0.5,"top_k":40,` +
				`"top_p":0.9,"container":"c","context_management":{"edits":[]},"cache_control":{"type":"ephemeral"},` +
				`"anthropic_version":"vertex-2023-10-16","inference_geo":"global","speed":"standard"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWeigher(t)
			base := w.Weigh(tc.k, []byte(tc.base+`}`))
			defined := w.Weigh(tc.k, []byte(tc.base+`,`+tc.defined+`}`))
			unknown := w.Weigh(tc.k, []byte(tc.base+`,"system_prompt":"`+words16+`"}`))
			unknownNull := w.Weigh(tc.k, []byte(tc.base+`,"system_prompt":null}`))
			for _, e := range []Estimate{base, defined, unknown, unknownNull} {
				if !e.Parsed {
					t.Fatalf("not parsed: %v %q", e.Fault, e.FaultDetail)
				}
			}
			if defined.InputTokens != base.InputTokens {
				t.Errorf("the defined members weighed %d input tokens, want %d as without them", defined.InputTokens, base.InputTokens)
			}
			if unknownNull.InputTokens != base.InputTokens {
				t.Errorf("an unknown member set to null weighed %d input tokens, want %d", unknownNull.InputTokens, base.InputTokens)
			}
			if got := unknown.InputTokens - base.InputTokens; got < 3000 {
				t.Errorf("an unknown member of 3,000 words added %d input tokens", got)
			}
		})
	}
}
