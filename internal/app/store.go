package app

import (
	"context"
	"fmt"
	"golang.org/x/time/rate"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/monoclock"
	"github.com/llmguard/llmguard/internal/respguard"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// stores is the bucket state llmguard runs on: the main store, and for a
// shared (Redis) store the guard around it and the per-node fallback that
// fail-open limits use while it is unavailable.
type stores struct {
	main     bucket.Store
	fallback bucket.Store            // nil for the memory backend, which cannot fail
	guard    *bucket.Guarded         // nil for the memory backend
	async    *bucket.AsyncReconciler // nil for the memory backend
	// client is the Redis client of a redis or redis_cluster store (the
	// region exchange's own region); nil for the memory backend.
	client bucket.RedisScripter
	leases *bucket.Leased // the main store for Redis; nil for the memory backend (README, "Leases")
	// charges holds what the fallback admitted on quotas and window
	// counters until the store is back (README, "When Redis fails"); nil
	// for the memory backend.
	charges *bucket.ChargeBack
	close   []func() error
	// lastFailed: the store's last call failed (or, before any call, the
	// start-up script load did), so the next request may be served by the
	// fallback even while the breaker is closed. nil for memory.
	lastFailed *atomic.Bool
	// periodMoved counts the settlements, voids and fallback charges the
	// store applied with a quota delta that applied to nothing, its period
	// moved on (bucket.Memory.PeriodMoved, bucket.Redis.PeriodMoved).
	periodMoved func() uint64
	// perMaster: the guard has one breaker per cluster master.
	perMaster bool
}

// readiness is the /readyz body: the proxy serves whatever the store's
// state, so it is always ready; degraded says fail-open or fail-closed
// decisions are being made.
func (s *stores) readiness(backend string) map[string]any {
	r := map[string]any{"status": "ready", "store": backend, "degraded": false}
	if s.periodMoved != nil {
		r["reconcile_period_moved"] = s.periodMoved()
	}
	if s.guard != nil {
		state := s.guard.State()
		st := s.async.Stats()
		r["breaker"] = state.String()
		if s.perMaster {
			// A cluster's masters, each with its own breaker.
			brs := s.guard.Breakers()
			by := make(map[string]string, len(brs))
			for _, b := range brs {
				by[b.Master] = b.State.String()
			}
			r["breakers"] = by
		}
		// A node whose Redis was down from the start, or whose last call
		// failed, is degraded though its breaker has not opened (it opens
		// after min_calls failures): /readyz said degraded:false on a node
		// that had never reached its Redis.
		r["degraded"] = state != bucket.BreakerClosed || s.lastFailed.Load()
		r["reconcile_pending"] = st.Pending
		r["reconcile_dropped"] = st.Dropped
		r["fallback_charges_held"] = s.charges.Stats().Held
	}
	return r
}

// chargerOrNil is s.charges as a meter.Charger, nil (not a nil pointer in
// an interface) for the memory backend.
func (s *stores) chargerOrNil() meter.Charger {
	if s.charges == nil {
		return nil
	}
	return s.charges
}

// openStore builds the configured stores. For Redis it sizes the
// connection pool, loads the scripts (a Redis that is down at start-up is
// not fatal: the first call that finds its function missing loads the
// library, or on Redis before 7.0 its script by EVAL), puts every call behind
// a deadline and a circuit breaker, and queues reconciliations so that they
// never add a round trip to a request and survive an outage (bounded).
//
// live is the node's policy now (reloads replace it): the outage log line
// and the over-admission gauge read it, so a reloaded limit is reported as
// it is served.
func openStore(cfg *config.Config, live func() *policy.Policy, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*stores, error) {
	c := cfg.Store
	pol := live() // the policy at start-up: what is built once from it
	if c.Kind() == spec.BackendMemory {
		mem := bucket.NewMemory(bucket.MemoryOptions{Now: now, VoidFor: time.Duration(c.VoidWindow)})
		m := newStoreMetrics(reg)
		// The memory store drops no reconciliation (it has no queue), but a
		// settlement that ends after a quota's period turned applies its
		// delta to nothing, as on Redis: counted and logged alike.
		m.watchDrops(reg, nil, mem.PeriodMoved)
		stopDropLog := logDrops(log, reconcileDropMsg, reconcileDropReasons(), reconcileDropped(nil, mem.PeriodMoved), dropLogEvery, dropLookEvery)
		return &stores{main: timed{Store: mem, observe: m.observe}, periodMoved: mem.PeriodMoved, close: []func() error{stopDropLog, mem.Close}}, nil
	}
	if !c.Kind().Shared() {
		return nil, fmt.Errorf("app: unknown store backend %q", c.Backend)
	}
	// go-redis timeouts: every call carries its own deadline (store.timeout);
	// these only bound a call without one. No retries: a retry would outlive
	// the deadline. One dial attempt: the default retries a refused dial for
	// half a second, which would turn "Redis is down" into a timeout.
	const ioTimeout = time.Second
	var client bucket.RedisScripter
	var closeClient func() error
	reloadCluster := func() {} // what a failed call does to the client's view of a cluster
	// masterOf names the master of a key, for one breaker per master (nil:
	// one breaker for a single Redis); breakerName names that one breaker.
	var masterOf func(key string) string
	var breakerName string
	if c.Kind() == spec.BackendRedis {
		opt, err := redis.ParseURL(c.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("app: store.redis_url: %w", err)
		}
		opt.PoolSize, opt.MinIdleConns = c.PoolSize, min(c.PoolSize, 16)
		opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout = ioTimeout, ioTimeout, ioTimeout
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
		rc := respguard.NewClient(opt)
		client, closeClient = rc, rc.Close
		breakerName = opt.Addr
	} else {
		opt, err := clusterOptions(c)
		if err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		opt.PoolSize, opt.MinIdleConns = c.PoolSize, min(c.PoolSize, 16)
		opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout = ioTimeout, ioTimeout, ioTimeout
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries, opt.MaxRedirects = true, -1, 1, 1
		cc := respguard.NewClusterClient(opt)
		client, closeClient = cc, cc.Close
		// MaxRedirects 1 (go-redis's default is 3): one MOVED or ASK is
		// still followed at once (a slot that moved; a failed-over master
		// back as a replica), but a call to a master that is down is tried
		// twice, not four times with growing back-offs, which used up the
		// whole store timeout and turned a refused connection into a
		// timeout (and so a Void). In TestChaosClusterFailover the takes
		// that failed during the failover were 43 connection errors and 69
		// timeouts before, 416-439 connection errors and 0-4 timeouts
		// after; the slowest refused request 114-160 ms before, 40-171 ms
		// after (store timeout 100 ms).
		//
		// go-redis reloads the slot map on a MOVED or ASK reply, or when it
		// is older than ClusterStateReloadInterval (60 s). A master that
		// was killed answers nothing: until its replica's promotion is
		// seen, every call for its slots goes to the dead address. So
		// every failed call asks for a reload (go-redis runs one at a time,
		// at most one per 200 ms): the client follows a failover within
		// about that of the promotion instead of a minute
		// (TestChaosClusterFailover).
		reloadCluster = func() { cc.ReloadState(context.Background()) }
		masterOf = clusterMasterOf(cc, time.Duration(c.Timeout))
	}
	r, err := bucket.NewRedis(bucket.RedisOptions{Client: client, VoidFor: time.Duration(c.VoidWindow), Log: log})
	if err != nil {
		closeClient()
		return nil, fmt.Errorf("app: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lastFailed := new(atomic.Bool)
	lastCall := new(atomic.Int64) // time.Now().UnixNano() of the last store call to end
	// outageFrom: by master (BreakerStatus.Master), when the outage its
	// breaker's open began (a time.Time), from its open to its close; one
	// per master, so that another master's breaker opening later does not
	// move it (trial22: a master down 48 s logged outage=30.667s, counted
	// from when the cluster went down for every key 18 s after the kill).
	var outageFrom sync.Map
	// firstFailure: by master (Call.Master), when its first failed call
	// since the run of failures began was sent (a time.Time: the report's
	// time less the call's Duration; the master did not answer from then
	// on); cleared where the run ends (every master answers) and at the
	// master's breaker's close. Not the report's own time: since a
	// request's slot groups go at once, a group's failed take can be
	// reported after the request was answered by the fallback (CI:
	// outage=821ms for a master that had failed a request 835 ms before
	// its thaw).
	var firstFailure sync.Map
	lastCall.Store(time.Now().UnixNano())
	loadErr := r.Load(ctx)
	if loadErr != nil {
		lastFailed.Store(true) // degraded until a call succeeds; probed meanwhile
	}
	if loadErr != nil && redisAuthHint(loadErr) != "" {
		// Refused for want of credentials (Redis closes the connection
		// after refusing FUNCTION LOAD's long argument, so the INFO
		// that logOldRedis would send next often fails as a reset, which
		// names no cause): said now, with what to change.
		logAuthRefused(log, loadErr)
	} else {
		if loadErr != nil {
			log.Warn("could not load the Redis scripts at start-up; they will be loaded on first use", "err", loadErr)
		}
		logOldRedis(ctx, client, log)
	}

	m := newStoreMetrics(reg)
	failedTakeLog := &rate.Sometimes{First: 1, Interval: failedTakeLogEvery}
	// The idle probe's line has its own limit: sharing the takes' hid a
	// request's failed take for failedTakeLogEvery after it (trial16).
	probeLog := &rate.Sometimes{First: 1, Interval: failedTakeLogEvery}
	// A run of failed calls (from the first failure after a success to the
	// next success) whose "store take failed" line was written, and the
	// breaker did not open during it, gets a line at its end too: the
	// breaker's own lines tell an outage's start and end, but isolated
	// failures (fewer than min_calls, on a quiet node) had only their
	// start logged (trial3: a Redis down 6 s under light traffic logged
	// one "store take failed" and then nothing when it came back).
	run := &failureRun{}
	// logFactors names the master whose breaker opened: on a cluster one
	// line per master's outage, which without it could not be told apart
	// (trial23: three alike as three masters' breakers opened).
	logFactors := func(master string) {
		for _, rule := range live().Rules() {
			if rule.FailOpen {
				oa := bucket.OverAdmissionOf(rule.LimitAt(time.Now()), c.Nodes, 0)
				log.Warn("store unavailable: fail-open limit now served by this node's fallback bucket",
					"master", master, "limit", rule.Name, "nodes", c.Nodes, "node_capacity", oa.Node.Capacity, "over_admission_factor", oa.Factor)
			}
		}
	}
	reg.MustRegister(&factorCollector{desc: prometheus.NewDesc("llmguard_fallback_over_admission_factor",
		"Worst-case ratio of what the cluster admits during a store outage to what a fail-open limit allows (per-node fallback buckets of limit / store.nodes).",
		[]string{"limit"}, nil), live: live, nodes: c.Nodes})
	// guard is read by its own OnCall (its state), which runs only once
	// calls are made, after NewGuarded returned.
	var guard *bucket.Guarded
	guard = bucket.NewGuarded(r, bucket.GuardOptions{
		Timeout: time.Duration(c.Timeout),
		// A background batch of up to 256 reconciliations (one script per
		// slot, each bucket written once): more time than one take.
		ReconcileTimeout: max(100*time.Millisecond, 4*time.Duration(c.Timeout)),
		MinCalls:         c.Breaker.MinCalls,
		FailureRatio:     c.Breaker.FailureRatio,
		Window:           time.Duration(c.Breaker.Window),
		OpenFor:          time.Duration(c.Breaker.OpenFor),
		// An outage is logged where it starts (WARN) and where it ends
		// (INFO, with how long it lasted); its probes, open -> half-open ->
		// open every open_for, at DEBUG: at WARN they were two lines every
		// open_for (3,600 an hour at the default 2s) saying nothing new.
		// One breaker per cluster master (README, "Cluster failover"):
		// a master down fails only the requests with a key on it.
		MasterOf: masterOf,
		Name:     breakerName,
		OnStateChange: func(master string, from, to bucket.BreakerState) {
			switch {
			case from == bucket.BreakerClosed && to == bucket.BreakerOpen:
				// The outage began at the run's first failed call, not
				// where the breaker opened: an idle node's probes take
				// min_calls × open_for/2 to open it (trial16: Redis down
				// 26 s logged outage=6.014s, the time since it opened).
				// On a cluster, from the master's own first failure; the
				// call that opens the breaker is reported after this, so a
				// master without one began failing now.
				began := run.since(time.Now())
				if masterOf != nil {
					began = time.Now()
					if first, ok := firstFailure.Load(master); ok {
						began = first.(time.Time)
					}
				}
				outageFrom.Store(master, began)
				run.logged.Store(false) // the breaker's close line ends it
				log.Warn("store circuit breaker", "master", master, "from", from.String(), "to", to.String())
				logFactors(master) // once per outage (of this master)
			case to == bucket.BreakerClosed:
				began := time.Now()
				if b, ok := outageFrom.LoadAndDelete(master); ok {
					began = b.(time.Time)
				}
				firstFailure.Delete(master)
				log.Info("store circuit breaker: the store answers again, limits are taken from it again", "master", master, "from", from.String(), "to", to.String(),
					"outage", time.Since(began).Round(time.Millisecond))
			default:
				log.Debug("store circuit breaker", "master", master, "from", from.String(), "to", to.String())
			}
		},
		OnCall: func(call bucket.Call) {
			// The breaker probe's takes (probeWhileOpen, marked by
			// bucket.WithProbe), on an idle node too, are counted as op
			// "probe": no request was served by them.
			lastCall.Store(time.Now().UnixNano())
			probe := call.Probe
			if probe {
				m.duration.WithLabelValues("probe").Observe(call.Duration.Seconds())
			} else {
				m.observe(call.Op, call.Duration)
			}
			switch call.Result {
			case bucket.ResultOK:
				if lastFailed.Load() {
					lastFailed.Store(false)
				}
				// The run ends where the store answers again: on a cluster,
				// once no master's last call failed. A call another master
				// served says nothing of the one that failed (trial22: a
				// master killed, its tenant's next take failed, and the next
				// request of a tenant on a live master logged "store answers
				// again" 5 ms later, the master still down).
				if run.failed.Load() > 0 && (masterOf == nil || !guard.AnyFailing()) {
					firstFailure.Clear()
					if failed, since, logged := run.end(); logged {
						log.Info("store answers again after failed calls; limits are taken from it again",
							"failed_calls", failed, "since_first_failure", time.Since(since).Round(time.Millisecond))
					}
				}
			case bucket.ResultFailed:
				lastFailed.Store(true)
				run.fail()
				if call.Master != "" {
					if _, ok := firstFailure.Load(call.Master); !ok {
						firstFailure.LoadOrStore(call.Master, time.Now().Add(-call.Duration))
					}
				}
				reloadCluster()
				if probe {
					m.errors.WithLabelValues("probe", call.Kind.String()).Inc()
					// An idle node learns of an outage from its probe
					// alone: say so once per run of failures (its end is
					// logged where a call next succeeds), while the breaker
					// is closed (once open, its own lines tell the outage),
					// at most once per failedTakeLogEvery. Before, it wrote
					// nothing until a request's take failed or min_calls
					// probes opened the breaker (~20 s).
					if guard.State() == bucket.BreakerClosed && !run.logged.Load() {
						probeLog.Do(func() {
							run.logged.Store(true)
							log.Warn("store unreachable: a health probe failed (no request needed the store meanwhile); fail-open limits will be served by this node's fallback bucket, fail-closed limits refused, until it answers",
								authHintAttrs(call.Err, "kind", call.Kind.String(), "err", call.Err, "took", call.Duration)...)
						})
					}
					return
				}
				m.errors.WithLabelValues(call.Op.String(), call.Kind.String()).Inc()
				if call.Op == bucket.OpTake {
					// A failed take is served by the fallback (fail-open
					// limits) or refused (fail-closed) even when the
					// breaker stays closed: say so for isolated failures
					// too, at most once per failedTakeLogEvery.
					failedTakeLog.Do(func() {
						run.logged.Store(true)
						log.Warn("store take failed: this request's fail-open limits were served by this node's fallback bucket, fail-closed limits refused it",
							authHintAttrs(call.Err, "kind", call.Kind.String(), "err", call.Err, "took", call.Duration, "next_line_after", failedTakeLogEvery)...)
					})
				}
			}
		},
	})
	async := bucket.NewAsyncReconciler(guard, bucket.AsyncOptions{
		QueueSize: c.ReplayQueue,
		// Below the Redis store's 10-minute once-per-request-id window: a
		// replay past it could apply a delta whose first reply was lost.
		MaxHold: 9 * time.Minute,
		// Each drop at DEBUG (an outage drops thousands); logDrops below
		// writes the WARN lines, with counts by reason, at a bounded rate.
		OnDrop: func(rc bucket.Reconciliation, err error) {
			log.Debug("reconciliation dropped", "request_id", rc.RequestID, "err", err)
		},
	})
	m.watchAsync(reg, async)
	m.watchDrops(reg, async, r.PeriodMoved)
	reg.MustRegister(&breakerCollector{g: guard, desc: prometheus.NewDesc("llmguard_breaker_state",
		"State of the store circuit breaker of each Redis master (the one Redis; in a cluster, each master a call was routed to, dropped once the slots routed to it moved to another): 0 closed, 1 half-open, 2 open.",
		[]string{"master"}, nil)})
	// Every label set exists from the start, so that rate() sees the first
	// error of an outage shorter than a scrape interval.
	for _, op := range []bucket.Op{bucket.OpTake, bucket.OpReconcile} {
		for _, k := range []bucket.ErrorKind{bucket.KindTimeout, bucket.KindConnection, bucket.KindOther} {
			m.errors.WithLabelValues(op.String(), k.String())
		}
	}
	fb := bucket.NewFallback(bucket.FallbackOptions{Nodes: c.Nodes, Memory: bucket.MemoryOptions{VoidFor: time.Duration(c.VoidWindow)}})
	// What fb admits on quotas and window counters is charged to Redis once
	// it is back, straight through the guard (not the AsyncReconciler,
	// whose 9-minute hold counts from the enqueue: an outage longer than
	// that would drop the charges).
	charges, err := bucket.NewChargeBack(bucket.ChargeOptions{Store: guard, Now: now, MaxHeld: c.ReplayQueue})
	if err != nil {
		closeClient()
		return nil, fmt.Errorf("app: %w", err)
	}
	watchCharges(reg, charges)
	stopProbe := probeWhileOpen(guard, time.Duration(c.Breaker.OpenFor), time.Duration(healthCheckOf(c)), lastFailed, lastCall, log)
	stopCharges := chargeWhenBack(guard, charges, time.Duration(c.Breaker.OpenFor), lastFailed, masterOf != nil, log)
	// Every drop is counted by reason (llmguard_reconcile_dropped_total,
	// llmguard_fallback_charges_dropped_total) and logged, at most one line
	// per dropLogEvery each.
	stopDropLog := logDrops(log, reconcileDropMsg, reconcileDropReasons(), reconcileDropped(async, r.PeriodMoved), dropLogEvery, dropLookEvery)
	stopChargeDropLog := logDrops(log, "fallback charges dropped: spend the fallback admitted is not charged to the store (llmguard_fallback_charges_dropped_total{reason})",
		chargeDropReasons(), chargeDropped(charges), dropLogEvery, dropLookEvery)
	st := &stores{main: async, fallback: fb, guard: guard, async: async, client: client, lastFailed: lastFailed, charges: charges, periodMoved: r.PeriodMoved, perMaster: masterOf != nil,
		close: []func() error{stopProbe, stopCharges, async.Close, stopDropLog, stopChargeDropLog, fb.Close, closeClient}}
	if window := time.Duration(denyCacheOf(c)); window > 0 {
		// Denials a Redis store has just made are answered from memory
		// (store.deny_cache); the memory backend has no round trip to save.
		for _, rule := range pol.Rules() {
			m.cached.WithLabelValues(rule.Name)
		}
		dc := bucket.NewDenyCache(async, bucket.DenyCacheOptions{Window: window, Now: now, OnCached: func(it bucket.Item) {
			m.cached.WithLabelValues(limitLabel(it.Key)).Inc()
		}})
		st.main = dc
		st.close = append([]func() error{dc.Close}, st.close...)
	}
	// Leased limits (lease:) are served from leases over the shared store;
	// others pass through. Its returns go through the stores below it, so
	// it closes first.
	st.leases = bucket.NewLeased(st.main, bucket.LeaseOptions{
		Now:     now,
		VoidFor: time.Duration(c.VoidWindow),
		OnReturnError: func(err error) {
			log.Warn("lease return failed; the units come back as the bucket refills", "err", err)
		},
	})
	reg.MustRegister(newLeaseCollector(st.leases, pol))
	st.main = st.leases
	st.close = append([]func() error{st.leases.Close}, st.close...)
	return st, nil
}

// denyCacheOf is store.deny_cache, its default when unset.
func denyCacheOf(c config.Store) config.Duration {
	if c.DenyCache == nil {
		return config.DefaultDenyCache
	}
	return *c.DenyCache
}

// healthCheckOf is c's store.health_check, its default when unset (a
// config built without Load's defaults), as denyCacheOf reads deny_cache.
func healthCheckOf(c config.Store) config.Duration {
	if c.HealthCheck == nil {
		return config.DefaultHealthCheck
	}
	return *c.HealthCheck
}

// limitLabel is the limit label of a bucket key: the limit's name, which
// only the config gives (policy.LimitOfKey), or "other" for a key of no
// limit.
func limitLabel(key string) string {
	if name, ok := policy.LimitOfKey(key); ok {
		return name
	}
	return "other"
}

// probeWhileOpen sends probes (a cost-0 take of a key no rule uses, which
// writes nothing) every half open interval to each master whose breaker is
// not closed or whose last call failed (bucket.Guarded.Breakers: one
// probe key per master, in a slot last routed to it; a single Redis has
// one), and to the store when its last call failed before any breaker was
// made (lastFailed: a Redis down since start-up opens no breaker on an idle
// node), so that a node without traffic also notices a master is back and
// its /readyz and metrics say so. While the store is healthy it probes
// every master once no call has ended for healthCheck (lastCall, Unix
// nanoseconds; 0 turns this off), so that an idle node also notices one
// going down. Each tick first forgets the breakers of masters whose slots
// moved away (a failover: bucket.Guarded.Forget), logged at INFO. The
// returned func stops it. Its takes are marked bucket.WithProbe, so that
// the store's call hook tells them from requests' takes.
func probeWhileOpen(g *bucket.Guarded, openFor, healthCheck time.Duration, lastFailed *atomic.Bool, lastCall *atomic.Int64, log *slog.Logger) func() error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	tick := openFor / 2
	if healthCheck > 0 {
		tick = min(tick, healthCheck)
	}
	probeLimit := bucket.Limit{Capacity: 1, Rate: 1, Per: time.Second}
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(tick, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if gone := g.Forget(); len(gone) > 0 {
					log.Info("store circuit breaker dropped: its master no longer serves the slots routed to it (a failover or resharding)", "masters", gone)
				}
				idle := healthCheck > 0 && now.UnixNano()-lastCall.Load() >= int64(healthCheck)
				brs := g.Breakers()
				probed := false
				for _, b := range brs {
					if idle || b.State != bucket.BreakerClosed || b.Failing || len(brs) == 1 && lastFailed.Load() {
						g.Take(bucket.WithProbe(context.Background()), "", []bucket.Item{{Key: b.ProbeKey, Limit: probeLimit}})
						probed = true
					}
				}
				if !probed && len(brs) == 0 && (idle || lastFailed.Load()) {
					g.Take(bucket.WithProbe(context.Background()), "", []bucket.Item{{Key: "llmguard:{probe}:breaker", Limit: probeLimit}})
				}
			}
		}
	}()
	return func() error { close(done); wg.Wait(); return nil }
}

