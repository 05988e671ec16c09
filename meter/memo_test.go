package meter

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// memoRig is two Metrics recording the same requests: fast keeps its
// bundleMemo, slow forgets it before every request, so every bundle is
// looked up in the seriesCaches as before the memo.
type memoRig struct {
	fast, slow       *Metrics
	regFast, regSlow *prometheus.Registry
	// rules are the rules requests apply, two sets of the same names at
	// other addresses (a reload) and a name of their own.
	rules []*policy.Rule
}

func newMemoRig(t testing.TB) *memoRig {
	r := &memoRig{regFast: prometheus.NewRegistry(), regSlow: prometheus.NewRegistry()}
	opt := MetricsOptions{MaxTenants: 3, MaxModels: 3} // small: later values are "other"
	var err error
	if r.fast, err = NewMetrics(r.regFast, opt); err != nil {
		t.Fatal(err)
	}
	if r.slow, err = NewMetrics(r.regSlow, opt); err != nil {
		t.Fatal(err)
	}
	units := []policy.Unit{policy.UnitTokens, policy.UnitUSD, policy.UnitRequests}
	for reload := range 2 {
		set := make([]policy.Rule, 4) // one policy's rules, side by side
		for i := range set {
			set[i] = policy.Rule{Name: []string{"user-tpm", "tenant-usd", "rpm", "user-tpm"}[i], Unit: units[i%len(units)]}
			if reload == 1 && i == 3 {
				set[i].Name = "other-rule"
			}
		}
		for i := range set {
			r.rules = append(r.rules, &set[i])
		}
	}
	return r
}

var (
	memoTenants = []string{"acme", "globex", "", "initech", "other", "umbrella", "acme"}
	memoModels  = []string{"gpt-4o-mini", "claude-x", "", "other", "o3", "gpt-5", "gpt-4o-mini"}
	memoFlavors = []spec.Flavor{spec.FlavorOpenAI, spec.FlavorAnthropic, spec.FlavorAzure}
)

// step records one request picked by the bytes of op (cycled), or calls
// Prepare, on both Metrics.
func (r *memoRig) step(op []byte) {
	at := func(i int) int { return int(op[i%len(op)]) }
	if at(0)%17 == 16 {
		r.fast.Prepare(nil)
		r.slow.Prepare(nil)
		return
	}
	n := at(1) % 4
	picked := make([]*policy.Rule, n)
	for i := range picked {
		picked[i] = r.rules[at(2+i)%len(r.rules)]
	}
	tenant, model, flavor := memoTenants[at(6)%len(memoTenants)], memoModels[at(7)%len(memoModels)], memoFlavors[at(8)%len(memoFlavors)]
	est := spec.Usage{InputTokens: int64(at(9) % 50), OutputTokens: int64(at(10) % 70)}
	for _, m := range []*Metrics{r.fast, r.slow} {
		if m == r.slow {
			m.memo = bundleMemo{} // forget: every bundle looked up
		}
		x := memoExchange(flavor, model, tenant, est, picked)
		m.admitted(x)
		var deltas []bucket.Delta
		var owners []int
		if n > 0 {
			deltas, owners = []bucket.Delta{{Key: "k0", Units: -3}}, []int{0}
		}
		m.settled(x, spec.Usage{InputTokens: est.InputTokens + 1, OutputTokens: est.OutputTokens / 2}, int64(at(11)), true, deltas, owners)
		m.RequestOf(x, OutcomeAllowed, "")
	}
}

// memoExchange is an admitted request of flavor, model and tenant under
// rules, a quota among them, with estimate est.
func memoExchange(f spec.Flavor, model, tenant string, est spec.Usage, rules []*policy.Rule) *Exchange {
	x := &Exchange{req: Request{Flavor: f, Principal: policy.Principal{Tenant: tenant}, Estimate: est}, modelLabel: model}
	end := time.Unix(1_900_000_000, 0)
	for i, rule := range rules {
		a := Applied{Rule: rule, Key: "k" + string(rune('0'+i)), Limit: bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Minute},
			Reserved: est.InputTokens + est.OutputTokens, Status: bucket.Status{Remaining: 900 - int64(i)}}
		if rule.Unit == policy.UnitUSD {
			a.Limit.WindowStart, a.Limit.WindowEnd = end.Add(-time.Hour), end
		}
		x.rules = append(x.rules, a)
	}
	return x
}

// exposition is every metric reg gathers, as text.
func exposition(t testing.TB, reg *prometheus.Registry) string {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// check fails when the two Metrics export anything different.
func (r *memoRig) check(t testing.TB, what string) {
	if fast, slow := exposition(t, r.regFast), exposition(t, r.regSlow); fast != slow {
		t.Fatalf("%s: with the memo the metrics differ:\n%s", what, lineDiff(fast, slow))
	}
}

// lineDiff is the lines of a not in b and of b not in a.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out strings.Builder
	for l := range ma {
		if !mb[l] {
			out.WriteString("memo: " + l + "\n")
		}
	}
	for l := range mb {
		if !ma[l] {
			out.WriteString("lookup: " + l + "\n")
		}
	}
	return out.String()
}

// TestBundleMemoRecordsAsTheLookups: through the bundle memo, requests of
// varied flavors, models and tenants (past the label caps, "" and a
// literal "other" among them), under rules of one name at several
// addresses (a reload) and reloads (Prepare) between them, export exactly
// what the same requests export when every bundle is looked up.
func TestBundleMemoRecordsAsTheLookups(t *testing.T) {
	for seed := range uint64(20) {
		r := newMemoRig(t)
		rng := rand.New(rand.NewPCG(seed, 13))
		op := make([]byte, 12)
		for i := range 300 {
			for j := range op {
				op[j] = byte(rng.IntN(256))
			}
			if seed%2 == 0 { // runs of the same request: the memo hits
				op[6], op[7], op[8] = byte(i/50), byte(i/70), 0
			}
			r.step(op)
		}
		r.check(t, fmt.Sprintf("seed %d", seed))
	}
}

// FuzzBundleMemo: any sequence of requests and reloads exports the same
// metrics through the memo as through the lookups.
func FuzzBundleMemo(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add([]byte{16, 3, 0, 0, 0, 0, 4, 3, 1, 5, 5, 5, 33, 3, 0, 1, 2, 3, 1, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 12*64 {
			return
		}
		r := newMemoRig(t)
		for i := 0; i < len(ops); i += 12 {
			r.step(ops[i:min(i+12, len(ops))])
		}
		r.check(t, "fuzz")
	})
}
