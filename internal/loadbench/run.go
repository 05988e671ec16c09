package loadbench

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// Targets the load is sent to.
const (
	TargetDirect = "direct" // the mock upstream itself
	TargetBare   = "bare"   // the bare fasthttp reverse proxy
	TargetMemory = "memory" // llmguard with the in-memory store
	TargetRedis  = "redis"  // llmguard with a Redis store (a redis-server it starts)
	// TargetMemoryB is llmguard on the in-memory store run from another
	// build (Options.Compare), for A/B comparisons within one run.
	TargetMemoryB = "memory-b"
)

// AllTargets are the targets in the order each cell runs them.
var AllTargets = []string{TargetDirect, TargetBare, TargetMemory, TargetRedis}

// Options select the matrix and bound each run. The zero value of a field
// is its default, named in its doc.
type Options struct {
	// Sizes are the body sizes in bytes (see Shape.Size). Default 1 KiB,
	// 16 KiB, 128 KiB.
	Sizes []int
	// Concurrency are the worker counts. Default 1 and 32.
	Concurrency []int
	// Streams are the stream settings. Default false (JSON) and true (SSE).
	Streams []bool
	// Warm are the modes: false is cold, true warm (see Shape.Warm).
	// Default both.
	Warm []bool
	// Targets are a subset of AllTargets, run in AllTargets' order. Default
	// all four.
	Targets []string
	// Requests caps the requests of one run (one cell, one target).
	// Default 5000.
	Requests int
	// Duration caps the time of one run. Default 3 s.
	Duration time.Duration
	// Executable is the program run as "Executable child ROLE …" for the
	// measured processes (see Child). Default os.Executable().
	Executable string
	// TokenizeMock has the mock count chat input with the weigher, as the
	// real API would; by default it reports len(body)/4 tokens and spends
	// almost no CPU, so that it competes less with the proxy it stands
	// behind.
	TokenizeMock bool
	// ProfileDir, when not empty, is where each proxy process writes a CPU
	// profile of its whole life: bare.pprof, memory.pprof, redis.pprof.
	ProfileDir string
	// Progress, when not nil, gets one line per run as it ends.
	Progress io.Writer
	// Compare, when not empty, is another build of llmguard-bench whose
	// llmguard child (memory store) runs as the target memory-b, measured
	// right after memory in each cell (before it in every other round).
	Compare string
	// Rounds is how many times the matrix runs, in one report (rows
	// repeat). Default 1.
	Rounds int
	// StoreTimeout, when positive, is the Redis target's store.timeout;
	// 0 keeps llmguard's default (50 ms), which the table measures. Tests
	// set it long: on a loaded machine a take can miss 50 ms, and the
	// fallback then serves it, which the run reports as a store error.
	StoreTimeout time.Duration
}

