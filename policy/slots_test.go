package policy

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
)

// config's bounds of in-flight limits are the store's (config cannot
// import bucket), and a compiled in-flight rule is a valid bucket.Limit.
func TestInFlightBoundsAgree(t *testing.T) {
	if config.MaxInFlight != bucket.MaxSlots || config.MinSlotLease != bucket.MinSlotLease || config.MaxSlotLease != bucket.MaxSlotLease {
		t.Fatalf("config bounds (%d, %v, %v) differ from bucket's (%d, %v, %v)", config.MaxInFlight, config.MinSlotLease, config.MaxSlotLease,
			bucket.MaxSlots, bucket.MinSlotLease, bucket.MaxSlotLease)
	}
	c := mustConfig(t, `
upstreams:
  - {name: up, flavor: openai, base_url: "http://127.0.0.1:1"}
limits:
  - {name: c, scope: key, unit: concurrent, max: 100000, slot_lease: 24h, shadow: true}
`)
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Rules()[0]
	l := r.LimitAt(time.Now())
	if err := l.Validate(); err != nil || !l.Concurrent || l.Capacity != 100000 || l.Per != 24*time.Hour || !r.Shadow {
		t.Fatalf("compiled %+v (shadow %v): %v", l, r.Shadow, err)
	}
}
