package app

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape parses the admin /metrics into families.
func (h *harness) scrape() map[string]*familyView {
	h.t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(h.metrics()))
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*familyView{}
	for name, f := range fams {
		v := &familyView{}
		for _, m := range f.GetMetric() {
			labels := model.LabelSet{}
			for _, l := range m.GetLabel() {
				labels[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
			}
			var val float64
			switch {
			case m.Counter != nil:
				val = m.GetCounter().GetValue()
			case m.Gauge != nil:
				val = m.GetGauge().GetValue()
			case m.Histogram != nil:
				val = float64(m.GetHistogram().GetSampleCount())
			}
			v.samples = append(v.samples, sampleView{labels, val})
		}
		out[name] = v
	}
	return out
}

type sampleView struct {
	labels model.LabelSet
	value  float64
}

// familyView sums a family's samples that match labels.
type familyView struct{ samples []sampleView }

func (f *familyView) sum(match map[string]string) float64 {
	if f == nil {
		return 0
	}
	total := 0.0
	for _, s := range f.samples {
		ok := true
		for k, v := range match {
			if string(s.labels[model.LabelName(k)]) != v {
				ok = false
			}
		}
		if ok {
			total += s.value
		}
	}
	return total
}

// A known workload, then /metrics: every family the dashboards use is there
// with the values that workload implies.
func TestMetricsAfterAWorkload(t *testing.T) {
	h := startFlavors(t, `  - {name: alice-rpm, scope: user, unit: requests, rate: 1, per: 1h, burst: 3}
  - {name: acme-month, scope: tenant, unit: usd, quota: 1, period: month}`)
	var wantIn, wantOut, wantCached int64
	// An upstream error first: refunded, it leaves alice-rpm's 3 requests.
	h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "x-mock-status", "503")
	for _, c := range []struct{ path, body, out string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, "20"},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50,"stream":true}`, "7"},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "9"},
	} {
		headers := []string{"x-mock-completion-tokens", c.out}
		if strings.HasPrefix(c.path, "/v1/messages") {
			headers = append(headers, "x-mock-cache-read", "2")
		}
		resp, body := h.do(c.path, c.body, headers...)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", c.path, resp.StatusCode)
		}
		if strings.HasPrefix(c.path, "/v1/messages") {
			wantIn += intField(t, body, "input_tokens") + intField(t, body, "cache_read_input_tokens") + intField(t, body, "cache_creation_input_tokens")
			wantOut += intField(t, body, "output_tokens")
			wantCached += 2
		} else if !strings.Contains(c.body, "stream") {
			wantIn += intField(t, body, "prompt_tokens")
			wantOut += intField(t, body, "completion_tokens")
		} else {
			wantIn += hiInput
			wantOut += 7
		}
	}
	resp, _ := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`)
	if resp.StatusCode != 429 {
		t.Fatalf("fifth request: %d, want 429 from alice-rpm (3 requests; the 503 was refunded)", resp.StatusCode)
	}

	m := h.scrape()
	check := func(name string, match map[string]string, want float64) {
		t.Helper()
		if got := m[name].sum(match); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s%v = %v, want %v", name, match, got, want)
		}
	}
	positive := func(name string, match map[string]string) {
		t.Helper()
		if got := m[name].sum(match); !(got > 0) {
			t.Errorf("%s%v = %v, want > 0", name, match, got)
		}
	}
	check("llmguard_requests_total", map[string]string{"outcome": "allowed"}, 3)
	check("llmguard_requests_total", map[string]string{"outcome": "upstream_error", "model": "gpt-4o-mini"}, 1)
	check("llmguard_requests_total", map[string]string{"outcome": "limited", "limit": "alice-rpm"}, 1)
	check("llmguard_requests_total", map[string]string{"flavor": "anthropic"}, 1)
	check("llmguard_tokens_total", map[string]string{"kind": "input"}, float64(wantIn))
	check("llmguard_tokens_total", map[string]string{"kind": "output"}, float64(wantOut))
	check("llmguard_tokens_total", map[string]string{"kind": "cached_input"}, float64(wantCached))
	positive("llmguard_tokens_estimated_total", map[string]string{"kind": "input"})
	positive("llmguard_tokens_estimated_total", map[string]string{"kind": "output"})
	check("llmguard_estimate_ratio", map[string]string{}, 3) // one observation per settled request with usage
	positive("llmguard_reserved_units_total", map[string]string{"limit": "user-tpm"})
	positive("llmguard_refunded_units_total", map[string]string{"limit": "user-tpm"})
	positive("llmguard_spend_usd_total", map[string]string{"tenant": "acme", "model": "claude-sonnet-4-5"})
	positive("llmguard_limit_utilization", map[string]string{"limit": "alice-rpm", "tenant": "acme"})
	positive("llmguard_quota_used", map[string]string{"limit": "acme-month", "tenant": "acme"})
	check("llmguard_quota_limit", map[string]string{"limit": "acme-month", "tenant": "acme"}, 1)
	positive("llmguard_quota_period_end_timestamp_seconds", map[string]string{"limit": "acme-month"})
	check("llmguard_store_duration_seconds", map[string]string{"op": "take"}, 5) // one take per judged request, on the memory store too
	check("llmguard_overhead_seconds", map[string]string{}, 4)                   // the forwarded requests
	check("llmguard_upstream_responses_total", map[string]string{"status": "200"}, 3)
	check("llmguard_upstream_responses_total", map[string]string{"status": "503"}, 1)
	check("llmguard_upstream_duration_seconds", map[string]string{"upstream": "openai"}, 3)

	// Spend agrees with the quota: the same micro-dollars, in USD.
	spend := m["llmguard_spend_usd_total"].sum(map[string]string{"tenant": "acme"})
	used := m["llmguard_quota_used"].sum(map[string]string{"limit": "acme-month"})
	if spend <= 0 || used <= 0 {
		t.Errorf("spend %v, quota used %v", spend, used)
	}
	// No label holds a user id or a key.
	for name, f := range m {
		for _, s := range f.samples {
			for k, v := range s.labels {
				if k == "user" || strings.Contains(string(v), testKey) || v == "alice" {
					t.Errorf("%s carries a user or key label: %v", name, s.labels)
				}
			}
		}
	}
}

// Model labels come from the priced names (a dated snapshot counts under
// its family, an unpriced model as "other") and are capped: past the cap,
// "other" too. No caller can grow the label set.
func TestMetricLabelsAreBounded(t *testing.T) {
	h := startFlavors(t, "metrics: {max_models: 1}\n")
	for _, model := range []string{"gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o", "gpt-made-up-" + strings.Repeat("x", 200)} {
		h.do("/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
	}
	resp, _ := h.do("/v1/chat/completions", `{"model":"`+strings.Repeat("y", 300)+`","messages":[]}`)
	if resp.StatusCode != 400 {
		t.Errorf("a 300-byte model name: %d, want 400", resp.StatusCode)
	}
	m := h.scrape()
	if got := m["llmguard_requests_total"].sum(map[string]string{"model": "gpt-4o-mini"}); got != 2 {
		t.Errorf("gpt-4o-mini and its dated snapshot: %v requests, want 2", got)
	}
	if got := m["llmguard_requests_total"].sum(map[string]string{"model": "other", "outcome": "allowed"}); got != 2 {
		t.Errorf(`gpt-4o (past the cap) and an unpriced model: %v requests under "other", want 2`, got)
	}
}
