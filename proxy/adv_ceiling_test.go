package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// ceilingWeigher is a weigher whose test models have a 20,000-token input
// and a 1,000-token output (a 21,000-token window): the usage ceiling of a
// short request is 21,000 input and 21,000 output tokens, within the rig's
// 100,000-token bucket.
func ceilingWeigher(t *testing.T) *weigher.Weigher {
	t.Helper()
	m := weigher.Model{MaxInputTokens: 20_000, MaxOutputTokens: 1_000}
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256, Models: map[string]weigher.Model{"gpt-4o-mini": m, "claude-sonnet-4-5": m}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ceilingCase is one flavor's request and answer shapes for the ceiling
// tests: answer(in, out) is the upstream's raw answer reporting in input
// and out output tokens (JSON number text).
type ceilingCase struct {
	name, path, body string
	kind             weigher.Kind
	flavor           Flavor
	answer           func(in, out string) string
}

var ceilingCases = []ceilingCase{
	{"chat JSON", "/v1/chat/completions", panicBody, weigher.KindChat, spec.FlavorOpenAI, func(in, out string) string {
		return string(response([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":` + in + `,"completion_tokens":` + out + `}}`)))
	}},
	{"chat SSE", "/v1/chat/completions", panicStreamBody, weigher.KindChat, spec.FlavorOpenAI, func(in, out string) string {
		return sseAnswer(`data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":` + in + `,"completion_tokens":` + out + `}}` + "\n\ndata: [DONE]\n\n")
	}},
	{"responses JSON", "/v1/responses", `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":50}`, weigher.KindResponses, spec.FlavorOpenAI, func(in, out string) string {
		return string(response([]byte(`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],` +
			`"usage":{"input_tokens":` + in + `,"output_tokens":` + out + `}}`)))
	}},
	{"responses SSE", "/v1/responses", `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":50,"stream":true}`, weigher.KindResponses, spec.FlavorOpenAI, func(in, out string) string {
		return sseAnswer("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":" + in + ",\"output_tokens\":" + out + "}}}\n\n")
	}},
	{"messages JSON", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`, weigher.KindMessages, spec.FlavorAnthropic, func(in, out string) string {
		return string(response([]byte(`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"model":"claude-sonnet-4-5","stop_reason":"end_turn",` +
			`"usage":{"input_tokens":` + in + `,"output_tokens":` + out + `}}`)))
	}},
	{"messages SSE", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`, weigher.KindMessages, spec.FlavorAnthropic, func(in, out string) string {
		return sseAnswer("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":" + in + ",\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":" + out + "}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}},
}

// TestAbsurdUsageChargedAtTheCeiling: through real sockets, an upstream
// answer reporting absurd usage (prompt 1e300, output 9e18: read as the
// 1e15-token cap) is charged at the request's ceiling
// (weigher.Weigher.Ceiling: here a 21,000-token window each way), not at
// 2e15 tokens, a debt the 100,000-token bucket would never repay: the
// next request is admitted. The ledger record is flagged with the figures
// reported, usage_implausible_total counts each figure, the log names the
// request. JSON and SSE, chat, Responses and Messages. A usage within the
// ceiling (above the estimate) is charged as reported, unflagged.
func TestAbsurdUsageChargedAtTheCeiling(t *testing.T) {
	w := ceilingWeigher(t)
	for _, tc := range ceilingCases {
		t.Run(tc.name, func(t *testing.T) {
			est := w.Weigh(tc.kind, []byte(tc.body))
			c := w.Ceiling(&est)
			if c.InputTokens != 21_000 || c.OutputTokens != 21_000 {
				t.Fatalf("ceiling %+v, want 21000 each way", c)
			}
			up := startRawUpstream(t, tc.answer("1e300", "9e18"))
			r := newRig(t, rigOptions{url: up.url(), w: w, flavor: tc.flavor})
			full := r.remaining()
			if status, _, b, err := r.do(tc.path, tc.body); err != nil || status != 200 {
				t.Fatalf("status %d, err %v: %.200s", status, err, b)
			}
			r.waitLedger(1)
			checkCharged(t, full-r.remaining(), c.InputTokens+c.OutputTokens, true)
			rec := r.ledger.records[0]
			if !rec.UsageImplausible || rec.ReportedInputTokens != 1e15 || rec.ReportedOutputTokens != 1e15 ||
				rec.InputTokens != c.InputTokens || rec.OutputTokens != c.OutputTokens {
				t.Errorf("ledger record %+v, want flagged, reported 1e15 each way, charged the ceiling", rec)
			}
			for _, fig := range []string{"input", "output"} {
				if got := r.counter("llmguard_usage_implausible_total", "flavor", tc.flavor.String(), "figure", fig); got != 1 {
					t.Errorf("usage_implausible_total{figure=%q} = %v, want 1", fig, got)
				}
			}
			if log := r.log.String(); !containsAll(log, "charged at its ceiling", "request_id="+rec.RequestID) {
				t.Errorf("log does not name the implausible usage and the request:\n%s", log)
			}
			if status, _, b, err := r.do(tc.path, tc.body); err != nil || status != 200 {
				t.Errorf("the next request: status %d, err %v: %.200s (one absurd answer must not deny the caller)", status, err, b)
			}
		})
	}
	t.Run("within the ceiling", func(t *testing.T) {
		tc := ceilingCases[0]
		up := startRawUpstream(t, tc.answer("20000", "1000"))
		r := newRig(t, rigOptions{url: up.url(), w: w, flavor: tc.flavor})
		full := r.remaining()
		if status, _, b, err := r.do(tc.path, tc.body); err != nil || status != 200 {
			t.Fatalf("status %d, err %v: %.200s", status, err, b)
		}
		r.waitLedger(1)
		checkCharged(t, full-r.remaining(), 21_000, true)
		if rec := r.ledger.records[0]; rec.UsageImplausible || rec.ReportedInputTokens != 0 {
			t.Errorf("ledger record %+v flagged: the usage is within the ceiling", rec)
		}
	})
}

// TestStreamDuplicateKeySettlesAtTheDearerReading: through real sockets, a
// stream whose usage event names a key twice — a figure, or the usage
// object itself — settles at the dearer of its first-wins and last-wins
// readings (5000 output tokens), as a JSON answer does
// (TestDuplicateUsageSettlesAtTheDearerReading), not at the output
// reservation (50 tokens), below what either reading reports.
func TestStreamDuplicateKeySettlesAtTheDearerReading(t *testing.T) {
	w := testWeigher(t)
	chatBody := panicStreamBody
	respBody := `{"model":"gpt-4o-mini","input":"hello there","max_output_tokens":50,"stream":true}`
	msgBody := `{"model":"claude-sonnet-4-5","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`
	chat := func(usage string) string {
		return sseAnswer(`data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" +
			`data: {"choices":[],` + usage + `}` + "\n\ndata: [DONE]\n\n")
	}
	responses := func(usage string) string {
		return sseAnswer("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"," + usage + "}}\n\n")
	}
	messages := func(usage string) string {
		return sseAnswer("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}," + usage + "}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}
	for _, tc := range []struct {
		name, path, body, answer string
		flavor                   Flavor
		want                     int64
	}{
		{"chat, figure twice", "/v1/chat/completions", chatBody, chat(`"usage":{"prompt_tokens":9,"completion_tokens":5000,"completion_tokens":1}`), spec.FlavorOpenAI, 5009},
		{"chat, usage twice", "/v1/chat/completions", chatBody, chat(`"usage":{"prompt_tokens":9,"completion_tokens":1},"usage":{"prompt_tokens":9,"completion_tokens":5000}`), spec.FlavorOpenAI, 5009},
		{"responses, figure twice", "/v1/responses", respBody, responses(`"usage":{"input_tokens":9,"output_tokens":1,"output_tokens":5000}`), spec.FlavorOpenAI, 5009},
		{"responses, usage twice", "/v1/responses", respBody, responses(`"usage":{"input_tokens":9,"output_tokens":5000},"usage":{"input_tokens":9,"output_tokens":1}`), spec.FlavorOpenAI, 5009},
		{"messages, figure twice", "/v1/messages", msgBody, messages(`"usage":{"output_tokens":5000,"output_tokens":1}`), spec.FlavorAnthropic, 5009},
		{"messages, usage twice", "/v1/messages", msgBody, messages(`"usage":{"output_tokens":1},"usage":{"output_tokens":5000}`), spec.FlavorAnthropic, 5009},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkCharged(t, chargedThrough(t, w, tc.answer, tc.flavor, tc.path, tc.body), tc.want, true)
		})
	}
}

// counter is the value of the rig's counter name with the labels given as
// name, value pairs (0 when it has no such series).
func (r *panicRig) counter(name string, labels ...string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// containsAll reports whether s holds every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
