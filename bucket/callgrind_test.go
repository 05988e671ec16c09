package bucket

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCallgrindScripts is a measurement, not a check: with
// LLMGUARD_CALLGRIND=1 it starts a redis-server under valgrind's callgrind,
// feeds it the scripts directly (no proxy, no network client but this one)
// and logs the instructions Redis executed per take, in a lone take.lua and
// in takebatch.lua batches of 1, 2, 4, 8, 12 and 32 (c32 sends some 6–10 takes a
// call: what a call costs whatever its size shows there), and per reconciliation in
// reconcile.lua batches of 4, 12 (a c1 node's some 12 a call) and 32: three token buckets (a user's, a tenant's, a
// global one, as llmguard-bench's rules) that every request shares, a take
// marker per take, two deltas per reconciliation. Without the variable it
// is skipped; with it, a missing valgrind fails it. Redis runs with hz 1:
// its cron (10 times a second by default, some 50 times slower under
// valgrind, so some 10–30k instructions a call, varying with the machine's
// load) is no work of a request. Run it with
//
//	LLMGUARD_CALLGRIND=1 go test -run TestCallgrindScripts -v ./bucket/
//
// LLMGUARD_CALLGRIND=all adds batches of 32 without request ids (no take
// or reconcile marker) and of one bucket or delta, to tell a batch's parts
// apart, and of 32 while their epochs' voided sets exist (a SISMEMBER a
// take);
// LLMGUARD_CALLGRIND_KEEP=<dir> keeps each measurement's callgrind dump
// there, for callgrind_annotate; LLMGUARD_CALLGRIND_ONLY=<text> runs only
// the measurements whose name holds the text (say "reconcile.lua, 32").
func TestCallgrindScripts(t *testing.T) {
	if os.Getenv("LLMGUARD_CALLGRIND") == "" {
		t.Skip("a measurement: set LLMGUARD_CALLGRIND=1 to run it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "cg.%p"),
		"redis-server", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir, "--hz", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); client.Ping(ctx).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("redis-server under valgrind did not answer within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r, err := NewRedis(RedisOptions{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	zero := func() {
		if out, err := exec.Command("callgrind_control", "-z", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -z: %v: %s", err, out)
		}
	}
	keep := os.Getenv("LLMGUARD_CALLGRIND_KEEP") // a directory: each measurement's dump is copied there
	instructions := func(name string) int64 {
		if out, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -d: %v: %s", err, out)
		}
		dumps, _ := filepath.Glob(filepath.Join(dir, "cg."+pid+".*"))
		newest, last := "", -1
		for _, d := range dumps {
			if n, err := strconv.Atoi(d[strings.LastIndexByte(d, '.')+1:]); err == nil && n > last {
				newest, last = d, n
			}
		}
		if keep != "" {
			b, err := os.ReadFile(newest)
			if err == nil {
				err = os.WriteFile(filepath.Join(keep, strings.NewReplacer(" ", "_", ",", "", ".lua", "").Replace(name)+".cg"), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Open(newest)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("no summary in %s", newest)
		return 0
	}
	limits, keys := scriptLimits, scriptKeys
	// Request ids as the proxy makes them (NewRequestID): a reconciliation's
	// marker is a field of its epoch's hash.
	nextID := func() string { return NewRequestID(time.Now()) }
	// takesOf returns a run of takes of the first n buckets, each with a
	// request id (a take marker) when marked.
	takesOf := func(n int, marked bool) func(size, batches int) {
		id := func() string { return "" }
		if marked {
			id = nextID
		}
		return func(size, batches int) { runTakes(t, r, n, id, size, batches, 0) }
	}
	takes := takesOf(3, true)
	// reconcilesOf returns a run of reconciliations of the first n of two
	// deltas, each with a request id (a marker) when marked.
	reconcilesOf := func(n int, marked bool) func(size, batches int) {
		return func(size, batches int) {
			for range batches {
				batch := make([]Reconciliation, size)
				for i := range batch {
					id := ""
					if marked {
						id = nextID()
					}
					batch[i] = Reconciliation{RequestID: id, Deltas: []Delta{{Key: keys[0], Limit: limits[0], Units: -100}, {Key: keys[1], Limit: limits[1], Units: 3}}[:n]}
				}
				for _, err := range r.ReconcileBatch(ctx, batch) {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	reconciles := reconcilesOf(2, true)
	only := os.Getenv("LLMGUARD_CALLGRIND_ONLY") // a substring: only the measurements whose name holds it
	measure := func(name string, size int, run func(size, batches int)) {
		if !strings.Contains(name, only) {
			return
		}
		run(size, 5) // warm: scripts cached, keys present
		zero()
		const batches = 50
		run(size, batches)
		t.Logf("%-34s %7d instructions per request", name, instructions(name)/int64(size*batches))
	}
	measure("take.lua, alone", 1, takes)
	if os.Getenv("LLMGUARD_CALLGRIND") == "all" { // the lone take's other paths
		r.takes.generic = true // take.lua's generic body, the single layout
		measure("take.lua, alone, generic body", 1, takes)
		r.takes.generic = false
	}
	measure("reconcile.lua, alone", 1, reconciles)
	if os.Getenv("LLMGUARD_CALLGRIND") == "all" { // a lone reconciliation in the batch layout
		r.rcGeneric = true
		measure("reconcile.lua, alone, batch layout", 1, reconciles)
		r.rcGeneric = false
	}
	r.takes.alone = true // a batch of one through takebatch.lua: a batch's fixed cost, near whole
	measure("takebatch.lua, batches of 1", 1, takes)
	r.takes.alone = false
	measure("takebatch.lua, batches of 2", 2, takes)
	measure("takebatch.lua, batches of 4", 4, takes)
	measure("takebatch.lua, batches of 8", 8, takes)
	measure("takebatch.lua, batches of 12", 12, takes)
	measure("takebatch.lua, batches of 32", 32, takes)
	measure("reconcile.lua, batches of 4", 4, reconciles)
	measure("reconcile.lua, batches of 12", 12, reconciles)
	measure("reconcile.lua, batches of 32", 32, reconciles)
	if os.Getenv("LLMGUARD_CALLGRIND") == "all" { // the same batches in the batch layout, not the run layout
		r.rcGeneric = true
		measure("reconcile.lua, batches of 4, batch layout", 4, reconciles)
		measure("reconcile.lua, batches of 12, batch layout", 12, reconciles)
		measure("reconcile.lua, batches of 32, batch layout", 32, reconciles)
		r.rcGeneric = false
	}
	if os.Getenv("LLMGUARD_CALLGRIND") == "all" { // the parts of a batched take
		measure("takebatch.lua, 32, no request id", 32, takesOf(3, false))
		measure("takebatch.lua, 32, one bucket", 32, takesOf(1, true))
		measure("takebatch.lua, 32, one bucket, no id", 32, takesOf(1, false))
		measure("reconcile.lua, 32, no request id", 32, reconcilesOf(2, false))
		measure("reconcile.lua, 32, one delta", 32, reconcilesOf(1, true))
		// A void in every epoch the batches run in (its voided set exists
		// for the next minute): each take asks the set (SISMEMBER), the
		// worst case of a batch's void check.
		now := time.Now()
		for s := -10 * time.Second; s <= time.Minute; s += 10 * time.Second {
			id := NewRequestID(now.Add(s))
			epoch, _ := markerEpoch(id)
			set := voidedSetKey(keys[0], epoch)
			if err := client.SAdd(ctx, set, id).Err(); err != nil {
				t.Fatal(err)
			}
			if err := client.PExpire(ctx, set, 2*time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		measure("takebatch.lua, 32, voided sets exist", 32, takes)
	}
}
