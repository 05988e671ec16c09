package region

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
)

var (
	//go:embed share_read.lua
	shareReadSource string
	//go:embed share_write.lua
	shareWriteSource string
	//go:embed plan_swap.lua
	planSwapSource string
	//go:embed counter.lua
	counterSource string
)

// Timing of the exchange, in intervals of Options.Every (E). See the
// package documentation for why they are safe.
const (
	// ValidIntervals: a node holds the share it read for 2E (its own
	// clock), then falls to its region's floor until it reads again.
	ValidIntervals = 2
	// GrowIntervals: a share that grows is used once it has held for
	// Fill + 3E (3E ≥ validity + a take in flight, which store.timeout < E
	// bounds).
	GrowIntervals = 3
	// HistoryPerLookback: plans advance at most once per lookback / 16 (and
	// per E), so that a record's history (at most MaxHistory entries)
	// always reaches back a whole lookback.
	HistoryPerLookback = 16
	// MaxHistory is the most entries a share record keeps.
	MaxHistory = 64
)

// recordTTL is how long a plan or share record outlives its last read:
// long enough for any outage to end, short enough that a limit removed
// from the config leaves nothing behind for ever.
const recordTTL = 7 * 24 * time.Hour

// Options configures an Exchange. Region, Redis (with every region the
// exchanged limits name), Every and Policy are required.
type Options struct {
	// Region is this node's region (config region).
	Region string
	// Redis maps every region to a client of its Redis; Redis[Region] is
	// this node's own (the store's). Clients may be *redis.Client or
	// *redis.ClusterClient: every call touches one key.
	Redis map[string]redis.Scripter
	// Every is the exchange interval E (region_exchange.every): demand is
	// recorded, the share read and the plan advanced once per E. It must
	// exceed the longest a take may be in flight (store.timeout).
	Every time.Duration
	// MaxStep is the most a share moves in one plan, a fraction of the
	// limit (region_exchange.max_step). 0: 0.1.
	MaxStep float64
	// Policy returns the policy in force; its exchanged rules
	// (Rule.Regional.Exchanged) are stepped.
	Policy func() *policy.Policy
	// Now is the node's clock: intervals and the validity of a read share.
	// nil: time.Now.
	Now func() time.Time
	// RedisNow, for tests only, replaces Redis TIME in the scripts (as
	// bucket.RedisOptions.Now does for the buckets). nil: Redis TIME.
	RedisNow func() time.Time
	// Timeout bounds each Redis call. 0: Every / 4, at most 1s.
	Timeout time.Duration
	// Logger receives failures at debug level (they are counted in
	// llmguard_region_exchange_errors_total). nil: slog.Default().
	Logger *slog.Logger
	// Registerer receives the exchange's metrics. nil: none.
	Registerer prometheus.Registerer
}

// Exchange runs the region exchange for this node (see the package
// documentation): every Step records demand, advances and replicates the
// plan when it can, and reads this region's share into each exchanged
// rule (policy.Regional.Hold). Safe for concurrent use; Steps run one at a
// time.
type Exchange struct {
	o       Options
	maxStep int64
	mu      sync.Mutex // one Step at a time

	read, write, swap, counter *redis.Script

	errors *prometheus.CounterVec // nil without a Registerer
}

// Steps of a Step, the label of llmguard_region_exchange_errors_total.
const (
	stepDemand   = "demand"   // recording this node's demand
	stepShare    = "share"    // reading this region's share
	stepExchange = "exchange" // reading, advancing or replicating the plan
)

// New builds an Exchange. Errors: a required option is missing, or Redis
// has no client for Region.
func New(o Options) (*Exchange, error) {
	if o.Region == "" || o.Every <= 0 || o.Policy == nil || o.Redis[o.Region] == nil {
		return nil, errors.New("region: Region, Every, Policy and a Redis client for Region are required")
	}
	if o.MaxStep <= 0 {
		o.MaxStep = 0.1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = min(o.Every/4, time.Second)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	x := &Exchange{o: o, maxStep: max(1, config.SharePPM(o.MaxStep)),
		read: redis.NewScript(shareReadSource), write: redis.NewScript(shareWriteSource),
		swap: redis.NewScript(planSwapSource), counter: redis.NewScript(counterSource)}
	if o.Registerer != nil {
		x.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_region_exchange_errors_total",
			Help: "Failed steps of the region exchange: demand (recording it), share (reading this region's), exchange (the plan).",
		}, []string{"step"})
		o.Registerer.MustRegister(shareCollector{x: x,
			share: prometheus.NewDesc("llmguard_region_share",
				"Share of a limit split between regions that this node's region holds now, as a fraction of the limit (read at the scrape: its floor once the last share read has expired).",
				[]string{"limit", "region"}, nil),
			floor: prometheus.NewDesc("llmguard_region_share_floor",
				"Least share of a limit split between regions that this node's region holds under the exchange (min(region_exchange.min_share, its configured share)), as a fraction of the limit: where the share falls when this region's record cannot be read.",
				[]string{"limit", "region"}, nil),
		}, x.errors)
		for _, s := range []string{stepDemand, stepShare, stepExchange} {
			x.errors.WithLabelValues(s)
		}
	}
	return x, nil
}