// clusterMasterOf is bucket.GuardOptions.MasterOf for cc: the address of
// the master serving key's slot in cc's slot map (go-redis
// ClusterClient.MasterForKey, which follows MOVED/ASK and reloads), "" when
// there is no map yet and it cannot be loaded within timeout (the call
// then fails, counted on the breaker of the unknown master "").
func clusterMasterOf(cc *redis.ClusterClient, timeout time.Duration) func(key string) string {
	var mapped atomic.Bool // cc has a slot map: MasterForKey no longer waits on the network
	return func(key string) string {
		ctx, known := context.Background(), mapped.Load()
		if !known {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, max(timeout, 50*time.Millisecond))
			defer cancel()
		}
		cl, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return ""
		}
		if !known {
			mapped.Store(true) // once: every call reads the flag
		}
		return cl.Options().Addr
	}
}

// breakerCollector exports llmguard_breaker_state{master}: each of the
// guard's breakers (bucket.Guarded.Breakers), read when scraped. The
// series of a breaker the guard forgot (its master's slots moved away)
// goes with it, so an alert on a dead master's open breaker ends once a
// replica took over.
type breakerCollector struct {
	g    *bucket.Guarded
	desc *prometheus.Desc
}

// Describe sends the family's description.
func (b *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

// Collect sends one series per breaker.
func (b *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range b.g.Breakers() {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, float64(st.State), st.Master)
	}
}

