package meter

import (
	"testing"

	"github.com/llmguard/llmguard/policy"
)

// A waiter refused without ever taking (its max_wait ran out in the queue)
// is told a Retry-After no shorter than what a take would have said, for
// every algorithm: window counters have no refill rate to divide by, and
// were told 1ms.
func TestPeekDenialRetryAfterPerAlgorithm(t *testing.T) {
	for _, lim := range []string{
		"  - {name: fw, scope: key, unit: requests, rate: 1, per: 60s, algorithm: fixed_window}\n",
		"  - {name: sw, scope: key, unit: requests, rate: 1, per: 60s, algorithm: sliding_window}\n",
		"  - {name: tb, scope: key, unit: requests, rate: 1, per: 60s, burst: 1}\n",
	} {
		b := newWaitBench(t, lim, 8)
		b.meter.Admit(b.request(nil))
		x := b.meter.Admit(b.request(nil))
		took := x.RetryAfter()
		if x.Verdict() != Denied || took <= 0 {
			t.Fatalf("%s: second request %v, retry %v; want denied with a wait", lim, x.Verdict(), took)
		}
		var rules []*policy.Rule
		for i := range b.pol.Rules() {
			rules = append(rules, &b.pol.Rules()[i])
		}
		x.peekDenial(rules, x.rules[0].Key)
		if got := x.RetryAfter(); got < took {
			t.Errorf("%s: peekDenial says retry after %v, the take said %v", lim, got, took)
		}
	}
}
