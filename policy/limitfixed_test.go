package policy

import (
	"testing"
	"time"
)

// TestLimitIsFixedMeansLimitAtIsLimit: a rule LimitIsFixed reports fixed
// has LimitAt equal to its Limit at every instant (so that a caller
// reading no clock for it, as meter's take does, takes what LimitAt would
// give), and the rules whose limit moves with the instant (a quota's
// window, a region's share) are not fixed. Over regionalConfig's rules
// (regional token buckets and quota, plain token buckets) and instants
// from 1971 to 2200.
func TestLimitIsFixedMeansLimitAtIsLimit(t *testing.T) {
	p, err := Compile(mustConfig(t, regionalConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"org-tpm": false, "org-model-tpm": false, "org-monthly": false, "all-tpm": true, "user-tpm": true}
	instants := []time.Time{time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999, time.UTC), time.Date(2200, 6, 1, 0, 0, 0, 0, time.UTC)}
	for name, fixed := range want {
		r := rule(t, p, name)
		if got := r.LimitIsFixed(); got != fixed {
			t.Errorf("rule %s: LimitIsFixed %v, want %v", name, got, fixed)
		}
		if !r.LimitIsFixed() {
			continue
		}
		for _, at := range instants {
			if got := r.LimitAt(at); got != r.Limit {
				t.Errorf("rule %s, fixed: LimitAt(%v) = %+v, not its Limit %+v", name, at, got, r.Limit)
			}
		}
	}
}