// timed is a store whose every call is observed in
// llmguard_store_duration_seconds{op}, as Guarded's OnCall observes the Redis
// store's: one latency histogram per store call, whatever the backend.
type timed struct {
	bucket.Store
	observe func(op bucket.Op, d time.Duration)
}

func (t timed) Take(ctx context.Context, id string, items []bucket.Item) (bucket.Decision, error) {
	t0 := monoclock.Now()
	d, err := t.Store.Take(ctx, id, items)
	t.observe(bucket.OpTake, monoclock.Since(t0))
	return d, err
}

// TakeInto is Take through the wrapped store's bucket.StatusTaker, so that
// the memory store's take writes its statuses into the caller's slice and
// allocates nothing; a store without TakeInto is called with Take.
func (t timed) TakeInto(ctx context.Context, id string, items []bucket.Item, statuses []bucket.Status) (bucket.Decision, error) {
	st, ok := t.Store.(bucket.StatusTaker)
	if !ok {
		return t.Take(ctx, id, items)
	}
	t0 := monoclock.Now()
	d, err := st.TakeInto(ctx, id, items, statuses)
	t.observe(bucket.OpTake, monoclock.Since(t0))
	return d, err
}

func (t timed) Reconcile(ctx context.Context, id string, deltas []bucket.Delta) error {
	t0 := monoclock.Now()
	err := t.Store.Reconcile(ctx, id, deltas)
	t.observe(bucket.OpReconcile, monoclock.Since(t0))
	return err
}

