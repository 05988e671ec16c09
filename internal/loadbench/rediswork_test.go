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
	if len(rep.Rows) != 2*2*(5+3) {
		t.Fatalf("%d rows, want 32 (two builds and the floors per round, store and concurrency: PING, FCALL and FCALL+6 on one Redis, PING on the cluster)", len(rep.Rows))
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
				// The floors: exactly one PING a request, nothing else run;
				// on one Redis then one FCALL a request, with nothing in it,
				// then with the lone take's six commands in it.
				row := rep.Rows[i]
				i++
				where := fmt.Sprintf("row %d (%s c%d PING round %d)", i, store, c, round)
				if row.Store != store || row.Concurrency != c || row.Build != BuildPing || row.Round != round {
					t.Errorf("%s: got %s c%d %s round %d", where, row.Store, row.Concurrency, row.Build, row.Round)
				}
				if row.N != requests || row.Admitted != requests || row.Per.Scripts != 0 || row.Per.ByCommand["ping"][0] != 1 || row.Per.Reads < 1 {
					t.Errorf("%s: %d answered, %d counted, per PING %.2f scripts, %v pings, %.2f reads; want %d, %d, 0, 1, ≥1", where, row.N, row.Admitted, row.Per.Scripts, row.Per.ByCommand["ping"][0], row.Per.Reads, requests, requests)
				}
				if store == StoreCluster {
					continue
				}
				for _, f := range []struct {
					build    string
					commands map[string]float64
				}{
					{BuildFcall, map[string]float64{"fcall": 1}},
					{BuildFcallCommands, map[string]float64{"fcall": 1, "time": 1, "mget": 1, "psetex": 4}},
				} {
					row := rep.Rows[i]
					i++
					where := fmt.Sprintf("row %d (%s c%d %s round %d)", i, store, c, f.build, round)
					if row.Store != store || row.Concurrency != c || row.Build != f.build || row.Round != round {
						t.Errorf("%s: got %s c%d %s round %d", where, row.Store, row.Concurrency, row.Build, row.Round)
					}
					if row.N != requests || row.Admitted != requests || row.Per.Scripts != 1 || row.Per.Reads < 1 {
						t.Errorf("%s: %d answered, %d counted, per call %.2f scripts, %.2f reads; want %d, %d, 1, ≥1", where, row.N, row.Admitted, row.Per.Scripts, row.Per.Reads, requests, requests)
					}
					// A connection the pool dials inside the measured run
					// (a loaded machine: CI saw one HELLO in 12 calls at c3)
					// opens with HELLO: the client's handshake, not the
					// function's work, which is what is checked here.
					delete(row.Per.ByCommand, "hello")
					for name, v := range row.Per.ByCommand {
						if v[0] != f.commands[name] {
							t.Errorf("%s: %v %s per call, want %v", where, v[0], name, f.commands[name])
						}
					}
					if len(row.Per.ByCommand) != len(f.commands) {
						t.Errorf("%s: commands %v, want %v", where, row.Per.ByCommand, f.commands)
					}
				}
			}
		}
	}
	for _, store := range AllStores {
		for _, c := range []int{1, 3} {
			builds := []string{"A", "B", BuildPing, BuildFcall, BuildFcallCommands}
			if store == StoreCluster {
				builds = builds[:3]
			}
			for _, b := range builds {
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

// TestRunRedisWorkPacedFloors: with PaceFloors, every floor's calls go no
// faster than build A's admitted requests of the round: call i leaves no
// sooner than i/rate after the first, so n calls take at least (n-1)/rate
// and the floor's rate is at most rate × n/(n-1), whatever the machine's
// load (a bound from the schedule, not a timing).
func TestRunRedisWorkPacedFloors(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("REDIS_SERVER") == "" && os.Getenv("CI") != "true" {
		t.Skip("redis-server not installed")
	}
	const requests = 40
	rep, err := RunRedisWork(RedisWorkOptions{Stores: []string{StoreRedis}, Concurrency: []int{1, 3}, Requests: requests, Duration: time.Minute, Rounds: 1, PaceFloors: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2*4 {
		t.Fatalf("%d rows, want 8 (build A and three floors per concurrency)", len(rep.Rows))
	}
	for _, g := range [][]RedisWorkRow{rep.Rows[:4], rep.Rows[4:]} {
		a := g[0]
		if a.Build != "A" || a.N != requests || a.Admitted != requests || a.RPS <= 0 {
			t.Fatalf("row %s c%d: %d answered, %d admitted, %.0f req/s", a.Build, a.Concurrency, a.N, a.Admitted, a.RPS)
		}
		bound := a.RPS * requests / (requests - 1)
		for _, f := range g[1:] {
			if f.N != requests || f.RPS > bound {
				t.Errorf("floor %s c%d: %d calls at %.0f per second, want %d at most %.0f (build A's %.0f)", f.Build, f.Concurrency, f.N, f.RPS, requests, bound, a.RPS)
			}
		}
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	if !strings.Contains(table.String(), "Floors paced") {
		t.Errorf("the report does not say the floors were paced:\n%s", table.String())
	}
}

// TestRedisWorkMarkdownMedians: each µs column of the table is its own
// median over the rounds, and "CPU × PING" the quotient of the CPU
// medians shown, even when the round with the median commandstats µs has
// another CPU figure.
func TestRedisWorkMarkdownMedians(t *testing.T) {
	row := func(build string, usec, cpu float64) RedisWorkRow {
		r := RedisWorkRow{Store: StoreRedis, Build: build, Concurrency: 1, N: 10, Admitted: 10, Instructions: -1}
		r.Per.Usec, r.Per.CPU, r.Per.UserCPU = usec, cpu, cpu/2
		return r
	}
	rep := &RedisWorkReport{Options: RedisWorkOptions{Rounds: 3}, Rows: []RedisWorkRow{
		row("A", 10, 90), row("A", 20, 30), row("A", 30, 60), // median µs 20 (CPU 30); median CPU 60
		row(BuildPing, 1, 10), row(BuildPing, 2, 40), row(BuildPing, 3, 20), // median CPU 20
	}}
	var b bytes.Buffer
	rep.Markdown(&b)
	for _, want := range []string{
		"| redis | 1 | A | 10 | 0 | 0.0 | 0.00 | 0.00 | 20.0 (10.0–30.0) | 60.0 (30.0–90.0) | 30.0 (15.0–45.0) | 3.0 |",
		"| redis | 1 | PING | 10 | 0 | 0.0 | 0.00 | 0.00 | 2.0 (1.0–3.0) | 20.0 (10.0–40.0) | 10.0 (5.0–20.0) | 1.0 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no line %q in:\n%s", want, b.String())
		}
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
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want 4 (the build and the floors PING, FCALL, FCALL+6)", len(rep.Rows))
	}
	row, ping, call, commands := rep.Rows[0], rep.Rows[1], rep.Rows[2], rep.Rows[3]
	if row.Admitted != 10 || row.Instructions < 10_000 {
		t.Errorf("%d admitted, %.0f instructions per request", row.Admitted, row.Instructions)
	}
	// A PING is a round trip with nothing in it: some thousands of
	// instructions, far fewer than a request's takes and reconciliations.
	if ping.Build != BuildPing || ping.Admitted != 10 || ping.Instructions <= 0 || ping.Instructions >= row.Instructions {
		t.Errorf("floor row %s: %d PINGs, %.0f instructions per PING (a request: %.0f)", ping.Build, ping.Admitted, ping.Instructions, row.Instructions)
	}
	// An FCALL with arguments costs more than a PING; its six commands
	// add more.
	if call.Build != BuildFcall || call.Admitted != 10 || call.Instructions <= ping.Instructions {
		t.Errorf("floor row %s: %d calls, %.0f instructions per call (a PING: %.0f)", call.Build, call.Admitted, call.Instructions, ping.Instructions)
	}
	if commands.Build != BuildFcallCommands || commands.Admitted != 10 || commands.Instructions <= call.Instructions {
		t.Errorf("floor row %s: %d calls, %.0f instructions per call (an empty FCALL: %.0f)", commands.Build, commands.Admitted, commands.Instructions, call.Instructions)
	}
	var table bytes.Buffer
	rep.Markdown(&table)
	if !strings.Contains(table.String(), "Redis instructions") {
		t.Errorf("no instructions column:\n%s", table.String())
	}
}
