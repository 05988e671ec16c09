package weigher

import "testing"

// TestExtraBodyMembersRefused: LiteLLM's proxy merges a body's extra_body
// members over its top-level ones, so a body whose extra_body holds
// anything but Gemini's "google" object is refused (extra_body), in every
// weighed kind, rather than weighed by its top-level max_tokens alone.
func TestExtraBodyMembersRefused(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		kind   Kind
		body   string
		detail string
	}{
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":10,"extra_body":{"max_tokens":100000,"n":8}}`, `key "extra_body.max_tokens"`},
		{KindChat, `{"model":"gpt-4o","messages":[],"extra_body":{"google":{},"models":["o1-pro"]}}`, `key "extra_body.models"`},
		{KindChat, `{"model":"gpt-4o","messages":[],"Extra_Body":{"google":{}}}`, `key "Extra_Body"`},
		{KindChat, `{"model":"gpt-4o","messages":[],"extra_body":"{\"n\":8}"}`, `key "extra_body"`},
		{KindResponses, `{"model":"gpt-5","input":"hi","max_output_tokens":10,"extra_body":{"max_output_tokens":100000}}`, `key "extra_body.max_output_tokens"`},
		{KindEmbeddings, `{"model":"text-embedding-3-small","input":"hi","extra_body":{"input":"a long text"}}`, `key "extra_body.input"`},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[],"extra_body":{"fallbacks":["claude-opus-4-1"]}}`, `key "extra_body.fallbacks"`},
	} {
		e := w.Weigh(c.kind, []byte(c.body))
		if e.Parsed || e.Fault != FaultExtraBody || e.Fault.Code() != "extra_body" || e.FaultDetail != c.detail {
			t.Errorf("%s: Parsed %v, fault %v %q, want extra_body %q", c.body, e.Parsed, e.Fault, e.FaultDetail, c.detail)
		}
	}
	for _, body := range []string{
		`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"hi"}],"extra_body":{"google":{"thinking_config":{"thinking_budget":1024}}}}`,
		`{"model":"gpt-4o","messages":[],"extra_body":null}`,
		`{"model":"gpt-4o","messages":[],"extra_body":{}}`,
	} {
		if e := w.Chat([]byte(body)); !e.Parsed || e.Fault != FaultNone {
			t.Errorf("%s: Parsed %v, fault %v, want weighed", body, e.Parsed, e.Fault)
		}
	}
}

// TestGeminiCachedContentHidden: a Gemini context cache named in
// extra_body.google.cached_content (or a top-level "google" object)
// enters the prompt billed though the body does not hold it: hidden
// context, which reserves the model's largest input.
func TestGeminiCachedContentHidden(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		body   string
		hidden bool
	}{
		{`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"sum up"}],"max_tokens":100,"extra_body":{"google":{"cached_content":"cachedContents/abc123"}}}`, true},
		{`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"sum up"}],"max_tokens":100,"google":{"cached_content":"cachedContents/abc123"}}`, true},
		{`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"sum up"}],"max_tokens":100,"google":{"cached_content":null}}`, false},
		{`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"sum up"}],"max_tokens":100,"extra_body":{"google":{"thinking_config":{}}}}`, false},
	} {
		e := w.Chat([]byte(c.body))
		if e.ServerContext != c.hidden {
			t.Errorf("%s: ServerContext %v, want %v", c.body, e.ServerContext, c.hidden)
		}
	}
}

// TestAzureDataSourcesCamelCase: Azure's 2023 "On Your Data" extensions
// API names its retrieval "dataSources": hidden context, as data_sources.
func TestAzureDataSourcesCamelCase(t *testing.T) {
	w := testWeigher(t)
	e := w.Chat([]byte(`{"messages":[{"role":"user","content":"what do our docs say?"}],"max_tokens":100,"dataSources":[{"type":"AzureCognitiveSearch","parameters":{"indexName":"docs"}}]}`))
	if !e.ServerContext {
		t.Errorf("dataSources: ServerContext false, input %d", e.InputTokens)
	}
}

// TestGeminiThinkingBudgetIsReserved: a Gemini thinking budget
// (extra_body.google.thinking_config.thinking_budget, a top-level
// "google" object, either in lowerCamelCase) is output beside the
// maximum, as OpenRouter's reasoning.max_tokens is: reserved per
// completion, and the reservation no longer learnable; 0 (off), -1
// (dynamic) and a budget that is not a count reserve nothing more.
func TestGeminiThinkingBudgetIsReserved(t *testing.T) {
	w := testWeigher(t)
	const head = `{"model":"my-model","messages":[{"role":"user","content":"hi"}],`
	for _, tc := range []struct {
		body  string
		want  int64
		fixed bool
	}{
		{head + `"max_tokens":100,"extra_body":{"google":{"thinking_config":{"thinking_budget":5000,"include_thoughts":true}}}}`, 5100, true},
		{head + `"max_tokens":100,"n":2,"extra_body":{"google":{"thinking_config":{"thinking_budget":"5000"}}}}`, 10200, true},
		{head + `"extra_body":{"google":{"thinking_config":{"thinking_budget":5000}}}}`, 6000, true}, // the default 1,000 + 5,000
		{head + `"max_tokens":100,"google":{"thinkingConfig":{"thinkingBudget":5000}}}`, 5100, true},
		{head + `"max_tokens":100,"google":{"thinking_config":{"thinking_budget":3000}},"reasoning":{"max_tokens":5000}}`, 5100, true},
		{head + `"max_tokens":100,"extra_body":{"google":{"thinking_config":{"thinking_budget":0}}}}`, 100, true},
		{head + `"max_tokens":100,"extra_body":{"google":{"thinking_config":{"thinking_budget":-1}}}}`, 100, true},
		{head + `"max_tokens":100,"extra_body":{"google":{"thinking_config":{"thinking_budget":"lots"}}}}`, 100, true},
		{head + `"extra_body":{"google":null}}`, 1000, false},
	} {
		est := w.Weigh(KindChat, []byte(tc.body))
		if est.OutputTokens != tc.want || !est.Parsed {
			t.Errorf("%s: OutputTokens %d (parsed %v), want %d", tc.body, est.OutputTokens, est.Parsed, tc.want)
		}
		if est.OutputDefaulted == tc.fixed {
			t.Errorf("%s: OutputDefaulted %v, want %v", tc.body, est.OutputDefaulted, !tc.fixed)
		}
	}
}

// TestGeminiReasoningEffortByFamily: a chat body's reasoning_effort
// reserves Gemini's thinking budget (8,192 for "medium") beside the
// maximum when the model's family is Gemini: its own name, or a
// configured alias whose Family is a Gemini model (the family chat's
// held rules carry), and in no other case; the same name weighed twice
// (rules found, then held) reserves the same.
func TestGeminiReasoningEffortByFamily(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"my-flash": {Family: "gemini-2.5-flash"},
		"my-mini":  {Family: "gpt-4o-mini"},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		want  int64
	}{
		{"gemini-2.5-flash", 100 + 8192},
		{"my-flash", 100 + 8192},
		{"my-mini", 100},
		{"gpt-4o", 100},
	} {
		body := []byte(`{"model":"` + tc.model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"reasoning_effort":"medium"}`)
		for pass := range 2 {
			if e := w.Chat(body); e.OutputTokens != tc.want || !e.Parsed {
				t.Errorf("%s, pass %d: OutputTokens %d (parsed %v), want %d", tc.model, pass, e.OutputTokens, e.Parsed, tc.want)
			}
		}
	}
}