func (t timed) Void(ctx context.Context, id string, items []bucket.Item) error {
	t0 := monoclock.Now()
	err := t.Store.Void(ctx, id, items)
	t.observe(bucket.OpReconcile, monoclock.Since(t0))
	return err
}

// storeMetrics are the store-health collectors (DESIGN.md §9):
//
//	llmguard_store_duration_seconds{op}                 histogram of store calls (take, reconcile), every backend
//	llmguard_store_errors_total{op,kind}                failed calls by kind (timeout, connection, other); op probe: the breaker's probe
//	llmguard_breaker_state{master}                      0 closed, 1 half-open, 2 open, per Redis master
//	llmguard_fallback_over_admission_factor{limit}      worst-case factor of a fail-open limit during an outage
//	llmguard_reconcile_queue_length                     reconciliations waiting (queued or held through an outage)
//	llmguard_reconcile_dropped_total{reason}            reconciliations dropped, by bucket.AsyncDrop, and period_moved (bucket.Redis.PeriodMoved)
//	llmguard_denials_cached_total{limit}                denials answered from memory (store.deny_cache), by denying limit
type storeMetrics struct {
	duration *prometheus.HistogramVec
	// byOp are duration's children, one per bucket.Op, resolved once: a
	// store call observes its histogram without a label lookup.
	byOp   [bucket.OpReconcile + 1]prometheus.Observer
	errors *prometheus.CounterVec
	cached *prometheus.CounterVec
}

