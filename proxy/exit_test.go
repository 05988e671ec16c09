package proxy

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/meter"
)

// requestsTotal sums llmguard_requests_total over all its label sets.
func requestsTotal(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "requests_total") || strings.Contains(mf.GetName(), "upstream") {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// requestsBy is llmguard_requests_total summed over the label sets whose
// outcome is outcome.
func requestsBy(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "llmguard_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestEveryRefusalIsCountedOnce sends one request of each kind llmguard
// answers itself, over a real socket, and checks that each got its status
// and raised llmguard_requests_total by exactly one, under its outcome.
func TestEveryRefusalIsCountedOnce(t *testing.T) {
	// Nothing listens on port 1: a forwarded request gets 502.
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t), point: pointHandler, maxBody: 4096})
	deep := `{"model":"gpt-4o-mini","messages":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	cases := []struct {
		name, path, body string
		panic, noKey     bool
		status           int
		outcome          string
	}{
		{name: "no upstream for the path", path: "/v1/messages", body: panicBody, status: 404, outcome: meter.OutcomeInvalid},
		{name: "no key (the rig passes unknown keys through)", path: "/v1/chat/completions", body: panicBody, noKey: true, status: 401, outcome: meter.OutcomeUnauthorized},
		{name: "body over max_body_bytes", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","x":"` + strings.Repeat("a", 5000) + `"}`, status: 413, outcome: meter.OutcomeInvalid},
		{name: "duplicate key", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","model":"gpt-4o","messages":[]}`, status: 400, outcome: meter.OutcomeInvalid},
		{name: "json too deep", path: "/v1/chat/completions", body: deep, status: 400, outcome: meter.OutcomeInvalid},
		{name: "model name too long", path: "/v1/chat/completions", body: `{"model":"` + strings.Repeat("m", 300) + `","messages":[]}`, status: 400, outcome: meter.OutcomeInvalid},
		{name: "cost over the limit's capacity", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":200000}`, status: 429, outcome: meter.OutcomeTooLarge},
		{name: "upstream unreachable", path: "/v1/chat/completions", body: panicBody, status: 502, outcome: meter.OutcomeUpstreamError},
		{name: "handler panic", path: "/v1/chat/completions", body: panicBody, panic: true, status: 500, outcome: meter.OutcomeInternalError},
	}
	for _, tc := range cases {
		before, beforeOutcome := requestsTotal(t, r.reg), requestsBy(t, r.reg, tc.outcome)
		r.armed.Store(tc.panic)
		var headers []string
		if tc.noKey {
			headers = []string{"Authorization", ""}
		}
		status, _, body, err := r.do(tc.path, tc.body, headers...)
		r.armed.Store(false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, status, tc.status, body)
		}
		if d := requestsTotal(t, r.reg) - before; d != 1 {
			t.Errorf("%s: requests_total rose by %v, want exactly 1", tc.name, d)
		}
		if d := requestsBy(t, r.reg, tc.outcome) - beforeOutcome; d != 1 {
			t.Errorf("%s: requests_total{outcome=%q} rose by %v, want 1", tc.name, tc.outcome, d)
		}
	}
}
