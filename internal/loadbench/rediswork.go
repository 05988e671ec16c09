package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redisstats"
)

// Stores the Redis work per request is measured on.
const (
	StoreRedis   = "redis"   // one redis-server
	StoreCluster = "cluster" // a Redis Cluster of three masters
)

// AllStores are the stores in the order RunRedisWork runs them.
var AllStores = []string{StoreRedis, StoreCluster}

// RedisWorkOptions configures RunRedisWork. The zero value of a field is
// its default, named in its doc.
type RedisWorkOptions struct {
	// Stores are a subset of AllStores. Default both.
	Stores []string
	// Concurrency are the worker counts. Default 1 and 32.
	Concurrency []int
	// Requests caps the requests of one run. Default 4000.
	Requests int
	// Duration caps the time of one run. Default 5 s.
	Duration time.Duration
	// Rounds is how many times each store, concurrency and build is run,
	// the builds alternating (A B, then B A…). Default 3.
	Rounds int
	// Executable is the program run as "Executable child llmguard …": build
	// A. Default os.Executable().
	Executable string
	// Compare, when not empty, is another build of llmguard-bench whose
	// llmguard child is run as build B, against the same Redis, alternating
	// with A: an A/B measured in one run. It must know the child flags
	// -redis and -redis-cluster.
	Compare string
	// Callgrind runs every redis-server under valgrind's callgrind and
	// reports the instructions Redis executed per admitted request: a
	// figure that does not depend on the machine's load, for A/B runs on
	// a shared machine. Redis runs some 50 times slower: use fewer
	// requests. A lone Redis then runs at hz 1 (its cron's work is not a
	// request's); a cluster's masters keep Redis's default hz 10.
	Callgrind bool
	// PaceFloors sends each floor's calls (BuildPing, BuildFcall,
	// BuildFcallCommands) at the rate build A's requests were admitted in
	// the same round, store and concurrency, instead of back to back: the
	// floor of a node that sees that many requests a second. A Redis
	// waiting between calls pays more per call (its wake-ups, and caches
	// other processes used meanwhile), so at concurrency 1 the paced floor
	// is the one to set against build A. Default false (back to back, as
	// the floors of earlier reports were measured).
	PaceFloors bool
	// Progress, when not nil, gets one line per run as it ends.
	Progress io.Writer
}

func (o *RedisWorkOptions) defaults() error {
	if len(o.Stores) == 0 {
		o.Stores = AllStores
	}
	for _, s := range o.Stores {
		if !slices.Contains(AllStores, s) {
			return fmt.Errorf("loadbench: unknown store %q (want %v)", s, AllStores)
		}
	}
	o.Stores = slices.DeleteFunc(slices.Clone(AllStores), func(s string) bool { return !slices.Contains(o.Stores, s) })
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 32}
	}
	for _, c := range o.Concurrency {
		if c < 1 || c > 256 {
			return fmt.Errorf("loadbench: concurrency %d is outside 1–256", c)
		}
	}
	if o.Requests == 0 {
		o.Requests = 4000
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Requests < 1 || o.Duration < 0 || o.Rounds < 1 {
		return errors.New("loadbench: requests, duration and rounds must be positive")
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("loadbench: %w", err)
		}
		o.Executable = exe
	}
	return nil
}

// RedisWorkRow is one run: requests sent to llmguard on one store, at one
// concurrency, by one build, and what Redis did meanwhile.
type RedisWorkRow struct {
	Store       string
	Build       string // "A" (Executable), "B" (Compare) or BuildPing (the floor)
	Concurrency int
	Round       int // from 1
	// N is the requests answered as expected, Errors the others;
	// FirstError describes the first of them.
	N, Errors  int
	FirstError string
	RPS        float64
	// Admitted is the increase of llmguard's
	// requests_total{outcome="allowed"} over the run.
	Admitted int64
	// Redis is what the Redis servers did over the run, the
	// reconciliations of its requests included (the run ends once
	// llmguard's reconcile queue is empty), summed over the cluster's
	// masters.
	Redis redisstats.Reading
	// Per is Redis divided by Admitted.
	Per redisstats.PerRequest
	// Instructions is the instructions the Redis servers executed over the
	// run per admitted request, counted by callgrind; -1 without
	// RedisWorkOptions.Callgrind.
	Instructions float64
}