// shareCollector exports, for each exchanged rule of the policy in force,
// llmguard_region_share{limit,region} (the share this node, of region, holds at the scrape,
// policy.Regional.Share on the exchange's clock: its floor once the last
// read has expired, as the node's takes see it) and
// llmguard_region_share_floor{limit,region} (policy.Regional.Floors), both as
// fractions of the limit. Read at the scrape, a share that stopped being
// read shows its fall to the floor, and a reload's rules show at once.
type shareCollector struct {
	x            *Exchange
	share, floor *prometheus.Desc
}

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.share
	ch <- c.floor
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.x.o.Now()
	for _, r := range exchanged(c.x.o.Policy()) {
		g := r.Regional
		ch <- prometheus.MustNewConstMetric(c.share, prometheus.GaugeValue, float64(g.Share(now))/policy.PPM, r.Name, g.Region)
		ch <- prometheus.MustNewConstMetric(c.floor, prometheus.GaugeValue, float64(g.Floors[g.Self])/policy.PPM, r.Name, g.Region)
	}
}

// timing is the exchange's timing for one limit.
type timing struct {
	validity time.Duration // how long a read share is held
	lookback time.Duration // L = Fill + 3E
	pace     time.Duration // the interval of plans and of demand counters
}

func (x *Exchange) timing(g *policy.Regional) timing {
	e := x.o.Every
	l := time.Duration(min(float64(g.Fill)+float64(GrowIntervals*e), math.MaxInt64/4))
	return timing{validity: ValidIntervals * e, lookback: l, pace: max(e, (l+HistoryPerLookback-1)/HistoryPerLookback)}
}

// interval is the index of the pace interval holding now.
func (t timing) interval(now time.Time) int64 { return now.UnixMicro() / t.pace.Microseconds() }

// Step runs one exchange step for every exchanged rule of the policy in
// force: for each, it records this node's demand and reads this region's
// share (its own Redis only); then, for each, it advances or replicates the
// plan when every region it needs answers (so that peers slow to answer
// never delay the reads that keep the shares valid). The error joins every
// failure (each also counted and logged); a step that fails leaves shares
// safe, and the next one retries.
func (x *Exchange) Step(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	rules := exchanged(x.o.Policy())
	for _, r := range rules {
		errs = append(errs, x.fail(stepDemand, r, x.flush(ctx, r)), x.fail(stepShare, r, x.refresh(ctx, r)))
	}
	for _, r := range rules {
		errs = append(errs, x.fail(stepExchange, r, x.coordinate(ctx, r)))
	}
	return errors.Join(errs...)
}

// exchanged are the rules of pol the exchange moves.
func exchanged(pol *policy.Policy) []*policy.Rule {
	var rules []*policy.Rule
	for i := range pol.Rules() {
		if r := &pol.Rules()[i]; r.Regional != nil && r.Regional.Exchanged {
			rules = append(rules, r)
		}
	}
	return rules
}

// Refresh reads this region's share of every exchanged rule, without
// recording demand or touching the plan: what a node does at start-up
// before it serves. The error joins every failure.
func (x *Exchange) Refresh(ctx context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for _, r := range exchanged(x.o.Policy()) {
		errs = append(errs, x.fail(stepShare, r, x.refresh(ctx, r)))
	}
	return errors.Join(errs...)
}

