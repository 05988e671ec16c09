package meter

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/spec"
)

// try admits a gpt-4o-mini chat of user reserving in input and out output
// tokens and, when it is admitted, settles it at that reservation; it
// returns the verdict.
func (r *gaugeRig) try(user string, in, out int64) Verdict {
	r.t.Helper()
	r.n++
	x := r.meter.Admit(Request{ID: "try-" + user + "-" + string(rune('a'+r.n)), Principal: r.callers[user], Policy: r.policy,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: in, OutputTokens: out}})
	v := x.Verdict()
	if v == Admitted {
		x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: in, OutputTokens: out}, Status: 200})
	}
	return v
}

// quota_exhausted reads 1 once a quota denies a request it could have
// paid when full, though its settled use stays below the quota (the
// denied reservation is never spent): trial18's on-call saw a tenant
// answered 429 at 99.2 % of its daily tokens while the exhausted alert,
// which read quota_used / quota_limit >= 1 alone, stayed silent. A request
// larger than the whole quota does not set it; a reload that changes the
// amount and the period's end clear it.
func TestQuotaExhaustedOnDenial(t *testing.T) {
	r := newGaugeRig(t, `  - {name: acme-daily-tokens, scope: tenant, unit: tokens, quota: 1000, period: day}
`)
	const limit = "acme-daily-tokens"
	steps := []struct {
		name        string
		limits      string // a reload first, when set
		at          time.Time
		user        string
		in, out     int64
		verdict     Verdict
		used, exhst float64
	}{
		{name: "700 spent", user: "alice", in: 400, out: 300, verdict: Admitted, used: 700, exhst: 0},
		{name: "larger than the whole quota", user: "bob", in: 1500, verdict: TooLarge, used: 700, exhst: 0},
		{name: "900 asked, 300 left: denied", user: "bob", in: 400, out: 500, verdict: Denied, used: 700, exhst: 1},
		{name: "quota raised to 2000", limits: `  - {name: acme-daily-tokens, scope: tenant, unit: tokens, quota: 2000, period: day}
`, user: "alice", in: 100, out: 100, verdict: Admitted, used: 900, exhst: 0},
		{name: "1350 asked, 1100 left: denied again", user: "alice", in: 1250, out: 100, verdict: Denied, used: 900, exhst: 1},
		{name: "the next day", at: time.Date(2026, 3, 11, 0, 0, 1, 0, time.UTC), user: "alice", in: 10, out: 10, verdict: Admitted, used: 20, exhst: 0},
	}
	for i, s := range steps {
		if s.limits != "" {
			r.reload(s.limits)
		}
		if !s.at.IsZero() {
			r.clock.Set(s.at)
		}
		if got := r.try(s.user, s.in, s.out); got != s.verdict {
			t.Fatalf("step %d (%s): verdict %v, want %v", i, s.name, got, s.verdict)
		}
		if got := r.gauge("llmguard_quota_used", limit); !near(got, s.used) {
			t.Errorf("step %d (%s): quota_used %v, want %v", i, s.name, got, s.used)
		}
		if got := r.gauge("llmguard_quota_exhausted", limit); !near(got, s.exhst) {
			t.Errorf("step %d (%s): quota_exhausted %v, want %v", i, s.name, got, s.exhst)
		}
	}
}
