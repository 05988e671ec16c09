package loadbench

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redisstats"
)

// Hot-key variants: how the hot tenant's and the global limit's buckets
// are kept in the cluster.
const (
	HotPlain       = "plain"        // one bucket each, one key
	HotShards      = "shards"       // shards: HotShardCount sub-keys each
	HotLease       = "lease"        // lease: a block per node, spent from memory
	HotShardsLease = "shards+lease" // both
)

// HotVariants are the variants in the order a hot-key run measures them.
var HotVariants = []string{HotPlain, HotShards, HotLease, HotShardsLease}

// HotShardCount is the shards of a sharded variant's limits.
const HotShardCount = 8

// HotOptions configure RunHot. The zero value of a field is its default.
type HotOptions struct {
	// Variants are a subset of HotVariants. Default all.
	Variants []string
	// Masters is the cluster's size. Default 3.
	Masters int
	// Concurrency is the number of workers, all with the one key of the
	// one tenant. Default 64.
	Concurrency int
	// Requests and Duration bound each run. Default 20,000 and 5 s.
	Requests int
	Duration time.Duration
	// Executable runs the children (see Child). Default os.Executable().
	Executable string
	// Progress, when not nil, gets one line per run.
	Progress io.Writer
}

// HotRow is one variant's run.
type HotRow struct {
	Variant string
	// N are the requests answered 200 (every one is admitted: the limits are
	// set far above the load), Errors the others.
	N, Errors int
	// RPS is N per second of the run.
	RPS float64
	// P50 and P99 are latency quantiles, send to last byte.
	P50, P99 time.Duration
	// Scripts, Commands, RoundTrips and RedisMicros are per request
	// answered, summed over every master, from INFO (package redisstats;
	// read before and after the run, once the node's reconciliations and
	// returned leases have been written): script calls, all commands (those
	// the scripts ran included), client reads (about one per round trip: a
	// pipeline that arrives at once is one), and the µs Redis spent running
	// them.
	Scripts, Commands, RoundTrips, RedisMicros float64
	// Busiest is the largest share (0 to 1) of the commands that one master
	// served.
	Busiest float64
	// Allowed and StoreErrors are llmguard's own count of the run's
	// admitted requests and failed store calls (its /metrics).
	Allowed, StoreErrors float64
}

// HotReport is a hot-key run: a direct baseline and one row per variant.
type HotReport struct {
	Options           HotOptions
	Started           time.Time
	Took              time.Duration
	DirectP50         time.Duration
	DirectP99         time.Duration
	Rows              []HotRow
	LoadBefore, After string
}

// hotConfig is llmguard's config in a hot-key run: one tenant's tokens per
// minute and the global requests per second, set far above the load (every
// request is admitted, so each variant's figures compare the same work),
// with the variant's sharding and leases. store.timeout is 2 s, not the
// default 50 ms: on a loaded 2-core machine some takes would miss 50 ms,
// open the breaker and be admitted by the fail-open fallback without
// Redis, which would flatter the Redis figures (RunHot fails a run where
// any store call failed). %s: the upstream, the cluster's
// seed nodes, then each limit's extra fields twice.
const hotConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: ` + benchKey + `, user: alice, tenant: acme}]
store: {backend: redis_cluster, cluster_addrs: [%s], timeout: 2s}
limits:
  - {name: tenant-tpm, scope: tenant, unit: tokens, rate: 1000000000, per: 1m%s}
  - {name: global-rps, scope: global, unit: requests, rate: 1000000, per: 1s%s}
