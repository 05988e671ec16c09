package policy

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// What a split rule adds on the request path: LimitAt scales the limit by
// the held share (an atomic load and integer arithmetic), Key returns the
// region's precomputed key, NoteDemand adds to an atomic counter.
func BenchmarkRegionalRequestPath(b *testing.B) {
	c, err := config.Parse([]byte(regionalConfig))
	if err != nil {
		b.Fatal(err)
	}
	p, err := Compile(c)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	rule(b, p, "org-tpm").Regional.Hold(612_345, now.Add(time.Hour))
	pr := Principal{KeyID: "0123abcd", User: "alice", Tenant: "acme"}
	for _, name := range []string{"all-tpm", "org-tpm"} {
		r := rule(b, p, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.LimitAt(now)
				_ = r.Key(pr)
				r.NoteDemand(100)
			}
		})
	}
}
