package loadbench

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunHotTiny runs every hot-key variant with a few requests on a real
// 3-master cluster and checks the report: a row per variant, every request
// answered, each taking at least one script call in the plain variant (two
// slot groups: the tenant's and the global bucket) and Redis doing work in
// every variant, and a table line per row. No figure is compared with a
// time. Without redis-server it skips, and fails under CI=true.
func TestRunHotTiny(t *testing.T) {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: a missing redis-server fails)", err)
		}
		t.Skipf("%v", err)
	}
	const requests = 40
	rep, err := RunHot(HotOptions{Concurrency: 4, Requests: requests, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(HotVariants) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(HotVariants))
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	for i, row := range rep.Rows {
		if row.Variant != HotVariants[i] || row.N != requests || row.Errors != 0 || row.RPS <= 0 || row.P50 > row.P99 {
			t.Errorf("row %d: %+v", i, row)
		}
		if row.Commands <= 0 || row.RedisMicros < 0 || row.Busiest <= 0 || row.Busiest > 1 {
			t.Errorf("%s: %.2f commands, %.1f µs, busiest %.2f per request", row.Variant, row.Commands, row.RedisMicros, row.Busiest)
		}
		if row.Variant == HotPlain && row.Scripts <= 0 {
			// Concurrent takes of one slot share a script (bucket.Redis
			// coalesces them), so fewer than 2 per request is possible.
			t.Errorf("plain: %.2f script calls per request, want some", row.Scripts)
		}
		if row.Variant == HotLease && row.RoundTrips >= rep.Rows[0].RoundTrips/2 {
			// A lease of 100 requests' worth makes one take serve many (0.04
			// round trips per request against 2 on a quiet machine).
			t.Errorf("lease: %.3f Redis round trips per request, not under half of plain's %.3f", row.RoundTrips, rep.Rows[0].RoundTrips)
		}
		if !strings.Contains(table.String(), "| "+row.Variant+" | ") {
			t.Errorf("no table line for %s:\n%s", row.Variant, table.String())
		}
	}
}

// TestHotMarkdownExplainsANegativeOverhead: a proxied row faster than the
// direct baseline gets a line saying the load changed between the runs;
// rows slower than the baseline get none (trial20 read +p50 -13.0 ms with
// no word on it).
func TestHotMarkdownExplainsANegativeOverhead(t *testing.T) {
	const note = "A negative +p50 or +p99"
	for _, tc := range []struct {
		name     string
		p50, p99 time.Duration
		want     bool
	}{
		{name: "slower than direct", p50: 12 * time.Millisecond, p99: 40 * time.Millisecond, want: false},
		{name: "p50 below direct", p50: 8 * time.Millisecond, p99: 40 * time.Millisecond, want: true},
		{name: "p99 below direct", p50: 12 * time.Millisecond, p99: 20 * time.Millisecond, want: true},
	} {
		rep := HotReport{Started: time.Unix(0, 0), DirectP50: 10 * time.Millisecond, DirectP99: 30 * time.Millisecond,
			Rows: []HotRow{{Variant: HotPlain, N: 1, P50: 15 * time.Millisecond, P99: 45 * time.Millisecond},
				{Variant: HotLease, N: 1, P50: tc.p50, P99: tc.p99}}}
		var b bytes.Buffer
		rep.Markdown(&b)
		if got := strings.Contains(b.String(), note); got != tc.want {
			t.Errorf("%s: note shown %v, want %v:\n%s", tc.name, got, tc.want, b.String())
		}
	}
}