`

// hotExtra is a variant's extra fields for the tenant (tokens) and the
// global (requests) limit. A lease is about 100 ms of a hot node's load:
// 100 requests, of about 300 tokens each.
func hotExtra(variant string) (tenant, global string) {
	var sh, tl, gl string
	if strings.Contains(variant, "shards") {
		sh = fmt.Sprintf(", shards: %d", HotShardCount)
	}
	if strings.Contains(variant, "lease") {
		tl = ", lease: {size: 30000, ttl: 100ms}"
		gl = ", lease: {size: 100, ttl: 100ms}"
	}
	return sh + tl, sh + gl
}

// RunHot measures one hot tenant and one hot global limit on a Redis
// Cluster: it starts the mock, a cluster of Masters masters, and for each
// variant an llmguard process on the cluster; drives Concurrency workers
// with 1 KiB warm conversations of one key (one user of one tenant); and
// reads every master's INFO commandstats around the run. Errors: bad
// options, a process or the cluster failing to start (errNoRedis without
// redis-server), a Redis call failing.
func RunHot(o HotOptions) (*HotReport, error) {
	if len(o.Variants) == 0 {
		o.Variants = HotVariants
	}
	for _, v := range o.Variants {
		if !slices.Contains(HotVariants, v) {
			return nil, fmt.Errorf("loadbench: unknown hot-key variant %q (want %v)", v, HotVariants)
		}
	}
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	if o.Requests == 0 {
		o.Requests = 20000
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Masters < 1 || o.Concurrency < 1 || o.Concurrency > 256 || o.Requests < 1 || o.Duration <= 0 {
		return nil, fmt.Errorf("loadbench: hot-key options out of range: %+v", o)
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Executable = exe
	}
	rep := &HotReport{Options: o, Started: time.Now(), LoadBefore: loadAverage()}
	mock, err := startChild(o.Executable, RoleMock)
	if err != nil {
		return nil, err
	}
	defer mock.stop()
	cl, err := startCluster(o.Masters, false)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	dir, err := os.MkdirTemp("", "llmguard-bench-hot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	pool := newTextPool(1)
	cell := Cell{Shape: Shape{Size: 1 << 10, Warm: true}, Concurrency: o.Concurrency}
	u, err := url.Parse(mock.URL)
	if err != nil {
		return nil, err
	}
	direct := newClient(u.Host)
	convs := conversations(pool, cell, 1<<30)
	drive(direct, mock.URL, convs, cell, 2*cell.Concurrency, o.Duration)
	l := drive(direct, mock.URL, convs, cell, o.Requests, o.Duration)
	rep.DirectP50, rep.DirectP99 = quantile(l.lat, 0.5), quantile(l.lat, 0.99)

	nodes := make([]*redis.Client, len(cl.nodes))
	for i, n := range cl.nodes {
		nodes[i] = redis.NewClient(&redis.Options{Addr: n.Addr})
		defer nodes[i].Close()
	}
	seeds := `"` + strings.Join(cl.addrs(), `", "`) + `"`
	for vi, v := range o.Variants {
		tenant, global := hotExtra(v)
		file := filepath.Join(dir, v+".yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, hotConfig, mock.URL, seeds, tenant, global), 0o600); err != nil {
			return nil, err
		}
		row, err := runHotVariant(o, v, file, pool, cell, uint64(vi+1)<<32, nodes)
		if err != nil {
			return nil, fmt.Errorf("loadbench: hot-key %s: %w", v, err)
		}
		rep.Rows = append(rep.Rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "hot %-12s %d req, %.0f req/s, p50 %s ms, p99 %s ms, %.3f round trips/req, %.3f scripts/req, %.2f commands/req, %.1f redis µs/req\n",
				v, row.N, row.RPS, ms(row.P50), ms(row.P99), row.RoundTrips, row.Scripts, row.Commands, row.RedisMicros)
		}
	}
	rep.Took = time.Since(rep.Started)
	rep.After = loadAverage()
	return rep, nil
}

// hotLeaseSettle is how long a run waits after its last answer for the
// node's unspent leases to expire and be swept back (a lease lives 100 ms,
// the sweep runs every 20 ms) before it waits for the reconcile queue to
// drain (drained) and reads Redis.
const hotLeaseSettle = 200 * time.Millisecond

func runHotVariant(o HotOptions, variant, config string, pool *textPool, cell Cell, seed uint64, nodes []*redis.Client) (HotRow, error) {
	row := HotRow{Variant: variant}
	p, err := startChild(o.Executable, RoleLLMGuard, "-config", config)
	if err != nil {
		return row, err
	}
	defer p.stop()
	u, err := url.Parse(p.URL)
	if err != nil {
		return row, err
	}
	client := newClient(u.Host)
	convs := conversations(pool, cell, seed)
	if w := drive(client, p.URL, convs, cell, 2*cell.Concurrency, o.Duration); w.errs > 0 {
		return row, fmt.Errorf("warm-up: %s", w.firstErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	readNodes := func() ([]redisstats.Reading, error) {
		rs := make([]redisstats.Reading, len(nodes))
		for i, n := range nodes {
			var err error
			if rs[i], err = redisstats.Read(ctx, n); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	time.Sleep(hotLeaseSettle) // the warm-up's leases back first
	before, err := drained(p.Admin)
	if err != nil {
		return row, err
	}
	r0, err := readNodes()
	if err != nil {
		return row, err
	}
	l := drive(client, p.URL, convs, cell, o.Requests, o.Duration)
	time.Sleep(hotLeaseSettle)
	after, err := drained(p.Admin)
	if err != nil {
		return row, err
	}
	r1, err := readNodes()
	if err != nil {
		return row, err
	}
	row.Allowed, row.StoreErrors = after.allowed-before.allowed, after.storeErrors-before.storeErrors
	var sum redisstats.Reading
	var busiest int64
	for i := range nodes {
		d := r1[i].Sub(r0[i])
		sum = sum.Add(d)
		busiest = max(busiest, d.Calls())
	}
	row.N, row.Errors = l.n, l.errs
	if l.elapsed > 0 {
		row.RPS = float64(l.n) / l.elapsed.Seconds()
	}
	row.P50, row.P99 = quantile(l.lat, 0.5), quantile(l.lat, 0.99)
	per := sum.Per(int64(l.n))
	row.Scripts, row.Commands, row.RoundTrips, row.RedisMicros = per.Scripts, per.Calls, per.Reads, per.Usec
	if c := sum.Calls(); c > 0 {
		row.Busiest = float64(busiest) / float64(c)
	}
	if l.errs > 0 {
		return row, fmt.Errorf("%d of %d requests failed: %s", l.errs, l.n+l.errs, l.firstErr)
	}
	if row.StoreErrors > 0 || int(row.Allowed) != l.n {
		return row, fmt.Errorf("llmguard counted %.0f allowed of %d and %.0f failed store calls: its fallback, not Redis, admitted some", row.Allowed, l.n, row.StoreErrors)
	}
	return row, nil
}

// Markdown writes the hot-key report: how it ran and one table.
func (r *HotReport) Markdown(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "llmguard-bench hot — %s; %s, took %s; load average %s before, %s after.\n",
		machine(), r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Took.Round(time.Second), r.LoadBefore, r.After)
	fmt.Fprintf(w, "Each run: at most %d requests or %s; %d workers, one key (one user of one tenant), 1 KiB warm chat bodies; a %d-master Redis Cluster; 2 limits set far above the load: the tenant's tokens per minute and the global requests per second.\n\n",
		o.Requests, o.Duration, o.Concurrency, o.Masters)
	fmt.Fprintln(w, "| variant | n | req/s | p50 ms | p99 ms | +p50 ms | +p99 ms | Redis round trips / req | script calls / req | commands / req | Redis µs / req | busiest master |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s | %.3f | %.3f | %.2f | %.1f | %.0f%% |\n",
			row.Variant, row.N, row.RPS, ms(row.P50), ms(row.P99), msDiff(row.P50-r.DirectP50), msDiff(row.P99-r.DirectP99),
			row.RoundTrips, row.Scripts, row.Commands, row.RedisMicros, 100*row.Busiest)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "+p50/+p99: minus the mock called directly with the same load (p50 %s ms, p99 %s ms). Redis figures: INFO of every master (package redisstats) before the run and after it, read once llmguard's leases were back (%s after the last answer) and its reconcile queue empty, per request answered: round trips are client reads (a pipeline that arrives at once is one), commands include those the scripts ran, µs are Redis's time running them. Busiest master: its share of the commands.\n",
		ms(r.DirectP50), ms(r.DirectP99), hotLeaseSettle)
	// A proxied run faster than the direct one is not llmguard saving time:
	// the machine's load changed between the runs (trial20: +p50 -13.0 and
	// -21.5 ms at load average 12, the direct p50 29.1 ms). Say so rather
	// than leave a negative overhead unexplained.
	for _, row := range r.Rows {
		if row.P50 < r.DirectP50 || row.P99 < r.DirectP99 {
			fmt.Fprintln(w, "A negative +p50 or +p99: the direct run was slower than a proxied one, so the machine's load changed between the runs (load average above) and the + columns measure that, not llmguard; compare the variants' own columns with each other, or run again on a quieter machine.")
			break
		}
	}
}