func (o *Options) defaults() error {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1 << 10, 16 << 10, 128 << 10}
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 32}
	}
	if len(o.Streams) == 0 {
		o.Streams = []bool{false, true}
	}
	if len(o.Warm) == 0 {
		o.Warm = []bool{false, true}
	}
	if len(o.Targets) == 0 {
		o.Targets = AllTargets
	}
	if o.Compare != "" && !slices.Contains(o.Targets, TargetMemoryB) {
		o.Targets = append(slices.Clone(o.Targets), TargetMemoryB)
	}
	for _, t := range o.Targets {
		if t == TargetMemoryB && o.Compare != "" {
			continue
		}
		if !slices.Contains(AllTargets, t) {
			return fmt.Errorf("loadbench: unknown target %q (want %v)", t, AllTargets)
		}
	}
	o.Targets = slices.DeleteFunc(slices.Insert(slices.Clone(AllTargets), 3, TargetMemoryB), func(t string) bool { return !slices.Contains(o.Targets, t) })
	for _, s := range o.Sizes {
		if s < 256 {
			return fmt.Errorf("loadbench: body size %d bytes is below 256", s)
		}
	}
	for _, c := range o.Concurrency {
		if c < 1 || c > 256 {
			return fmt.Errorf("loadbench: concurrency %d is outside 1–256", c)
		}
	}
	if o.Requests == 0 {
		o.Requests = 5000
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
	if o.Requests < 1 || o.Duration < 0 {
		return errors.New("loadbench: requests and duration must be positive")
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

// Row is one run: a cell sent to a target. CPU figures are per request
// answered or failed, in microseconds; -1 where not measured.
type Row struct {
	Target string
	Cell   Cell
	// N is the requests answered as expected, Errors the others; FirstError
	// describes the first of them.
	N, Errors  int
	FirstError string
	// RPS is N over the run's elapsed time, in requests per second.
	RPS float64
	// P50, P99, P999 are latency quantiles (nearest rank) from sending a
	// request to the last byte of its answer.
	P50, P99, P999 time.Duration
	// MeanBody is the mean request body size, in bytes.
	MeanBody int
	// ProxyCPU is the CPU time of the target's proxy process (bare or
	// llmguard) per request, from its own getrusage.
	ProxyCPU float64
	// ProxySys is the part of ProxyCPU spent in the kernel (system time),
	// from /proc/PID/stat: 10 ms ticks over the whole run, so ±10 ms over
	// the run's requests; -1 without /proc or a proxy process.
	ProxySys float64
	// StoreCPU is redis-server's, from /proc/PID/stat (10 ms resolution).
	StoreCPU float64
	// ClientCPU and MockCPU are the load generator's and the mock's.
	ClientCPU, MockCPU float64
	// Allowed is the increase of llmguard's requests_total{outcome="allowed"}
	// over the run (it should equal N+Errors), StoreErrors of
	// llmguard_store_errors_total; -1 for other targets.
	Allowed, StoreErrors float64
	// StoreErrorsBy breaks StoreErrors down by "op/kind" (take/timeout,
	// reconcile/connection…); nil when there were none.
	StoreErrorsBy map[string]float64
	// CacheHit is the share (0 to 1) of the weigher's count-cache lookups
	// over the run that hit; -1 for other targets or without lookups.
	CacheHit float64
}

// Report is a whole benchmark's rows, in run order, and how it ran.
type Report struct {
	Rows    []Row
	Options Options
	Started time.Time
	Took    time.Duration
	// LoadBefore and LoadAfter are the machine's 1-minute load average
	// when the benchmark started and ended ("" where unknown): anything
	// else running shows there.
	LoadBefore, LoadAfter string
}

// target is one thing the load is sent to, and the processes it runs.
type target struct {
	name   string
	url    string
	client *fasthttp.HostClient
	proc   *child       // nil for direct
	redis  *redisServer // the store of the redis target
}

// Run starts the mock, the selected targets and, for the redis target, a
// redis-server, each a process of its own on 127.0.0.1, runs every cell of
// the matrix against every target (each cell's targets back to back), and
// stops them all. Errors: bad options, a process that does not start
// (errNoRedis when the redis target is selected and redis-server is
// missing), a CPU reading that fails.
func Run(o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Options: o, Started: time.Now(), LoadBefore: loadAverage()}
	mockArgs := []string{}
	if o.TokenizeMock {
		mockArgs = append(mockArgs, "-tokenize")
	}
	mock, err := startChild(o.Executable, RoleMock, mockArgs...)
	if err != nil {
		return nil, err
	}
	defer mock.stop()
	var targets []*target
	defer func() {
		for _, t := range targets {
			if t.proc != nil {
				t.proc.stop()
			}
			if t.redis != nil {
				t.redis.stop()
			}
		}
	}()
	for _, name := range o.Targets {
		t := &target{name: name}
		targets = append(targets, t)
		args := []string{"-upstream", mock.URL}
		if o.ProfileDir != "" {
			args = append(args, "-cpuprofile", filepath.Join(o.ProfileDir, name+".pprof"))
		}
		switch name {
		case TargetDirect:
			t.url = mock.URL
		case TargetBare:
			t.proc, err = startChild(o.Executable, RoleBare, args...)
		case TargetMemory:
			t.proc, err = startChild(o.Executable, RoleLLMGuard, args...)
		case TargetMemoryB:
			t.proc, err = startChild(o.Compare, RoleLLMGuard, args...)
		case TargetRedis:
			if t.redis, err = startRedis(redisOptions{}); err == nil {
				redisArgs := append(args, "-redis", t.redis.Addr)
				if o.StoreTimeout > 0 {
					redisArgs = append(redisArgs, "-store-timeout", o.StoreTimeout.String())
				}
				t.proc, err = startChild(o.Executable, RoleLLMGuard, redisArgs...)
			}
		}
		if err != nil {
			return nil, err
		}
		if t.proc != nil {
			t.url = t.proc.URL
		}
		u, err := url.Parse(t.url)
		if err != nil {
			return nil, err
		}
		t.client = newClient(u.Host)
	}
	pool := newTextPool(1)
	// A first small load per target: connections, tokenizer tables, the
	// Lua scripts loaded.
	for _, t := range targets {
		check := Cell{Shape: Shape{Size: 4 << 10}, Concurrency: 4}
		if l := drive(t.client, t.url, conversations(pool, check, 1<<40), check, 40, 30*time.Second); l.errs > 0 {
			return nil, fmt.Errorf("loadbench: %s does not answer as expected: %s", t.name, l.firstErr)
		}
	}
	cells := o.cells()
	for round := range max(o.Rounds, 1) {
		for ci, cell := range cells {
			order := targets
			if round%2 == 1 { // A/B, then B/A: memory and memory-b swap places
				order = slices.Clone(targets)
				i, j := slices.IndexFunc(order, func(t *target) bool { return t.name == TargetMemory }),
					slices.IndexFunc(order, func(t *target) bool { return t.name == TargetMemoryB })
				if i >= 0 && j >= 0 {
					order[i], order[j] = order[j], order[i]
				}
			}
			if err := o.measureCell(rep, order, mock, pool, cell, uint64(round*len(cells)+ci+1)<<20); err != nil {
				return nil, err
			}
		}
	}
	rep.Took = time.Since(rep.Started)
	rep.LoadAfter = loadAverage()
	return rep, nil
}

// measureCell runs cell against each target in turn, adding the rows to
// rep.
func (o *Options) measureCell(rep *Report, targets []*target, mock *child, pool *textPool, cell Cell, seed uint64) error {
	for _, t := range targets {
		row, err := measure(t, mock, pool, cell, seed, *o)
		if err != nil {
			return err
		}
		rep.Rows = append(rep.Rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%-6s %s: %d req, %.0f req/s, p50 %s ms, p99 %s ms, cpu %s µs/req\n",
				t.name, cell, row.N, row.RPS, ms(row.P50), ms(row.P99), micros(row.ProxyCPU))
		}
	}
	return nil
}

