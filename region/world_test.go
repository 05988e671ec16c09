package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// A world is regions, each with its own redis-server, and llmguard nodes in
// them: each node its own policy, a meter taking from its region's Redis,
// and (with the exchange on) an exchange — all on one clock the test
// moves, which the bucket scripts and the exchange's scripts read instead
// of Redis TIME. Nothing sleeps: the test asks, steps nodes and moves the
// clock.
type world struct {
	t       *testing.T
	clock   *storetest.Clock
	opt     worldOptions
	servers map[string]*redistest.Server // by region
	peek    map[string]*redis.Client     // the test's own client of each region's Redis
	nodes   []*node
	// admitted is every unit admitted, tick by tick (see tick), for the
	// windowed bound.
	ticks []tickTally
	ref   reference
	rng   *rand.Rand // the jitter's
}

type worldOptions struct {
	// Regions are the regions with their configured shares.
	Regions map[string]float64
	// NodesPerRegion is how many nodes each region runs.
	NodesPerRegion int
	// Burst and Rate are the limit's capacity and refill per second, in
	// tokens.
	Burst, Rate int64
	// Exchange turns the exchange on, every Every with MaxStep and MinShare.
	Exchange          bool
	Every             time.Duration
	MaxStep, MinShare float64
	// OneRedis gives every region the first region's Redis: the
	// misconfiguration that keys naming the region must survive.
	OneRedis bool
	// Jitter moves each node's steps by up to ± Jitter (in whole ticks),
	// at random, as a loaded machine's tickers do.
	Jitter time.Duration
}

// tickTally is what a tick admitted in each region.
type tickTally struct {
	at       time.Time
	admitted map[string]int64
}

// node is one llmguard process of a region.
type node struct {
	w      *world
	name   string // e.g. "eu-1"
	region string
	pol    *policy.Policy
	meter  *meter.Meter
	x      *Exchange
	links  map[string]*link // this node's clients of every region's Redis
	alice  policy.Principal
	n      int
	next   time.Time // the node's next exchange step, on the world clock
}

// link is a node's client of one region's Redis, which the test can cut
// (a partition: every call fails at once).
type link struct {
	redis.Scripter
	cut atomic.Bool
}

var errCut = errors.New("link cut")

func (l *link) Eval(ctx context.Context, s string, keys []string, args ...any) *redis.Cmd {
	if l.cut.Load() {
		return failedCmd(ctx)
	}
	return l.Scripter.Eval(ctx, s, keys, args...)
}

func (l *link) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if l.cut.Load() {
		return failedCmd(ctx)
	}
	return l.Scripter.EvalSha(ctx, sha, keys, args...)
}

func failedCmd(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(errCut)
	return c
}

const limitName = "org-tpm"

// newWorld starts a redis-server per region and o.NodesPerRegion nodes in
// each, on a clock at noon UTC, 2026-03-10.
func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	w := &world{t: t, clock: storetest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)), opt: o, servers: map[string]*redistest.Server{},
		ref: reference{level: map[string]float64{}, sigma: map[string]int64{}}, rng: rand.New(rand.NewPCG(12, 13))}
	names := w.regions()
	for _, r := range names {
		if o.OneRedis && r != names[0] {
			w.servers[r] = w.servers[names[0]]
			continue
		}
		w.servers[r] = redistest.Start(t)
	}
	w.peek = map[string]*redis.Client{}
	for _, r := range names {
		w.peek[r] = w.client(r)
	}
	w.ticks = []tickTally{{at: w.clock.Now(), admitted: map[string]int64{}}}
	defer w.sampleRecords()
	for _, r := range names {
		for i := range o.NodesPerRegion {
			n := w.newNode(r, fmt.Sprintf("%s-%d", r, i+1))
			// Nodes step at different moments of an interval, as real
			// nodes do: 0, 200, 400 ms… after the start.
			n.next = w.clock.Now().Add(time.Duration(len(w.nodes)) * 200 * time.Millisecond % max(o.Every, time.Millisecond))
			w.nodes = append(w.nodes, n)
		}
	}
	return w
}

// client is a new client of region's Redis that fails fast when it is
// down (no retries, one dial attempt: as the app's), closed with the test.
func (w *world) client(region string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: w.servers[region].Addr(), MaxRetries: -1, DialerRetries: 1})
	w.t.Cleanup(func() { c.Close() })
	return c
}