func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmguard_store_duration_seconds",
			Help:    "Duration of store calls (take, reconcile), failures included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5},
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_store_errors_total",
			Help: "Failed store calls by operation and kind (timeout, connection, other).",
		}, []string{"op", "kind"}),
		cached: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_denials_cached_total",
			Help: "Denials answered from this node's memory without a store round trip (store.deny_cache), by the denying limit: the store had denied the same bucket the same or a smaller cost within its wait.",
		}, []string{"limit"}),
	}
	reg.MustRegister(m.duration, m.errors, m.cached)
	for _, op := range []bucket.Op{bucket.OpTake, bucket.OpReconcile} {
		// Exported from the start, for rate() and dashboards.
		m.byOp[op] = m.duration.WithLabelValues(op.String())
	}
	return m
}

// observe records a store call of op that took d in
// llmguard_store_duration_seconds{op}.
func (m *storeMetrics) observe(op bucket.Op, d time.Duration) {
	if int(op) < len(m.byOp) {
		m.byOp[op].Observe(d.Seconds())
		return
	}
	m.duration.WithLabelValues(op.String()).Observe(d.Seconds())
}

// watchAsync exports llmguard_reconcile_queue_length, a's pending
// reconciliations.
func (m *storeMetrics) watchAsync(reg prometheus.Registerer, a *bucket.AsyncReconciler) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "llmguard_reconcile_queue_length",
		Help: "Reconciliations waiting to be written to the store, held ones (store unavailable) included.",
	}, func() float64 { return float64(a.Stats().Pending) }))
}