// cells is the matrix in the order it runs: size, then mode, stream and
// concurrency.
func (o *Options) cells() []Cell {
	var cs []Cell
	for _, size := range o.Sizes {
		for _, warm := range o.Warm {
			for _, stream := range o.Streams {
				for _, c := range o.Concurrency {
					cs = append(cs, Cell{Shape: Shape{Size: size, Stream: stream, Warm: warm}, Concurrency: c})
				}
			}
		}
	}
	return cs
}

// measure runs one cell against one target: a short unmeasured warm-up
// (two requests per worker), then the measured run between two readings of
// every process's CPU time. The run continues the warm-up's conversations,
// so a warm run measures conversations already under way: the first body
// of each, all new text, is a cold request, which the cold cells measure.
func measure(t *target, mock *child, pool *textPool, cell Cell, seed uint64, o Options) (Row, error) {
	convs := conversations(pool, cell, seed)
	drive(t.client, t.url, convs, cell, 2*cell.Concurrency, o.Duration)
	row := Row{Target: t.name, Cell: cell, ProxyCPU: -1, ProxySys: -1, StoreCPU: -1, Allowed: -1, StoreErrors: -1, CacheHit: -1}
	var before, after cpuReading
	var mBefore, mAfter llmguardCounters
	var err error
	if t.proc != nil && t.proc.Admin != "" {
		if mBefore, err = scrape(t.proc.Admin); err != nil {
			return row, err
		}
	}
	if before, err = readCPU(t, mock); err != nil {
		return row, err
	}
	l := drive(t.client, t.url, convs, cell, o.Requests, o.Duration)
	if after, err = readCPU(t, mock); err != nil {
		return row, err
	}
	if t.proc != nil && t.proc.Admin != "" {
		if mAfter, err = scrape(t.proc.Admin); err != nil {
			return row, err
		}
		row.Allowed = mAfter.allowed - mBefore.allowed
		row.StoreErrors = mAfter.storeErrors - mBefore.storeErrors
		hits, misses := mAfter.cacheHits-mBefore.cacheHits, mAfter.cacheMisses-mBefore.cacheMisses
		if hits+misses > 0 {
			row.CacheHit = hits / (hits + misses)
		}
		for k, v := range mAfter.storeErrorsBy {
			if d := v - mBefore.storeErrorsBy[k]; d > 0 {
				if row.StoreErrorsBy == nil {
					row.StoreErrorsBy = map[string]float64{}
				}
				row.StoreErrorsBy[k] = d
			}
		}
	}
	row.N, row.Errors, row.FirstError = l.n, l.errs, l.firstErr
	if l.elapsed > 0 {
		row.RPS = float64(l.n) / l.elapsed.Seconds()
	}
	row.P50, row.P99, row.P999 = quantile(l.lat, 0.5), quantile(l.lat, 0.99), quantile(l.lat, 0.999)
	if l.n > 0 {
		row.MeanBody = int(l.bytes / int64(l.n))
	}
	sent := float64(max(l.n+l.errs, 1))
	per := func(b, a int64) float64 {
		if b < 0 || a < 0 {
			return -1
		}
		return float64(a-b) / sent
	}
	row.ProxyCPU = per(before.proxy, after.proxy)
	row.ProxySys = per(before.proxySys, after.proxySys)
	row.StoreCPU = per(before.store, after.store)
	row.ClientCPU = per(before.client, after.client)
	row.MockCPU = per(before.mock, after.mock)
	return row, nil
}