// regions are the world's regions, sorted.
func (w *world) regions() []string {
	var rs []string
	for r := range w.opt.Regions {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// config is the YAML config of a node of region.
func (w *world) config(region string) string {
	var shares, peers []string
	for _, r := range w.regions() {
		shares = append(shares, fmt.Sprintf("%s: %v", r, w.opt.Regions[r]))
		if r != region {
			peers = append(peers, fmt.Sprintf("%s: \"redis://%s/0\"", r, w.servers[r].Addr()))
		}
	}
	exchange := ""
	if w.opt.Exchange {
		exchange = fmt.Sprintf("region_exchange: {every: %s, max_step: %v, min_share: %v, peers: {%s}}\n",
			w.opt.Every, w.opt.MaxStep, w.opt.MinShare, strings.Join(peers, ", "))
	}
	return fmt.Sprintf(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys: [{key: sk-a, user: alice, tenant: acme}]
models: {gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}}
region: %s
store: {backend: redis, redis_url: "redis://%s/0", timeout: 50ms}
%slimits:
  - {name: %s, scope: global, unit: tokens, rate: %d, per: 1s, burst: %d, regions: {%s}}
`, region, w.servers[region].Addr(), exchange, limitName, w.opt.Rate, w.opt.Burst, strings.Join(shares, ", "))
}

func (w *world) newNode(region, name string) *node {
	t := w.t
	t.Helper()
	c, err := config.Parse([]byte(w.config(region)))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := pol.Identify("sk-a")
	n := &node{w: w, name: name, region: region, pol: pol, alice: alice, links: map[string]*link{}, next: w.clock.Now()}
	clients := map[string]redis.Scripter{}
	for _, r := range w.regions() {
		n.links[r] = &link{Scripter: w.client(r)}
		clients[r] = n.links[r]
	}
	store, err := bucket.NewRedis(bucket.RedisOptions{Client: w.client(region), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if n.meter, err = meter.New(meter.Options{Store: store, Logger: quiet, Now: w.clock.Now}); err != nil {
		t.Fatal(err)
	}
	if w.opt.Exchange {
		n.x, err = New(Options{Region: region, Redis: clients, Every: w.opt.Every, MaxStep: w.opt.MaxStep,
			Policy: func() *policy.Policy { return n.pol }, Now: w.clock.Now, RedisNow: w.clock.Now,
			Timeout: 5 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// rule is the node's split rule.
func (n *node) rule() *policy.Rule { return &n.pol.Rules()[0] }

// share is the share the node holds now, ppm.
func (n *node) share() int64 { return n.rule().Regional.Share(n.w.clock.Now()) }

// ask asks for cost tokens; it reports whether they were admitted, and
// adds them to the world's tally of the current tick.
func (n *node) ask(cost int64) bool {
	n.n++
	x := n.meter.Admit(meter.Request{ID: fmt.Sprintf("%s-%d", n.name, n.n), Principal: n.alice, Policy: n.pol,
		Flavor: spec.FlavorOpenAI, Path: "/v1/chat/completions", Model: "gpt-4o-mini", Weighed: true,
		Estimate: spec.Usage{InputTokens: cost}})
	switch x.Verdict() {
	case meter.Admitted:
		tally := &n.w.ticks[len(n.w.ticks)-1]
		tally.admitted[n.region] += cost
		n.w.refTake(n.region, cost)
		return true
	case meter.Denied, meter.TooLarge:
		return false
	}
	n.w.t.Fatalf("%s: ask %d: verdict %v", n.name, cost, x.Verdict())
	return false
}

// step runs the node's exchange step now; the error is the step's.
func (n *node) step() error { return n.x.Step(context.Background()) }

// cut cuts (or restores) the node's link to region's Redis.
func (n *node) cut(region string, cut bool) { n.links[region].cut.Store(cut) }

// inRegion are the world's nodes of region.
func (w *world) inRegion(region string) []*node {
	var ns []*node
	for _, n := range w.nodes {
		if n.region == region {
			ns = append(ns, n)
		}
	}
	return ns
}

// tick moves the clock by d, opens a new tally, and checks the shares the
// regions hold now: their sum (each region at the most any of its nodes
// holds) never exceeds the configured total.
func (w *world) tick(d time.Duration) {
	w.t.Helper()
	w.clock.Set(w.clock.Now().Add(d))
	w.ticks = append(w.ticks, tickTally{at: w.clock.Now(), admitted: map[string]int64{}})
	w.checkShares()
}

// checkShares fails the test when the regions' held shares (each the most
// any of its nodes holds) sum above the configured total.
func (w *world) checkShares() {
	w.t.Helper()
	var sum, total int64
	held := map[string]int64{}
	for _, r := range w.regions() {
		total += config.SharePPM(w.opt.Regions[r])
		for _, n := range w.inRegion(r) {
			held[r] = max(held[r], n.share())
		}
		sum += held[r]
	}
	if sum > total {
		w.t.Fatalf("%v: the regions hold %v (sum %d ppm), more than the configured total %d",
			w.elapsed(), held, sum, total)
	}
}

// elapsed is the world clock since its start.
func (w *world) elapsed() time.Duration {
	return w.clock.Now().Sub(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
}

// stepDue runs the exchange step of every node whose step is due, in node
// order, and schedules its next one Every later; skip, when set, is asked
// first and may skip a node's step (a node stalled for a while).
func (w *world) stepDue(skip func(n *node) bool) {
	w.t.Helper()
	for _, n := range w.nodes {
		if n.x == nil || w.clock.Now().Before(n.next) {
			continue
		}
		n.next = n.next.Add(w.opt.Every)
		if j := w.opt.Jitter / (100 * time.Millisecond); j > 0 {
			n.next = n.next.Add(time.Duration(w.rng.Int64N(2*int64(j)+1)-int64(j)) * 100 * time.Millisecond)
		}
		if skip != nil && skip(n) {
			continue
		}
		n.step() // failures (a partition, a Redis down) are part of the tests
	}
}

// checkWindows fails the test when, over any window of ticks, the regions
// together admitted more than the whole limit allows: burst + rate ×
// (window length); and, with share (ppm) set for a region, when that
// region alone admitted more than share of it.
func (w *world) checkWindows(region string, share int64) {
	w.t.Helper()
	// admitted[a..b] ≤ burst + rate × (t_b − t_a), for every a ≤ b, in
	// units × 1000 and milliseconds: with P the running sum,
	// (P_b − rate·t_b) − min over a ≤ b of (P_{a−1} − rate·t_a) ≤ burst.
	burst, rate := w.opt.Burst*1000, w.opt.Rate // ×1000 units; units per second = ×1000 units per ms
	if region != "" {
		burst, rate = burst*share/PPMTest, rate*share/PPMTest
	}
	var p, worst int64
	least := int64(1) << 62
	for i, tk := range w.ticks {
		ms := tk.at.Sub(w.ticks[0].at).Milliseconds()
		least = min(least, p-rate*ms)
		for r, u := range tk.admitted {
			if region == "" || r == region {
				p += u * 1000
			}
		}
		if over := p - rate*ms - least - burst; over > worst {
			worst = over
			w.t.Errorf("tick %d (%v): %s admitted %.3f units over burst + rate × window", i, tk.at.Sub(w.ticks[0].at),
				cmpOr(region, "the regions together"), float64(over)/1000)
		}
	}
}

// PPMTest is policy.PPM for the tests' arithmetic.
const PPMTest = policy.PPM

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// admitted is what region admitted over the whole run (every region: "").
func (w *world) admitted(region string) int64 {
	var s int64
	for _, tk := range w.ticks {
		for r, u := range tk.admitted {
			if region == "" || r == region {
				s += u
			}
		}
	}
	return s
}

// plan is the limit's plan in the coordinating region's Redis.
func (w *world) plan() (plan, bool) {
	w.t.Helper()
	r := w.nodes[0].rule()
	v, err := w.peek[r.Regional.Regions[0]].Get(context.Background(), planKey(r)).Result()
	if errors.Is(err, redis.Nil) {
		return plan{}, false
	}
	if err != nil {
		w.t.Fatal(err)
	}
	p, ok := parsePlan(v, len(r.Regional.Regions), r.Regional.Total())
	if !ok {
		w.t.Fatalf("plan %q does not parse", v)
	}
	return p, true
}

// record is region's share record, nil when it has none.
func (w *world) record(region string) *record {
	w.t.Helper()
	rec, err := w.readRecord(region)
	if err != nil {
		w.t.Fatal(err)
	}
	return rec
}

// readRecord is record, with the error of a Redis that does not answer.
func (w *world) readRecord(region string) (*record, error) {
	w.t.Helper()
	r := w.nodes[0].rule()
	v, err := w.peek[region].Get(context.Background(), shareKey(r, region)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec, ok := parseRecord(v)
	if !ok {
		w.t.Fatalf("record %q does not parse", v)
	}
	return &rec, nil
}

// ppm formats a share for messages.
func ppm(v int64) string { return strconv.FormatFloat(float64(v)/PPMTest, 'f', -1, 64) }

// run moves the world through d in ticks of 100 ms: at each tick the
// nodes whose exchange step is due step (skip may hold one back), then
// load asks on behalf of each node (nil: no load), then each (if set)
// looks at the world.
func (w *world) run(d time.Duration, load func(n *node), skip func(n *node) bool, each func()) {
	w.t.Helper()
	for range d / (100 * time.Millisecond) {
		w.tick(100 * time.Millisecond)
		w.stepDue(skip)
		w.sampleRecords()
		if load != nil {
			for _, n := range w.nodes {
				load(n)
			}
		}
		if each != nil {
			each()
		}
	}
}

// held is the most any node of region holds now, ppm.
func (w *world) held(region string) int64 {
	var h int64
	for _, n := range w.inRegion(region) {
		h = max(h, n.share())
	}
	return h
}

// The reference: for each region, the bucket the package documentation
// compares a region's bucket with — capacity and refill rate scaled by
// σ_r(τ), the least share the region's record held over [τ − 3E, τ − 2E]
// (W = 3E, V = 2E, no take in flight here). The σ of all regions sum to
// at most the configured total at every instant (lemma 1), and the claim
// is that a region never admits a request its σ bucket could not pay.
// The record is sampled after every tick's steps: it changes only then,
// so σ is exact, constant between ticks. Without the exchange σ is the
// configured share.
type reference struct {
	samples []recordSample
	level   map[string]float64 // σ bucket levels, units
	sigma   map[string]int64   // σ at the last tick, ppm
	at      time.Time
	failed  bool
}

type recordSample struct {
	at    time.Time
	share map[string]int64 // the record's current share, ppm; a missing record: the floor
}

// sigmaAt is σ_region(at), ppm.
func (w *world) sigmaAt(region string, at time.Time) int64 {
	g := w.nodes[0].rule().Regional
	floor := int64(0)
	for i, r := range g.Regions {
		if r == region {
			floor = g.Floors[i]
			if !w.opt.Exchange {
				return g.Shares[i]
			}
		}
	}
	from, to := at.Add(-GrowIntervals*w.opt.Every), at.Add(-ValidIntervals*w.opt.Every)
	least := int64(PPMTest)
	inForce := floor // the value at from: the last sample at or before it, the floor before any
	for _, s := range w.ref.samples {
		switch {
		case !s.at.After(from):
			inForce = s.share[region]
		case !s.at.After(to):
			least = min(least, s.share[region])
		}
	}
	return min(least, inForce)
}

// sampleRecords reads every region's record into the reference, then
// brings its σ buckets to now: refilled over the last tick at the σ of its
// start, clamped to the σ of now.
func (w *world) sampleRecords() {
	w.t.Helper()
	now := w.clock.Now()
	if w.opt.Exchange {
		s := recordSample{at: now, share: map[string]int64{}}
		g := w.nodes[0].rule().Regional
		for i, r := range g.Regions {
			s.share[r] = g.Floors[i]
			rec, err := w.readRecord(r)
			switch {
			case err != nil && len(w.ref.samples) > 0: // a Redis down: its record is as it was
				s.share[r] = w.ref.samples[len(w.ref.samples)-1].share[r]
			case rec != nil:
				s.share[r] = rec.Current()
			}
		}
		w.ref.samples = append(w.ref.samples, s)
	}
	for _, r := range w.regions() {
		sigma := w.sigmaAt(r, now)
		if w.ref.at.IsZero() {
			w.ref.level[r] = float64(w.opt.Burst) * float64(sigma) / PPMTest
		} else {
			prev := w.ref.sigma[r]
			w.ref.level[r] += float64(w.opt.Rate) * float64(prev) / PPMTest * now.Sub(w.ref.at).Seconds()
			w.ref.level[r] = min(w.ref.level[r], float64(w.opt.Burst)*float64(min(prev, sigma))/PPMTest)
		}
		w.ref.sigma[r] = sigma
	}
	w.ref.at = now
}

// refTake pays cost from region's σ bucket, failing the test (once) when
// it cannot: the region admitted what its σ bucket could not pay.
func (w *world) refTake(region string, cost int64) {
	w.t.Helper()
	if w.ref.level[region] < float64(cost)-1e-6 && !w.ref.failed {
		w.ref.failed = true
		w.t.Errorf("%v: %s admitted %d, but its σ bucket (share %s) held %.3f", w.elapsed(), region, cost,
			ppm(w.ref.sigma[region]), w.ref.level[region])
	}
	w.ref.level[region] -= float64(cost)
}
