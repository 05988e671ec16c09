package policy

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// A limit's lease compiles to its rule in the rule's units, labelled with
// its name; a limit without one has the zero Lease.
func TestCompileLease(t *testing.T) {
	p, err := Compile(mustConfig(t, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
limits:
  - {name: spend, scope: global, unit: usd, rate: 10, per: 1m, burst: 20, lease: {size: 0.25, ttl: 50ms}}
  - {name: tpm, scope: tenant, unit: tokens, rate: 1000, per: 1m, lease: {size: 100}}
  - {name: rpm, scope: user, unit: requests, rate: 10, per: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bucket.Lease{
		"spend": {Size: 250000, TTL: 50 * time.Millisecond, Label: "spend"}, // micro-USD
		"tpm":   {Size: 100, TTL: 100 * time.Millisecond, Label: "tpm"},
		"rpm":   {},
	}
	for _, r := range p.Rules() {
		if r.Lease != want[r.Name] {
			t.Errorf("%s: lease %+v, want %+v", r.Name, r.Lease, want[r.Name])
		}
	}
}