// RedisWorkReport is a whole RunRedisWork's rows, in run order.
type RedisWorkReport struct {
	Rows                  []RedisWorkRow
	Options               RedisWorkOptions
	Started               time.Time
	Took                  time.Duration
	LoadBefore, LoadAfter string
}

// redisWorkTarget is one llmguard process on one store.
type redisWorkTarget struct {
	store, build string
	t            *target
	nodes        []redisstats.Node
	servers      []*redisServer
}

// RunRedisWork measures the Redis work per admitted request: it starts the
// mock upstream, a redis-server and a Redis Cluster of three masters (those
// selected), and llmguard on each (the three rules of llmguardConfig), one
// process per build; then, for each round, store and concurrency, it sends
// each build the same bounded load of 1 KiB chat bodies, waits until
// llmguard's reconcile queue is empty, and reads what Redis did from INFO
// (package redisstats): commands, scripts, reads and µs per admitted
// request; after the builds, the floors (measureFloor: one PING per
// request from as many clients, rows of build BuildPing; on one Redis also
// BuildFcall and BuildFcallCommands, a lone take's call with nothing, then
// only its commands, in it). Errors: bad options, a process that does not start (errNoRedis
// when redis-server is missing), a reading that fails, a queue that does
// not drain within 30 s.
func RunRedisWork(o RedisWorkOptions) (*RedisWorkReport, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	rep := &RedisWorkReport{Options: o, Started: time.Now(), LoadBefore: loadAverage()}
	mock, err := startChild(o.Executable, RoleMock)
	if err != nil {
		return nil, err
	}
	defer mock.stop()
	builds := []string{"A"}
	exes := map[string]string{"A": o.Executable}
	if o.Compare != "" {
		builds = append(builds, "B")
		exes["B"] = o.Compare
	}
	var targets []*redisWorkTarget
	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	for _, store := range o.Stores {
		var flag, addr string
		var nodes []redisstats.Node
		var servers []*redisServer
		switch store {
		case StoreRedis:
			s, err := startRedis(redisOptions{callgrind: o.Callgrind})
			if err != nil {
				return nil, err
			}
			stops = append(stops, s.stop)
			flag, addr, servers = "-redis", s.Addr, []*redisServer{s}
		case StoreCluster:
			c, err := startCluster(3, o.Callgrind)
			if err != nil {
				return nil, err
			}
			stops = append(stops, c.stop)
			flag, addr, servers = "-redis-cluster", strings.Join(c.addrs(), ","), c.nodes
		}
		for _, s := range servers {
			nodes = append(nodes, nodeClient(s.Addr, &stops))
		}
		for _, b := range builds {
			// A deadline far above any take's time, even on a loaded
			// machine (under callgrind, Redis runs some 50 times slower): a
			// take that times out would be admitted by the fallback,
			// without Redis, and its void would add work.
			timeout := "2s"
			if o.Callgrind {
				timeout = "10s" // at most store.void_window
			}
			p, err := startChild(exes[b], RoleLLMGuard, "-upstream", mock.URL, flag, addr, "-store-timeout", timeout)
			if err != nil {
				return nil, err
			}
			stops = append(stops, p.stop)
			u, err := url.Parse(p.URL)
			if err != nil {
				return nil, err
			}
			targets = append(targets, &redisWorkTarget{store: store, build: b, nodes: nodes, servers: servers,
				t: &target{name: store + "/" + b, url: p.URL, client: newClient(u.Host), proc: p}})
		}
	}
	pool := newTextPool(1)
	for _, rt := range targets { // connections, tokenizer tables, scripts loaded
		check := Cell{Shape: Shape{Size: 4 << 10}, Concurrency: 4}
		if l := drive(rt.t.client, rt.t.url, conversations(pool, check, 1<<40), check, 40, 30*time.Second); l.errs > 0 {
			return nil, fmt.Errorf("loadbench: %s does not answer as expected: %s", rt.t.name, l.firstErr)
		}
	}
	seed := uint64(1) << 20
	for round := 1; round <= o.Rounds; round++ {
		for _, store := range o.Stores {
			for _, c := range o.Concurrency {
				order := slices.Clone(builds)
				if round%2 == 0 {
					slices.Reverse(order)
				}
				for _, b := range order {
					i := slices.IndexFunc(targets, func(rt *redisWorkTarget) bool { return rt.store == store && rt.build == b })
					seed += 1 << 20
					row, err := measureRedisWork(targets[i], pool, c, seed, o)
					if err != nil {
						return nil, err
					}
					row.Round = round
					rep.Rows = append(rep.Rows, row)
					progress(o.Progress, row)
				}
				// The floors, on the same servers at the same concurrency.
				i := slices.IndexFunc(targets, func(rt *redisWorkTarget) bool { return rt.store == store })
				rate := 0.0
				if o.PaceFloors {
					a := slices.IndexFunc(rep.Rows, func(r RedisWorkRow) bool {
						return r.Round == round && r.Store == store && r.Concurrency == c && r.Build == "A"
					})
					rate = rep.Rows[a].RPS * float64(rep.Rows[a].Admitted) / float64(max(rep.Rows[a].N, 1))
				}
				for _, p := range floorProbes {
					if store == StoreCluster && !p.cluster {
						continue
					}
					row, err := measureFloor(targets[i], c, o, p, rate)
					if err != nil {
						return nil, err
					}
					row.Round = round
					rep.Rows = append(rep.Rows, row)
					progress(o.Progress, row)
				}
			}
		}
	}
	rep.Took = time.Since(rep.Started)
	rep.LoadAfter = loadAverage()
	return rep, nil
}

