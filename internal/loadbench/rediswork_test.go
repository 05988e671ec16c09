package loadbench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunRedisWorkTiny measures a few requests on one redis-server and on a
// Redis Cluster of three masters, with this test binary as both builds
// (A/B), and checks the report: a row per round, store, concurrency and
// build in run order, every request answered and admitted, and Redis's
// own counts of the work: at concurrency 1 one take script per request,
// two on the cluster (the tenant's slot and {global}'s), and scripts for
// the reconciliations beyond; each script with its commands. No figure is
// compared with a time.
func TestRunRedisWorkTiny(t *testing.T) {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	if _, err := exec.LookPath(name); err != nil && os.Getenv("CI") != "true" {
		t.Skipf("%v: skipping the real-Redis benchmark test", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const requests = 12
	o := RedisWorkOptions{Concurrency: []int{1, 3}, Requests: requests, Duration: time.Minute, Rounds: 2, Compare: exe}
	rep, err := RunRedisWork(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2*2*2*3 {
		t.Fatalf("%d rows, want 24 (two builds and the PING floor per round, store and concurrency)", len(rep.Rows))
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	i := 0
	for round := 1; round <= 2; round++ {
		for _, store := range AllStores {
			for _, c := range []int{1, 3} {
				builds := []string{"A", "B"}
				if round == 2 {
					builds = []string{"B", "A"}
				}
				for _, b := range builds {
					row := rep.Rows[i]
					i++
					where := fmt.Sprintf("row %d (%s c%d %s round %d)", i, store, c, b, round)
					if row.Store != store || row.Concurrency != c || row.Build != b || row.Round != round {
						t.Errorf("%s: got %s c%d %s round %d", where, row.Store, row.Concurrency, row.Build, row.Round)
					}
					if row.N != requests || row.Errors != 0 || row.Admitted != requests {
						t.Errorf("%s: %d answered, %d failed (%s), %d admitted; want %d, 0, %d", where, row.N, row.Errors, row.FirstError, row.Admitted, requests, requests)
					}
					takes := 1.0
					if store == StoreCluster {
						takes = 2
					}
					p := row.Per
					if p.Scripts <= 0 || p.Calls < 3*p.Scripts || p.Usec <= 0 || p.Reads <= 0 || p.CPU < 0 {
						t.Errorf("%s: per request %.2f scripts, %.2f commands, %.2f reads, %.1f µs, cpu %.1f µs", where, p.Scripts, p.Calls, p.Reads, p.Usec, p.CPU)
					}
					// At concurrency 1 nothing is coalesced: a take script per
					// slot group of every request, and the reconciliations'
					// (user tokens, tenant USD) beyond them. Concurrent takes
					// may share scripts (bucket.Redis coalesces them per slot).
					if c == 1 && p.Scripts <= takes {
						t.Errorf("%s: %.2f scripts per request, want more than %.0f (the takes, one each, and reconciliations)", where, p.Scripts, takes)
					}
				}
				// The floor: exactly one PING a request, nothing else run.
				row := rep.Rows[i]
				i++
				where := fmt.Sprintf("row %d (%s c%d PING round %d)", i, store, c, round)
				if row.Store != store || row.Concurrency != c || row.Build != BuildPing || row.Round != round {
					t.Errorf("%s: got %s c%d %s round %d", where, row.Store, row.Concurrency, row.Build, row.Round)
				}
				if row.N != requests || row.Admitted != requests || row.Per.Scripts != 0 || row.Per.ByCommand["ping"][0] != 1 || row.Per.Reads < 1 {
					t.Errorf("%s: %d answered, %d counted, per PING %.2f scripts, %v pings, %.2f reads; want %d, %d, 0, 1, ≥1", where, row.N, row.Admitted, row.Per.Scripts, row.Per.ByCommand["ping"][0], row.Per.Reads, requests, requests)
				}
			}
		}
	}
	for _, store := range AllStores {
		for _, c := range []int{1, 3} {
			for _, b := range []string{"A", "B", BuildPing} {
				if line := fmt.Sprintf("| %s | %d | %s | %d |", store, c, b, requests); strings.Count(table.String(), line) != 1 {
					t.Errorf("the table has %d lines starting %q", strings.Count(table.String(), line), line)
				}
			}
		}
	}
	if strings.Contains(table.String(), "failed") || strings.Contains(table.String(), "counted") {
		t.Errorf("the table reports trouble:\n%s", table.String())
	}
	if t.Failed() {
		t.Log("\n" + table.String())
	}
}

// TestRunRedisWorkWithoutRedis fails at once, saying so.
func TestRunRedisWorkWithoutRedis(t *testing.T) {
	t.Setenv("REDIS_SERVER", "/nonexistent/redis-server")
	if _, err := RunRedisWork(RedisWorkOptions{Requests: 3, Rounds: 1}); !errors.Is(err, errNoRedis) {
		t.Errorf("err %v, want errNoRedis", err)
	}
	if _, err := RunRedisWork(RedisWorkOptions{Stores: []string{"memcached"}}); err == nil {
		t.Error("an unknown store: no error")
	}
}

// TestRunRedisWorkCallgrind runs a few requests with Redis under valgrind's
// callgrind (skipped where valgrind is not installed): every row has an
// instruction count, and a request costs Redis more instructions than its
// commands alone could (at least a take script with three buckets).
func TestRunRedisWorkCallgrind(t *testing.T) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind not installed")
	}
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("REDIS_SERVER") == "" {
		t.Skip("redis-server not installed")
	}
	rep, err := RunRedisWork(RedisWorkOptions{Stores: []string{StoreRedis}, Concurrency: []int{2}, Requests: 10, Rounds: 1, Duration: time.Minute, Callgrind: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2 (the build and the PING floor)", len(rep.Rows))
	}
	row, ping := rep.Rows[0], rep.Rows[1]
	if row.Admitted != 10 || row.Instructions < 10_000 {
		t.Errorf("%d admitted, %.0f instructions per request", row.Admitted, row.Instructions)
	}
	// A PING is a round trip with nothing in it: some thousands of
	// instructions, far fewer than a request's takes and reconciliations.
	if ping.Build != BuildPing || ping.Admitted != 10 || ping.Instructions <= 0 || ping.Instructions >= row.Instructions {
		t.Errorf("floor row %s: %d PINGs, %.0f instructions per PING (a request: %.0f)", ping.Build, ping.Admitted, ping.Instructions, row.Instructions)
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	if !strings.Contains(table.String(), "Redis instructions") {
		t.Errorf("no instructions column:\n%s", table.String())
	}
}