// watchDrops exports llmguard_reconcile_dropped_total{reason}: a's drops
// (nil, the memory backend's: none) and moved's count as period_moved.
func (m *storeMetrics) watchDrops(reg prometheus.Registerer, a *bucket.AsyncReconciler, moved func() uint64) {
	reg.MustRegister(
		&reconcileDropCollector{reasons: reconcileDropReasons(), read: reconcileDropped(a, moved), desc: prometheus.NewDesc("llmguard_reconcile_dropped_total",
			"Reconciliations dropped, by reason: full (the queue or the replay hold was full), closed (at shutdown), expired (held through an outage past 9 minutes), refused (invalid), attempts (failed 5 times), period_moved (applied by the store, a quota's delta to nothing: its period had moved on there; fallback charges and voids included).",
			[]string{"reason"}, nil)},
	)
}

// failedTakeLogEvery is the least time between two log lines about failed
// takes while the breaker stays closed (an isolated timeout or a few): the
// first failure is logged at once, later ones at most this often; the
// llmguard_store_errors_total counter counts every one.
const failedTakeLogEvery = 10 * time.Second

// factorCollector exports llmguard_fallback_over_admission_factor{limit}
// for the fail-open limits of the live policy, computed when scraped: a
// reload that changes, adds or removes a limit changes its series at once.
type factorCollector struct {
	desc  *prometheus.Desc
	live  func() *policy.Policy
	nodes int // store.nodes
}

