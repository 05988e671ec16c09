package proxy

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/weigher"
)

var (
	capWeigherOnce sync.Once
	capWeigher     *weigher.Weigher
)

func capTestWeigher(tb testing.TB) *weigher.Weigher {
	tb.Helper()
	capWeigherOnce.Do(func() {
		w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 1000})
		if err != nil {
			panic(err)
		}
		capWeigher = w
	})
	return capWeigher
}

// checkRewrite weighs body as k and, when the weigher accepts it, lowers its
// output maximum to n: the result must be valid JSON whose output field (as
// a standard-library decoder reads it, last member winning, and as gjson
// reads it) is n in every member the body named, and the weigher must weigh
// the rewritten body to the lowered reservation.
func checkRewrite(t *testing.T, k weigher.Kind, body []byte, n int64) {
	w := capTestWeigher(t)
	est := w.Weigh(k, body)
	if !est.Parsed {
		return
	}
	out := rewriteOutputMax(body, est.OutputFields, outputField(k), n)
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("rewritten body is not JSON: %v\n%s\nfrom %s", err, out, body)
	}
	again := w.Weigh(k, out)
	if !again.Parsed {
		t.Fatalf("the rewritten body is refused (%v): %s", again.Fault, out)
	}
	if again.OutputTokens != n*again.Choices {
		t.Fatalf("rewritten body reserves %d, want %d × %d choices: %s", again.OutputTokens, n, again.Choices, out)
	}
	if again.OutputDefaulted {
		t.Fatalf("rewritten body names no maximum: %s", out)
	}
	if gjson.GetBytes(out, outputField(k)).Exists() && gjson.GetBytes(out, outputField(k)).Int() != n && k != weigher.KindChat {
		t.Fatalf("%s = %s, want %d", outputField(k), gjson.GetBytes(out, outputField(k)).Raw, n)
	}
}

func TestRewriteOutputMax(t *testing.T) {
	cases := []struct {
		k    weigher.Kind
		body string
	}{
		{weigher.KindChat, `{"model":"gpt-4o","messages":[],"max_tokens":5000}`},
		{weigher.KindChat, `{"max_completion_tokens":"5000","model":"gpt-4o","messages":[],"max_tokens":null}`},
		{weigher.KindChat, ` { "model" : "gpt-4o" , "messages" : [ ] } `},
		{weigher.KindChat, `{"model":"gpt-4o","messages":[],"n":3}`},
		{weigher.KindChat, `{}`},
		{weigher.KindResponses, "{\"model\":\"gpt-4o\",\"input\":\"}\",\n\"max_output_tokens\":\t5000\n}"},
		{weigher.KindResponses, `{"model":"gpt-4o","input":"{\"max_output_tokens\":1}"}`},
		{weigher.KindMessages, `{"model":"claude-sonnet-4-5","max\u005ftokens":5000,"messages":[]}`},
	}
	for _, c := range cases {
		checkRewrite(t, c.k, []byte(c.body), 77)
	}
}

// FuzzRewriteOutputMax: whatever body the weigher accepts, the rewrite is
// valid JSON that the weigher reads back with exactly the lowered maximum.
func FuzzRewriteOutputMax(f *testing.F) {
	f.Add(uint8(0), []byte(`{"model":"gpt-4o","messages":[],"max_tokens":5000}`))
	f.Add(uint8(1), []byte(`{"model":"gpt-4o","input":"x","max_output_tokens":null}`))
	f.Add(uint8(2), []byte(`{"model":"claude-sonnet-4-5","messages":[],"max_tokens":1}`))
	f.Add(uint8(0), []byte(`{"n":2,"max_completion_tokens":9,"max_tokens":"3"}`))
	kinds := []weigher.Kind{weigher.KindChat, weigher.KindResponses, weigher.KindMessages}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		checkRewrite(t, kinds[int(which)%len(kinds)], body, 77)
	})
}
