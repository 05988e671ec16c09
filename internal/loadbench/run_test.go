package loadbench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the benchmark's child processes, as
// cmd/llmguard-bench does: Run starts os.Executable() with "child ROLE …".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := Child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// redisTargets is AllTargets without redis when redis-server is missing
// (with a log line), except under CI=true, where the redis target stays and
// the run must fail if Redis is missing.
func redisTargets(t *testing.T) []string {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	if _, err := exec.LookPath(name); err != nil && os.Getenv("CI") != "true" {
		t.Logf("%v: the redis target is left out", err)
		return []string{TargetDirect, TargetBare, TargetMemory}
	}
	return AllTargets
}

// TestRunTinyMatrix runs every kind of cell with a few requests each and
// checks the report: a row per cell and target in run order, every request
// answered and (for llmguard) admitted by its limiter, the count cache hit
// on warm bodies and not on cold ones, CPU measured for
// every proxy process, quantiles in order, and a table line per row. No
// figure is compared with a time.
func TestRunTinyMatrix(t *testing.T) {
	const requests = 6
	targets := redisTargets(t)
	o := Options{
		Sizes:       []int{1 << 10, 16 << 10},
		Concurrency: []int{1, 3},
		Targets:     targets,
		Requests:    requests,
		Duration:    time.Minute, // a bound, never reached: the count ends each run
		// No take may miss its deadline (the default 50 ms did on a
		// loaded machine): the test asserts that none failed.
		StoreTimeout: 5 * time.Second, // at most store.void_window (10 s)
	}
	rep, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	cells := rep.Options.cells()
	if len(cells) != 2*2*2*2 || len(rep.Rows) != len(cells)*len(targets) {
		t.Fatalf("%d cells, %d rows; want 16 cells and %d rows", len(cells), len(rep.Rows), 16*len(targets))
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	for i, row := range rep.Rows {
		cell, target := cells[i/len(targets)], targets[i%len(targets)]
		name := fmt.Sprintf("row %d (%s %s)", i, row.Cell, row.Target)
		if row.Cell != cell || row.Target != target {
			t.Errorf("%s: want %s %s", name, cell, target)
		}
		if row.N != requests || row.Errors != 0 || row.RPS <= 0 {
			t.Errorf("%s: %d answered, %d failed (%s), %.0f req/s; want %d, 0, > 0", name, row.N, row.Errors, row.FirstError, row.RPS, requests)
		}
		if row.P50 <= 0 || row.P50 > row.P99 || row.P99 > row.P999 {
			t.Errorf("%s: p50 %v, p99 %v, p99.9 %v", name, row.P50, row.P99, row.P999)
		}
		if row.MeanBody < cell.Size*3/4 || row.MeanBody > cell.Size*2 {
			t.Errorf("%s: mean body %d bytes", name, row.MeanBody)
		}
		proxied := target != TargetDirect
		if proxied != (row.ProxyCPU > 0) || row.ClientCPU <= 0 || row.MockCPU <= 0 {
			t.Errorf("%s: CPU µs/req proxy %.0f, client %.0f, mock %.0f", name, row.ProxyCPU, row.ClientCPU, row.MockCPU)
		}
		if runtime.GOOS == "linux" && proxied != (row.ProxySys >= 0) {
			t.Errorf("%s: system µs/req %.0f (proxied %v)", name, row.ProxySys, proxied)
		}
		llmguard := target == TargetMemory || target == TargetRedis
		if llmguard && (row.Allowed != requests || row.StoreErrors != 0) {
			t.Errorf("%s: llmguard allowed %.0f, store errors %.0f; want %d, 0", name, row.Allowed, row.StoreErrors, requests)
		}
		// Warm bodies resend their conversation: most of each is remembered.
		// Cold bodies are new text: nothing is.
		if llmguard && ((row.Cell.Warm && row.CacheHit < 0.5) || (!row.Cell.Warm && (row.CacheHit < 0 || row.CacheHit > 0.05))) {
			t.Errorf("%s: count-cache hit share %.2f", name, row.CacheHit)
		}
		if !llmguard && row.CacheHit != -1 {
			t.Errorf("%s: cache hits %.2f, want -1 (not llmguard)", name, row.CacheHit)
		}
		if !llmguard && row.Allowed != -1 {
			t.Errorf("%s: allowed %.0f, want -1 (not llmguard)", name, row.Allowed)
		}
		if line := "| " + row.Cell.String() + " | " + row.Target + " | "; strings.Count(table.String(), line) != 1 {
			t.Errorf("%s: the table has %d lines starting %q", name, strings.Count(table.String(), line), line)
		}
	}
	if strings.Contains(table.String(), "failed") || strings.Contains(table.String(), "counted") {
		t.Errorf("the table reports trouble:\n%s", table.String())
	}
	if t.Failed() {
		t.Log("\n" + table.String())
	}
}

// TestRunWithoutRedis: a selection without the redis target runs where
// redis-server is missing; one with it fails at once, saying so.
func TestRunWithoutRedis(t *testing.T) {
	t.Setenv("REDIS_SERVER", "/nonexistent/redis-server")
	o := Options{Sizes: []int{1 << 10}, Concurrency: []int{2}, Streams: []bool{true}, Warm: []bool{true}, Requests: 3, Duration: time.Minute}
	o.Targets = []string{TargetBare, TargetMemory}
	rep, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rep.Rows); got != 2 || slices.ContainsFunc(rep.Rows, func(r Row) bool { return r.N != 3 }) {
		t.Errorf("rows %+v", rep.Rows)
	}
	o.Targets = []string{TargetMemory, TargetRedis}
	if _, err := Run(o); !errors.Is(err, errNoRedis) {
		t.Errorf("with the redis target: %v, want errNoRedis", err)
	}
}

// TestQuantile: nearest rank.
func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 100}, {0.99, 198}, {0.999, 200}, {1, 200}} {
		if got := quantile(d, c.q); got != c.want {
			t.Errorf("quantile(1…200, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

// TestLabel reads one label of a Prometheus series.
func TestLabel(t *testing.T) {
	s := `llmguard_store_errors_total{kind="timeout",op="take"}`
	if label(s, "op") != "take" || label(s, "kind") != "timeout" || label(s, "limit") != "" {
		t.Errorf("op %q, kind %q, limit %q", label(s, "op"), label(s, "kind"), label(s, "limit"))
	}
}