// progress writes one line for row to w, if w is not nil.
func progress(w io.Writer, row RedisWorkRow) {
	if w == nil {
		return
	}
	what := "request"
	if row.Build != "A" && row.Build != "B" {
		what = row.Build
	}
	fmt.Fprintf(w, "%-7s c%-3d %s round %d: %d admitted, %.0f req/s, %.1f commands, %.2f scripts, %.2f reads, %.1f µs, cpu %.1f µs (user %.1f)",
		row.Store, row.Concurrency, row.Build, row.Round, row.Admitted, row.RPS, row.Per.Calls, row.Per.Scripts, row.Per.Reads, row.Per.Usec, row.Per.CPU, row.Per.UserCPU)
	if row.Instructions >= 0 {
		fmt.Fprintf(w, ", %.0f instructions", row.Instructions)
	}
	fmt.Fprintf(w, " per %s\n", what)
}

// nodeClient is a client of one Redis server for its INFO, closed by the
// stops.
func nodeClient(addr string, stops *[]func()) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	*stops = append(*stops, func() { c.Close() })
	return c
}

// measureRedisWork runs one load of c workers against rt: a short warm-up
// (two requests per worker), then the measured run between two readings of
// Redis, each taken once llmguard's reconcile queue is empty.
func measureRedisWork(rt *redisWorkTarget, pool *textPool, c int, seed uint64, o RedisWorkOptions) (RedisWorkRow, error) {
	cell := Cell{Shape: Shape{Size: 1 << 10}, Concurrency: c}
	convs := conversations(pool, cell, seed)
	drive(rt.t.client, rt.t.url, convs, cell, 2*c, o.Duration)
	row := RedisWorkRow{Store: rt.store, Build: rt.build, Concurrency: c, Instructions: -1}
	ctx := context.Background()
	m0, err := drained(rt.t.proc.Admin)
	if err != nil {
		return row, err
	}
	if o.Callgrind {
		if err := zeroAll(rt.servers); err != nil {
			return row, err
		}
	}
	r0, err := redisstats.Read(ctx, rt.nodes...)
	if err != nil {
		return row, err
	}
	l := drive(rt.t.client, rt.t.url, convs, cell, o.Requests, o.Duration)
	m1, err := drained(rt.t.proc.Admin)
	if err != nil {
		return row, err
	}
	r1, err := redisstats.Read(ctx, rt.nodes...)
	if err != nil {
		return row, err
	}
	if o.Callgrind {
		n, err := instructionsOf(rt.servers)
		if err != nil {
			return row, err
		}
		row.Instructions = float64(n) / float64(max(m1.allowed-m0.allowed, 1))
	}
	row.N, row.Errors, row.FirstError = l.n, l.errs, l.firstErr
	if l.elapsed > 0 {
		row.RPS = float64(l.n) / l.elapsed.Seconds()
	}
	row.Admitted = int64(m1.allowed - m0.allowed)
	row.Redis = r1.Sub(r0)
	row.Per = row.Redis.Per(row.Admitted)
	return row, nil
}