// Describe sends the family's description.
func (f *factorCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

// Collect sends one series per fail-open limit.
func (f *factorCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, rule := range f.live().Rules() {
		if rule.FailOpen {
			ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue,
				bucket.OverAdmissionOf(rule.LimitAt(now), f.nodes, 0).Factor, rule.Name)
		}
	}
}

// failureRun is the store's current run of failed calls: those since the
// last call that succeeded. Safe for concurrent use; its zero value is no
// run.
type failureRun struct {
	failed atomic.Int64 // failed calls in the run
	first  atomic.Int64 // time.Now().UnixNano() of the run's first failure; 0 between runs
	// logged: a "store take failed" line was written in the run, and the
	// breaker has not opened since (its own close line then ends it).
	logged atomic.Bool
}

// fail counts one failed call, the run's first starting it.
func (r *failureRun) fail() {
	if r.failed.Add(1) == 1 {
		r.first.Store(time.Now().UnixNano())
	}
}

// since is when the run of failures began: the time of its first failed
// call, or now when no call has failed since the last success.
func (r *failureRun) since(now time.Time) time.Time {
	if first := r.first.Load(); first != 0 && first < now.UnixNano() {
		return time.Unix(0, first)
	}
	return now
}

// end ends the run at a call that succeeded: it returns the run's failed
// calls, the time of its first, and whether its end is to be logged.
func (r *failureRun) end() (failed int64, since time.Time, logged bool) {
	failed = r.failed.Swap(0)
	// first is zeroed with the run, so that since never reads a finished
	// run's start (a failure racing this end may have counted itself and
	// not yet stored its time: the run then starts now).
	since = time.Now()
	if first := r.first.Swap(0); first != 0 {
		since = time.Unix(0, first)
	}
	return failed, since, r.logged.Swap(false)
}