// Run steps the exchange every Every until the returned stop is called;
// stop waits for a step in progress to end.
func (x *Exchange) Run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(x.o.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				x.Step(ctx) // failures are counted and logged
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// fail counts and logs err (nil: nothing) and returns it wrapped with the
// step and the limit.
func (x *Exchange) fail(step string, r *policy.Rule, err error) error {
	if err == nil {
		return nil
	}
	if x.errors != nil {
		x.errors.WithLabelValues(step).Inc()
	}
	x.o.Logger.Debug("region exchange step failed", "step", step, "limit", r.Name, "err", err)
	return fmt.Errorf("region: %s %q: %w", step, r.Name, err)
}

// run runs script on region's Redis with its own deadline.
func (x *Exchange) run(ctx context.Context, region string, s *redis.Script, key string, args ...any) (any, error) {
	c := x.o.Redis[region]
	if c == nil {
		return nil, fmt.Errorf("no Redis for region %q", region)
	}
	ctx, cancel := context.WithTimeout(ctx, x.o.Timeout)
	defer cancel()
	v, err := s.Run(ctx, c, []string{key}, args...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("region %q: %w", region, err)
	}
	return v, nil
}

// redisNow is the scripts' clock argument: ” (Redis TIME) outside tests.
func (x *Exchange) redisNow() string {
	if x.o.RedisNow == nil {
		return ""
	}
	return strconv.FormatInt(x.o.RedisNow().UnixMicro(), 10)
}

func ms(d time.Duration) string { return strconv.FormatInt(max(1, d.Milliseconds()), 10) }

// flush adds the demand this node noted on r since the last flush to its
// region's counter of the current interval; on failure the demand is kept
// for the next step.
func (x *Exchange) flush(ctx context.Context, r *policy.Rule) error {
	g := r.Regional
	d := g.TakeDemand()
	if d == 0 {
		return nil
	}
	tm := x.timing(g)
	i := tm.interval(x.o.Now())
	if _, err := x.run(ctx, g.Region, x.counter, demandKey(r, g.Region, i), strconv.FormatInt(d, 10), ms(4*tm.pace)); err != nil {
		g.NoteDemand(d)
		return err
	}
	return nil
}

// refresh reads this region's share record and holds the share it allows
// (heldAt over the lookback) for the validity; a read that fails leaves
// the last share held until its validity ends.
func (x *Exchange) refresh(ctx context.Context, r *policy.Rule) error {
	g := r.Regional
	tm := x.timing(g)
	start := x.o.Now()
	rec, now, err := x.readRecord(ctx, r, g.Region)
	if err != nil {
		return err
	}
	share := g.Floors[g.Self]
	if rec != nil {
		share = heldAt(rec.History, now, tm.lookback.Microseconds(), share)
	}
	g.Hold(share, start.Add(tm.validity))
	return nil
}

// readRecord reads region's share record of r (nil when it has none or it
// does not parse) and the clock of that Redis, µs.
func (x *Exchange) readRecord(ctx context.Context, r *policy.Rule, region string) (*record, int64, error) {
	v, err := x.run(ctx, region, x.read, shareKey(r, region), x.redisNow(), ms(recordTTL))
	if err != nil {
		return nil, 0, err
	}
	reply, ok := v.([]any)
	if !ok || len(reply) < 1 {
		return nil, 0, fmt.Errorf("region %q: share record reply %v", region, v)
	}
	s, _ := reply[0].(string)
	now, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("region %q: share record clock %v", region, reply[0])
	}
	if len(reply) < 2 || reply[1] == nil {
		// No record (a first start, or a Redis that lost its data): the
		// script's GET answered nil, which is no record to parse.
		return nil, now, nil
	}
	raw, _ := reply[1].(string)
	rec, ok := parseRecord(raw)
	if !ok {
		x.o.Logger.Warn("region exchange: a share record does not parse; its region holds its floor until the next plan rewrites it",
			"limit", r.Name, "region", region)
		return nil, now, nil
	}
	return &rec, now, nil
}

