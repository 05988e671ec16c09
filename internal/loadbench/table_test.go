package loadbench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestMarkdownRedisNoteOnlyWithRedis: the table's notes explain the redis
// column only when the table has one (a run of -targets direct,bare,memory
// printed a note on a column it did not show).
func TestMarkdownRedisNoteOnlyWithRedis(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets []string
		want    bool
	}{
		{name: "no redis target", targets: []string{TargetDirect, TargetBare, TargetMemory}, want: false},
		{name: "redis target", targets: AllTargets, want: true},
	} {
		cell := Cell{Shape: Shape{Size: 1 << 10}, Concurrency: 1}
		rep := Report{Options: Options{Targets: tc.targets, Requests: 1, Duration: time.Second}, Started: time.Unix(0, 0)}
		for _, target := range tc.targets {
			rep.Rows = append(rep.Rows, Row{Target: target, Cell: cell, N: 1, Allowed: -1, CacheHit: -1})
		}
		var b bytes.Buffer
		rep.Markdown(&b)
		out := b.String()
		if got := strings.Contains(out, "redis µs/req"); got != tc.want {
			t.Errorf("%s: redis column shown %v, want %v", tc.name, got, tc.want)
		}
		if got := strings.Contains(out, "redis: redis-server's"); got != tc.want {
			t.Errorf("%s: note on the redis column %v, want %v:\n%s", tc.name, got, tc.want, out)
		}
	}
}

// TestMarkdownShowsSystemTime: the proxy's system time a request has its
// column beside CPU µs/req, "—" where it was not measured (the direct
// target, or no /proc).
func TestMarkdownShowsSystemTime(t *testing.T) {
	cell := Cell{Shape: Shape{Size: 1 << 10}, Concurrency: 1}
	rep := Report{Options: Options{Targets: []string{TargetDirect, TargetBare, TargetMemory}, Requests: 1, Duration: time.Second}, Started: time.Unix(0, 0),
		Rows: []Row{
			{Target: TargetDirect, Cell: cell, N: 1, ProxyCPU: -1, ProxySys: -1, Allowed: -1, CacheHit: -1},
			{Target: TargetBare, Cell: cell, N: 1, ProxyCPU: 93, ProxySys: 66, Allowed: -1, CacheHit: -1},
			{Target: TargetMemory, Cell: cell, N: 1, ProxyCPU: 153, ProxySys: 75, Allowed: 1, CacheHit: 0.65},
		}}
	var b bytes.Buffer
	rep.Markdown(&b)
	out := b.String()
	for _, want := range []string{
		"| CPU µs/req | sys µs/req |",
		"| 1K cold json c1 | direct | 1 | 0 | 0.00 | 0.00 | 0.00 | — | — | — | — |",
		"| +0.00 | +0.00 | 93 | 66 | — |",
		"| +0.00 | +0.00 | 153 | 75 | 1.65 |",
		"sys: the system part of it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