// cpuReading is each process's CPU time so far, in microseconds, and the
// proxy's system time (proxySys); -1 for a process the target does not run,
// or a figure this system does not give.
type cpuReading struct{ proxy, proxySys, store, client, mock int64 }

func readCPU(t *target, mock *child) (cpuReading, error) {
	r := cpuReading{proxy: -1, proxySys: -1, store: -1}
	var err error
	if t.proc != nil {
		if r.proxy, err = t.proc.cpu(); err != nil {
			return r, err
		}
		if _, r.proxySys, err = procTimes(t.proc.pid()); err != nil {
			r.proxySys = -1 // not on this system: the column shows "—"
		}
	}
	if t.redis != nil {
		if r.store, err = procCPU(t.redis.pid()); err != nil {
			r.store = -1 // not on this system: the column stays empty
		}
	}
	if r.mock, err = mock.cpu(); err != nil {
		return r, err
	}
	if r.client, err = selfCPU(); err != nil {
		return r, err
	}
	return r, nil
}

// String names a cell as the table does: "16K cold json c32".
func (c Cell) String() string {
	mode, kind := "cold", "json"
	if c.Warm {
		mode = "warm"
	}
	if c.Stream {
		kind = "sse"
	}
	return sizeName(c.Size) + " " + mode + " " + kind + " c" + strconv.Itoa(c.Concurrency)
}

// sizeName is 1K, 16K, 128K, or bytes when not a whole KiB.
func sizeName(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + "K"
	}
	return strconv.Itoa(n) + "B"
}

// machine describes where the benchmark ran.
func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d), %s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.Version())
}