// drained waits until llmguard's reconcile queue at admin is empty and
// returns its counters then. Errors: scrape's, or a queue still not empty
// after 30 s.
func drained(admin string) (llmguardCounters, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := scrape(admin)
		if err != nil || m.reconcilePending == 0 {
			return m, err
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("loadbench: %.0f reconciliations still queued after 30 s", m.reconcilePending)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Markdown writes the report: how it ran, a table with a row per store,
// concurrency and build (the round with the median Redis µs gives the
// counts; each µs, CPU and instructions column is its own median over the
// rounds, with the range), then the commands each ran per request.
func (r *RedisWorkReport) Markdown(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "llmguard-bench -redis-work — %s; %s, took %s", machine(), r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Took.Round(time.Second))
	if r.LoadBefore != "" {
		fmt.Fprintf(w, "; load average %s before, %s after", r.LoadBefore, r.LoadAfter)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintf(w, "Each run: at most %d requests or %s; 1 KiB chat bodies; one key; 3 rules (user tokens, tenant USD, global requests); store.timeout 2 s, 10 s under callgrind (no take left to the fallback on a loaded machine); %d rounds, builds alternating.\n",
		o.Requests, o.Duration, o.Rounds)
	if o.Compare != "" {
		fmt.Fprintf(w, "Build A: %s; build B: %s.\n", o.Executable, o.Compare)
	}
	fmt.Fprintln(w, "Rows of build PING are the floor, measured in the same round on the same servers: one PING per request from as many clients (each its own connection; a cluster's masters in turn), what a single round trip costs Redis here. \"CPU × PING\" is a row's Redis process CPU per admitted request over that floor's (medians): below 1 no design making one Redis call per request can go.")
	if o.PaceFloors {
		fmt.Fprintln(w, "Floors paced (-pace-floors): each floor's calls were sent at the rate build A's requests were admitted in the same round, store and concurrency, not back to back.")
	}
	fmt.Fprintln(w, "Rows of build FCALL (one Redis only): one FCALL per request, with a lone take's 4 KEYS and 2 ARGV, of a function that only returns a lone take's reply (three levels, packed): a script call's own cost. FCALL+6: the same, its function also running a lone take's six commands (TIME, MGET, four PSETEX) and no arithmetic: the floor of a lone take as Redis stores buckets now.")
	fmt.Fprintln(w, "Per admitted request, from INFO (summed over the cluster's masters), reconciliations included: commands (those scripts ran included), scripts run, reads of client connections (about round trips), µs running commands (the scripts' time, INFO commandstats), and the redis-server process's CPU µs (INFO cpu: network I/O included), of which user time (scripts and commands; not stretched, as commandstats' wall-clock µs are, when a loaded machine pauses the process).")
	if o.Callgrind {
		fmt.Fprintln(w, "Redis instructions: thousands of instructions the redis-servers executed per admitted request, counted by valgrind's callgrind (it does not depend on the machine's load; Redis ran under it, some 50 times slower, so the µs columns are not comparable with a run without it).")
	}
	fmt.Fprintln(w)
	head := []string{"store", "concurrency", "build", "admitted", "req/s", "commands", "scripts", "reads", "Redis µs (commandstats)", "Redis CPU µs (process)", "of which user", "CPU × PING"}
	if o.Callgrind {
		head = append(head, "Redis instructions")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	floor := map[string]float64{} // store and concurrency: the PING rows' median CPU µs
	for _, g := range r.groups() {
		if g[0].Build == BuildPing {
			floor[g[0].Store+" "+strconv.Itoa(g[0].Concurrency)] = medianOf(g, func(r RedisWorkRow) float64 { return r.Per.CPU })
		}
	}
	for _, g := range r.groups() {
		m := g[len(g)/2]
		ratio := "—"
		if f := floor[m.Store+" "+strconv.Itoa(m.Concurrency)]; f > 0 {
			ratio = fmt.Sprintf("%.1f", medianOf(g, func(r RedisWorkRow) float64 { return r.Per.CPU })/f)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %d | %.0f | %.1f | %.2f | %.2f | %s | %s | %s | %s |", m.Store, m.Concurrency, m.Build, m.Admitted, m.RPS,
			m.Per.Calls, m.Per.Scripts, m.Per.Reads, spread(g, func(r RedisWorkRow) float64 { return r.Per.Usec }),
			spread(g, func(r RedisWorkRow) float64 { return r.Per.CPU }), spread(g, func(r RedisWorkRow) float64 { return r.Per.UserCPU }), ratio)
		if o.Callgrind {
			fmt.Fprintf(w, " %s |", spread(g, func(r RedisWorkRow) float64 { return r.Instructions / 1000 }))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands per admitted request, all rounds (calls, µs as commandstats counts them; a script's µs include its commands'):")
	for _, g := range r.groups() {
		var sum redisstats.Reading
		var admitted int64
		for _, row := range g {
			sum = sum.Add(row.Redis)
			admitted += row.Admitted
		}
		per := sum.Per(admitted)
		names := make([]string, 0, len(per.ByCommand))
		for name := range per.ByCommand {
			names = append(names, name)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, name := range names {
			v := per.ByCommand[name]
			parts[i] = fmt.Sprintf("%s %.2f (%.1f µs)", name, v[0], v[1])
		}
		fmt.Fprintf(w, "- %s c%d %s: %s\n", g[0].Store, g[0].Concurrency, g[0].Build, strings.Join(parts, ", "))
	}
	for _, row := range r.Rows {
		if row.Errors > 0 {
			fmt.Fprintf(w, "- %s c%d %s round %d: %d requests failed; first: %s\n", row.Store, row.Concurrency, row.Build, row.Round, row.Errors, row.FirstError)
		}
		if row.Admitted != int64(row.N+row.Errors) {
			fmt.Fprintf(w, "- %s c%d %s round %d: llmguard counted %d allowed requests of %d sent\n", row.Store, row.Concurrency, row.Build, row.Round, row.Admitted, row.N+row.Errors)
		}
	}
}

// groups returns the rows by store, concurrency and build, in run order of
// their first row, each sorted by Redis µs per request.
func (r *RedisWorkReport) groups() [][]RedisWorkRow {
	var keys []string
	by := map[string][]RedisWorkRow{}
	for _, row := range r.Rows {
		k := row.Store + " " + strconv.Itoa(row.Concurrency) + " " + row.Build
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], row)
	}
	slices.Sort(keys) // store, then concurrency as text, then build
	slices.SortStableFunc(keys, func(a, b string) int {
		fa, fb := strings.Fields(a), strings.Fields(b)
		if fa[0] != fb[0] {
			return slices.Index(AllStores, fa[0]) - slices.Index(AllStores, fb[0])
		}
		ca, _ := strconv.Atoi(fa[1])
		cb, _ := strconv.Atoi(fb[1])
		return ca - cb
	})
	out := make([][]RedisWorkRow, len(keys))
	for i, k := range keys {
		g := by[k]
		slices.SortFunc(g, func(a, b RedisWorkRow) int {
			switch {
			case a.Per.Usec < b.Per.Usec:
				return -1
			case a.Per.Usec > b.Per.Usec:
				return 1
			}
			return 0
		})
		out[i] = g
	}
	return out
}

// spread is the median of f over g's rounds (medianOf) with the range
// when there are several: "18.2 (17.9–19.0)". Each column's own median,
// not the figure of the round whose commandstats µs are the median, so
// that "CPU × PING" (a quotient of medians) is the quotient of the CPU
// figures shown.
func spread(g []RedisWorkRow, f func(RedisWorkRow) float64) string {
	if len(g) == 1 {
		return fmt.Sprintf("%.1f", f(g[0]))
	}
	lo, hi := f(g[0]), f(g[0])
	for _, row := range g {
		lo, hi = min(lo, f(row)), max(hi, f(row))
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", medianOf(g, f), lo, hi)
}

// medianOf is median (table.go) of f over rows.
func medianOf(rows []RedisWorkRow, f func(RedisWorkRow) float64) float64 {
	v := make([]float64, len(rows))
	for i, r := range rows {
		v[i] = f(r)
	}
	return median(v)
}
