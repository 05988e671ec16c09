package redisstats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redisstats"
	"github.com/llmguard/llmguard/internal/redistest"
)

// info is INFO commandstats, stats and cpu as Redis 7.0 writes them,
// trimmed.
const info = "# Commandstats\r\n" +
	"cmdstat_time:calls=4,usec=3,usec_per_call=0.75,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha:calls=2,usec=41,usec_per_call=20.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_get:calls=6,usec=2,usec_per_call=0.33,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_config|resetstat:calls=1,usec=70,usec_per_call=70.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
	"\r\n# Stats\r\ntotal_connections_received:5\r\ntotal_reads_processed:17\r\n" +
	"\r\n# CPU\r\nused_cpu_sys:0.250000\r\nused_cpu_user:1.125001\r\nused_cpu_sys_main_thread:0.2\r\n"

// TestParse reads every figure of a fixed INFO text, leaves the reader's
// own commands out, and refuses a line whose numbers do not parse.
func TestParse(t *testing.T) {
	r, err := redisstats.Parse(info)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]redisstats.Command{"time": {Calls: 4, Usec: 3}, "evalsha": {Calls: 2, Usec: 41}, "get": {Calls: 6, Usec: 2}}
	if len(r.Commands) != len(want) {
		t.Errorf("commands %v, want %v", r.Commands, want)
	}
	for name, c := range want {
		if r.Commands[name] != c {
			t.Errorf("%s: %+v, want %+v", name, r.Commands[name], c)
		}
	}
	if r.ReadsProcessed != 17 || r.CPU != 1375001*time.Microsecond || r.UserCPU != 1125001*time.Microsecond || r.Nodes != 1 {
		t.Errorf("reads %d, cpu %v, user %v, nodes %d; want 17, 1.375001s, 1.125001s, 1", r.ReadsProcessed, r.CPU, r.UserCPU, r.Nodes)
	}
	if r.Calls() != 12 || r.ScriptCalls() != 2 || r.ScriptUsec() != 41 || r.Usec() != 41 {
		t.Errorf("calls %d, scripts %d, script µs %d, µs %d; want 12, 2, 41, 41", r.Calls(), r.ScriptCalls(), r.ScriptUsec(), r.Usec())
	}
	p := r.Per(2)
	if p.Calls != 6 || p.Scripts != 1 || p.Reads != 8.5 || p.Usec != 20.5 || p.CPU != 687500.5 || p.UserCPU != 562500.5 || p.ByCommand["get"] != [2]float64{3, 1} {
		t.Errorf("per request: %+v", p)
	}
	if _, err := redisstats.Parse("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Error("a calls= that is not a number parsed")
	}
	if _, err := redisstats.Parse("total_reads_processed:many\r\n"); err == nil {
		t.Error("total_reads_processed that is not a number parsed")
	}
}

// TestUsecWithoutScripts: with no script run, every command's time counts.
func TestUsecWithoutScripts(t *testing.T) {
	r, err := redisstats.Parse("cmdstat_get:calls=6,usec=2\r\ncmdstat_set:calls=1,usec=5\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if r.Usec() != 7 || r.ScriptCalls() != 0 {
		t.Errorf("µs %d, scripts %d; want 7, 0", r.Usec(), r.ScriptCalls())
	}
}

// TestSub: the difference of two readings, a command new in the later one
// counted from zero.
func TestSub(t *testing.T) {
	before, _ := redisstats.Parse("cmdstat_get:calls=6,usec=2\r\ntotal_reads_processed:10\r\nused_cpu_user:1\r\n")
	after, _ := redisstats.Parse("cmdstat_get:calls=9,usec=5\r\ncmdstat_set:calls=1,usec=4\r\ntotal_reads_processed:14\r\nused_cpu_user:1.5\r\n")
	d := after.Sub(before)
	if d.Commands["get"] != (redisstats.Command{Calls: 3, Usec: 3}) || d.Commands["set"] != (redisstats.Command{Calls: 1, Usec: 4}) ||
		d.ReadsProcessed != 4 || d.CPU != 500*time.Millisecond {
		t.Errorf("difference %+v", d)
	}
	if s := d.Add(d); s.Commands["set"] != (redisstats.Command{Calls: 2, Usec: 8}) || s.ReadsProcessed != 8 || s.CPU != time.Second {
		t.Errorf("sum %+v", s)
	}
}

// TestReadRealServer runs a known script on a real redis-server and on a
// Redis Cluster of three masters, and finds its calls and commands in the
// readings taken around it.
func TestReadRealServer(t *testing.T) {
	ctx := context.Background()
	const src = "redis.call('GET', KEYS[1]); redis.call('SET', KEYS[1], 'x', 'PX', 1000); return 1"
	script := redis.NewScript(src)
	check := func(t *testing.T, d redisstats.Reading, runs int64) {
		t.Helper()
		if got := d.Commands["evalsha"].Calls + d.Commands["eval"].Calls; got != runs {
			t.Errorf("script runs %d, want %d (%v)", got, runs, d.Commands)
		}
		if d.Commands["get"].Calls != runs || d.Commands["set"].Calls != runs {
			t.Errorf("get %d, set %d; want %d each", d.Commands["get"].Calls, d.Commands["set"].Calls, runs)
		}
		// The cluster client may ask for the topology (cluster|slots) meanwhile.
		if d.Calls()-topology(d) != 3*runs || d.ScriptCalls() != runs || d.Usec() <= 0 || d.Usec() != d.ScriptUsec() {
			t.Errorf("calls %d (want %d), scripts %d, µs %d, script µs %d: %v", d.Calls(), 3*runs, d.ScriptCalls(), d.Usec(), d.ScriptUsec(), d.Commands)
		}
	}
	t.Run("server", func(t *testing.T) {
		c := redistest.Start(t).Client()
		if err := script.Run(ctx, c, []string{"k"}).Err(); err != nil { // the connection and the script's load, before
			t.Fatal(err)
		}
		if err := redisstats.Reset(ctx, c); err != nil {
			t.Fatal(err)
		}
		before, err := redisstats.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			if err := script.Run(ctx, c, []string{"k"}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		after, err := redisstats.Read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		d := after.Sub(before)
		check(t, d, 50)
		if d.ReadsProcessed < 50 {
			t.Errorf("%d reads processed for 50 round trips", d.ReadsProcessed)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3).Client()
		keys := []string{"{a}k", "{b}k", "{c}k", "{d}k", "{e}k", "{f}k"} // over several masters
		for _, k := range keys {                                         // the connections and the script's loads, before
			if err := script.Run(ctx, c, []string{k}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := redisstats.ResetCluster(ctx, c); err != nil {
			t.Fatal(err)
		}
		before, err := redisstats.ReadCluster(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if before.Nodes != 3 {
			t.Fatalf("%d masters read, want 3", before.Nodes)
		}
		for i := range 60 {
			if err := script.Run(ctx, c, []string{keys[i%len(keys)]}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		after, err := redisstats.ReadCluster(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		check(t, after.Sub(before), 60)
	})
}

// topology is the calls of CLUSTER subcommands in d.
func topology(d redisstats.Reading) int64 {
	var n int64
	for name, c := range d.Commands {
		if strings.HasPrefix(name, "cluster|") {
			n += c.Calls
		}
	}
	return n
}
