package proxy

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
)

// anthropic-ratelimit-*-reset: a quota's period end exactly; a token
// bucket's full-refill instant, rounded up to a whole second only when it
// has a fraction (never earlier than the bucket is full).
func TestAnthropicResetAt(t *testing.T) {
	now := time.Date(2026, 12, 4, 23, 59, 58, 0, time.UTC)
	end := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	quota := bucket.Quota(10, end.Add(-24*time.Hour), end)
	tb := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	for _, c := range []struct {
		name  string
		limit bucket.Limit
		reset time.Duration
		now   time.Time
		want  time.Time
	}{
		{name: "quota: its period end, the proxy's clock ahead", limit: quota, reset: 2 * time.Second, now: now.Add(3 * time.Millisecond), want: end},
		{name: "quota: its period end, the proxy's clock behind", limit: quota, reset: 2 * time.Second, now: now.Add(-time.Second), want: end},
		{name: "quota past its period end (reset 0)", limit: quota, reset: 0, now: end.Add(time.Second), want: end.Add(time.Second)},
		{name: "bucket full again at a whole second", limit: tb, reset: 2 * time.Second, now: now, want: now.Add(2 * time.Second)},
		{name: "bucket full again within a second: rounded up", limit: tb, reset: 1500 * time.Millisecond, now: now, want: now.Add(2 * time.Second)},
		{name: "bucket full: now", limit: tb, reset: 0, now: now, want: now},
		{name: "a time zone other than UTC", limit: tb, reset: time.Microsecond, now: now.In(time.FixedZone("x", 3600)), want: now.Add(time.Second)},
	} {
		a := &meter.Applied{Limit: c.limit, Status: bucket.Status{Reset: c.reset}}
		got := anthropicResetAt(a, c.now)
		if !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("%s: %s, want %s", c.name, got.Format(time.RFC3339Nano), c.want.Format(time.RFC3339Nano))
		}
	}
}