// coordinate reads the plan and every region's record, then replicates the
// plan to the regions behind it, or, when all hold it and its interval has
// passed, computes the next plan from every region's demand, swaps it in
// and replicates it. It needs every region of r: when one does not answer
// it does nothing (shares stay where they are).
func (x *Exchange) coordinate(ctx context.Context, r *policy.Rule) error {
	g := r.Regional
	tm := x.timing(g)
	interval := tm.interval(x.o.Now())
	coord := g.Regions[0]
	v, err := x.run(ctx, coord, x.counter, planKey(r), "", ms(recordTTL))
	if err != nil {
		return err
	}
	raw, _ := v.(string)
	recs := make([]*record, len(g.Regions))
	maxEpoch, missing := int64(-1), 0
	for i, name := range g.Regions {
		rec, _, err := x.readRecord(ctx, r, name)
		if err != nil {
			return err
		}
		recs[i] = rec
		if rec == nil {
			missing++
		} else {
			maxEpoch = max(maxEpoch, rec.Epoch)
		}
	}
	p, ok := parsePlan(raw, len(g.Regions), g.Total())
	if !ok || maxEpoch > p.Epoch {
		// No plan (a first start, or one lost), or one the records have
		// passed: start one. With no record anywhere, the configured
		// shares (each region's new history holds its floor for the
		// lookback first); with records left, every region's floor, so
		// that every write is a shrink whatever a late writer of an
		// older plan does.
		next := plan{Epoch: maxEpoch + 1, Interval: interval, Shares: g.Floors}
		if missing == len(g.Regions) {
			next.Shares = g.Shares
		}
		if ok {
			next.Epoch = max(next.Epoch, p.Epoch+1)
		}
		return x.propose(ctx, r, raw, next, recs)
	}
	for _, rec := range recs {
		if rec == nil || rec.Epoch < p.Epoch {
			return x.replicate(ctx, r, p, recs)
		}
	}
	if interval <= p.Interval {
		return nil // one plan per pace interval
	}
	st := make([]Standing, len(g.Regions))
	for i, name := range g.Regions {
		v, err := x.run(ctx, name, x.counter, demandKey(r, name, interval-1), "", "0")
		if err != nil {
			return err
		}
		var d int64
		if s, ok := v.(string); ok {
			d, _ = strconv.ParseInt(s, 10, 64)
		}
		st[i] = Standing{Share: p.Shares[i], Demand: max(d, 0), Configured: g.Shares[i], Floor: g.Floors[i]}
	}
	next := plan{Epoch: p.Epoch + 1, Interval: interval, Shares: Next(st, supply(r, tm.pace), x.maxStep)}
	return x.propose(ctx, r, raw, next, recs)
}

// propose swaps next in for the plan read as raw ("" for none) and, when it
// won, replicates it.
func (x *Exchange) propose(ctx context.Context, r *policy.Rule, raw string, next plan, recs []*record) error {
	v, err := x.run(ctx, r.Regional.Regions[0], x.swap, planKey(r), raw, next.String(), ms(recordTTL))
	if err != nil {
		return err
	}
	if n, _ := v.(int64); n != 1 {
		return nil // another node's plan won: it replicates it, and so will the next step
	}
	return x.replicate(ctx, r, next, recs)
}

// Results of share_write.lua.
const (
	writeDone     = 0 // the record holds the epoch or a later one already
	writeWritten  = 1
	writeDeferred = 2 // the share grows: written in the second phase
)

// replicate writes plan p into every region's record that is behind it
// (recs as read): first the regions whose share does not grow, each
// checked and written atomically in its Redis; then, only when every one
// of them holds p's epoch, those whose share grows. A failure stops it:
// the next step finishes the job.
func (x *Exchange) replicate(ctx context.Context, r *policy.Rule, p plan, recs []*record) error {
	g := r.Regional
	tm := x.timing(g)
	write := func(i int, mode string) (int64, error) {
		v, err := x.run(ctx, g.Regions[i], x.write, shareKey(r, g.Regions[i]), x.redisNow(),
			strconv.FormatInt(p.Epoch, 10), strconv.FormatInt(p.Shares[i], 10), strconv.FormatInt(g.Floors[i], 10),
			mode, strconv.FormatInt(tm.lookback.Microseconds(), 10), ms(recordTTL), strconv.Itoa(MaxHistory))
		n, _ := v.(int64)
		return n, err
	}
	var grows []int
	for i := range g.Regions {
		if recs[i] != nil && recs[i].Epoch >= p.Epoch {
			continue
		}
		n, err := write(i, "shrink")
		if err != nil {
			return err
		}
		if n == writeDeferred {
			grows = append(grows, i)
		}
	}
	for _, i := range grows {
		if _, err := write(i, "any"); err != nil {
			return err
		}
	}
	return nil
}

// supply is the units the whole limit of r refills in d, at least 1.
func supply(r *policy.Rule, d time.Duration) int64 {
	l := r.Limit
	if l.Per <= 0 {
		return 1
	}
	return int64(max(1, min(float64(l.Rate)*float64(d)/float64(l.Per), math.MaxInt64/4)))
}
