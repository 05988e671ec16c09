package bucket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// ErrUnavailable is wrapped by every error of a Guarded store other than
// ErrInvalid and ErrVoided: the store could not serve the call, because it
// failed within its deadline (the store's error is wrapped too) or because
// the breaker is open and the call was not even tried (the failure that
// opened it is wrapped, and ErrNotSent). The caller then follows each
// rule's on_failure: serve it from a Fallback, or refuse the request. Test
// with errors.Is.
var ErrUnavailable = errors.New("store unavailable")

// BreakerState is the state of a Guarded store's circuit breaker.
type BreakerState uint8

const (
	// BreakerClosed lets every call through to the store.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets GuardOptions.Probes calls through to find out
	// whether the store is back; the others are rejected.
	BreakerHalfOpen
	// BreakerOpen rejects every call at once, for GuardOptions.OpenFor.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", s)
}

// Op names a Store method, for counters and the OnCall hook.
type Op uint8

const (
	OpTake      Op = iota // Store.Take
	OpReconcile           // Store.Reconcile or Store.Void, or one ReconcileBatch round trip
	numOps
)

// String returns "take" or "reconcile".
func (o Op) String() string {
	if o == OpTake {
		return "take"
	}
	return "reconcile"
}

// Result is how a call through a Guarded store ended.
type Result uint8

const (
	// ResultOK: the store answered (a Take's denial is an answer, and so
	// is ErrVoided).
	ResultOK Result = iota
	// ResultInvalid: the input was refused (ErrInvalid); not a store failure.
	ResultInvalid
	// ResultFailed: the store was called and failed or missed the deadline.
	ResultFailed
	// ResultRejected: the breaker refused the call; the store was not called.
	ResultRejected
	numResults
)

// String returns "ok", "invalid", "failed" or "rejected".
func (r Result) String() string {
	return [...]string{"ok", "invalid", "failed", "rejected"}[r]
}

// ErrorKind classifies a store failure, for counters and logs.
type ErrorKind uint8

const (
	// KindNone: no failure.
	KindNone ErrorKind = iota
	// KindTimeout: the deadline passed (context deadline, network timeout,
	// no free connection in time).
	KindTimeout
	// KindConnection: the connection could not be made or broke (refused,
	// reset, aborted, broken pipe, closed, unexpected EOF).
	KindConnection
	// KindOther: anything else, such as an error reply from Redis.
	KindOther
	numKinds
)

// String returns "none", "timeout", "connection" or "other".
func (k ErrorKind) String() string {
	return [...]string{"none", "timeout", "connection", "other"}[k]
}

// KindOf classifies err; nil is KindNone.
func KindOf(err error) ErrorKind {
	var ne net.Error
	switch {
	case err == nil:
		return KindNone
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout), errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, redis.ErrClosed):
		return KindConnection
	}
	return KindOther
}

// Call describes one call through a Guarded store, for GuardOptions.OnCall.
type Call struct {
	Op       Op
	Result   Result
	Kind     ErrorKind     // KindNone unless Result is ResultFailed
	Duration time.Duration // wall time in the Guarded method, ~0 when rejected
	// Err is the store's own error for a ResultFailed call (a timeout, a
	// refused connection, Redis's CLUSTERDOWN or LOADING reply…), so that a
	// log line can say what failed; nil for every other Result.
	Err error
	// Probe: the call's context was marked by WithProbe (a caller's own
	// health probe, no request's call).
	Probe bool
	// Master is the master whose breaker rejected the call (ResultRejected)
	// or whose part of the call failed (ResultFailed; "" when the failure
	// could not be placed on one), as GuardOptions.MasterOf names it; ""
	// for every call of a store without MasterOf and for other results.
	Master string
}

// probeKey marks a context as a probe's (WithProbe).
type probeKey struct{}

// WithProbe returns ctx marked so that the Call a Guarded method reports
// for it has Probe set: a caller's health probe, told apart from requests'
// calls in OnCall.
func WithProbe(ctx context.Context) context.Context { return context.WithValue(ctx, probeKey{}, true) }

// backgroundKey marks a context as a ChargeBack flush's (withBackground).
type backgroundKey struct{}

// withBackground returns ctx marked so that a Guarded call made with it
// that fails is left out of the breaker's counts (not a failure, not a
// success): the charges ChargeBack.Flush sends after an outage, on a store
// that looked healthy (the app flushes only when the breaker is closed and
// the last call succeeded). Their failures say that part of the store
// refuses those keys (one cluster master out of memory or down), which the
// requests' own calls and the probes show the breaker as they happen; a
// flush of many charges that reach that part made a run of failures that
// opened the breaker for every key (review20). A background call that
// succeeds counts as a success; a rejected one is still rejected.
func withBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// uncountedError carries the failure of a background call
// (withBackground) out of the breaker's Execute, which IsExcluded leaves
// out of its counts; do gives the caller the call's own error.
type uncountedError struct{ error }

// DefaultTimeout is GuardOptions.Timeout's default, the deadline of a Take
// on the request's path (store.timeout). It was chosen from
// BenchmarkTakeLatencyUnderLoad (latency_bench_test.go): takes of three
// buckets from 16 callers on a 2-core machine shared with other jobs
// answered within 8–25 ms as the machine was (p99.9 5.5–13 ms), and with
// four `yes` processes competing for the CPU at p99 27–37 ms, p99.9 74–124
// ms, at most 154 ms. 5 ms failed 0.3–2% of a healthy Redis's takes even at
// rest; 50 ms fails none at rest and under 0.5% beside the CPU hog, which
// the breaker's failure-ratio rule tolerates and Void gives back. See the
// README, "Store timeouts".
const DefaultTimeout = 50 * time.Millisecond

// GuardOptions configures NewGuarded. The zero value is a usable default.
//
// The breaker opens on a failure ratio, not on a few slow calls: when, in
// the last Window, at least MinCalls calls ended and at least FailureRatio
// of them failed; or at once when MinCalls calls in a row failed (a store
// that is down or hung, whatever the window held before). The ratio
// forgets calls older than the Window (TestBreakerWindowForgets); the run
// does not: it lasts until a call succeeds, however slowly its failures
// come, so a quiet node (fewer than MinCalls calls a Window) still opens
// its breaker through an outage (TestBreakerRunOutlivesWindow). With the
// defaults: half of at least 20 calls in 10 s, or 20 failures in a row.
type GuardOptions struct {
	// Timeout is the deadline of every Take, counted from the call,
	// whatever the caller's context says (its values are kept, its
	// deadline and cancellation are not); 0 means DefaultTimeout (50ms). A
	// Take that misses it fails (KindTimeout) and counts toward opening
	// the breaker; the store may still apply it (see MayHaveApplied).
	Timeout time.Duration
	// ReconcileTimeout is the same deadline for Reconcile, Void and
	// ReconcileBatch, which may carry a pipeline of hundreds of scripts and
	// run off the request's path; 0 means 100ms.
	ReconcileTimeout time.Duration
	// MinCalls is how many calls must have ended in the Window before the
	// failure ratio can open the breaker, and how many failures in a row
	// (with no success between them, however far apart) open it at once;
	// 0 means 20. A denial and ErrVoided are successes;
	// ErrInvalid neither counts nor breaks a run of failures.
	MinCalls uint32
	// FailureRatio is the share of failed calls, among those that ended in
	// the Window, that opens the breaker (once MinCalls ended), in (0, 1];
	// 0 (or out of range) means 0.5.
	FailureRatio float64
	// Window is how long calls are counted toward the ratio: a rolling
	// window, moved in tenths of it; 0 means 10s.
	Window time.Duration
	// OpenFor is how long the breaker stays open, rejecting every call at
	// once, before it half-opens; 0 means 2s.
	OpenFor time.Duration
	// Probes is how many calls the half-open breaker lets through; that
	// many successes in a row close it, one failure opens it again. The
	// other calls meanwhile are rejected. 0 means 1.
	Probes uint32
	// OnStateChange, when set, is called on every transition of a
	// breaker, with its master (MasterOf's address, or Name for the one
	// breaker of a store without MasterOf), in the goroutine of the call
	// (or State) that caused it, while the breaker is locked: it must be
	// quick and must not call the Guarded's methods. Open to half-open
	// happens lazily, on the first call or State after OpenFor.
	OnStateChange func(master string, from, to BreakerState)
	// MasterOf, when set, names the Redis master holding a key now (in a
	// Redis Cluster, the address of the master serving the key's hash
	// slot in the client's slot map: go-redis ClusterClient.MasterForKey),
	// and every master gets its own breaker, made on the first call routed
	// to it: one master down opens only its own, and a call whose keys
	// all live on other masters is sent as usual. A call is sent only when
	// the breakers of all its keys' masters let it through; a failure
	// counts against the master of the key that failed (StoreError's Key,
	// a take's Subject), or against every master of the call when it
	// cannot be placed. A slot that moves (failover, resharding: go-redis
	// follows MOVED and ASK and reloads its map) is routed to its new
	// master's breaker from the next call; Forget drops the breakers left
	// behind. It must be quick (it runs on every call, once per slot) and
	// safe for concurrent use; "" is a master too (the unknown one). nil:
	// one breaker for the whole store (a single Redis).
	MasterOf func(key string) string
	// Name names the one breaker of a store without MasterOf (the Redis
	// address, for llmguard_breaker_state{master}); "" by default.
	Name string
	// OnCall, when set, is called after every call with its outcome and
	// latency, from the caller's goroutine.
	OnCall func(Call)
}

// GuardStats counts what a Guarded store did since it was created.
type GuardStats struct {
	State BreakerState
	// Calls counts calls by operation and result, e.g.
	// Calls[OpTake][ResultRejected].
	Calls [numOps][numResults]uint64
	// Errors counts failed calls (ResultFailed) by kind, e.g.
	// Errors[KindTimeout].
	Errors [numKinds]uint64
	// Opened counts the transitions to BreakerOpen.
	Opened uint64
}

// Guarded is a Store that protects its callers from a slow or failing
// store: every call runs with its own short deadline inside a circuit
// breaker (sony/gobreaker), which opens when failures reach
// GuardOptions.FailureRatio of the calls in the last Window (at least
// MinCalls of them), or MinCalls calls in a row fail. While it is open
// every call fails at once with ErrUnavailable, so no request waits for a
// store that is down; after OpenFor it lets Probes calls through, and
// closes when they succeed. A denial and ErrVoided (returned as is) are
// successes, and ErrInvalid (a caller's mistake, returned as is) neither
// trips nor heals the breaker. With GuardOptions.MasterOf (a Redis
// Cluster) each master has a breaker of its own, as above: a call is sent
// when the breakers of all its keys' masters let it through, so one master
// down fails only the calls with a key on it (Breakers, Forget).
//
// It is safe for concurrent use. Create one with NewGuarded; the zero
// Guarded is not usable. It implements BatchReconciler, so that an
// AsyncReconciler over it pipelines its batches (when the wrapped store
// batches) and holds them while the store is unavailable.
type Guarded struct {
	store   Store
	batcher BatchReconciler // store, when it batches
	o       GuardOptions

	single  *breaker // the one breaker, when o.MasterOf is nil
	mu      sync.RWMutex
	masters map[string]*breaker // by master, when o.MasterOf is set

	calls  [numOps][numResults]atomic.Uint64
	errs   [numKinds]atomic.Uint64
	opened atomic.Uint64
}

var (
	_ Store           = (*Guarded)(nil)
	_ BatchReconciler = (*Guarded)(nil)
)

// NewGuarded returns a Guarded over store, configured by o, with its
// breaker closed.
func NewGuarded(store Store, o GuardOptions) *Guarded {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ReconcileTimeout <= 0 {
		o.ReconcileTimeout = 100 * time.Millisecond
	}
	if o.MinCalls == 0 {
		o.MinCalls = 20
	}
	if !(o.FailureRatio > 0 && o.FailureRatio <= 1) {
		o.FailureRatio = 0.5
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
	if o.OpenFor <= 0 {
		o.OpenFor = 2 * time.Second
	}
	if o.Probes == 0 {
		o.Probes = 1
	}
	g := &Guarded{store: store, o: o}
	g.batcher, _ = store.(BatchReconciler)
	if o.MasterOf == nil {
		g.single = g.newBreaker(o.Name)
	} else {
		g.masters = make(map[string]*breaker)
	}
	return g
}

// readyToTrip is the breaker's rule on the counts of its window: minCalls
// failures in a row, or a share of failures of at least ratio among at
// least minCalls calls that ended.
func readyToTrip(c gobreaker.Counts, minCalls uint32, ratio float64) bool {
	if c.ConsecutiveFailures >= minCalls {
		return true
	}
	ended := c.TotalSuccesses + c.TotalFailures
	return ended >= minCalls && float64(c.TotalFailures) >= ratio*float64(ended)
}

func stateOf(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// State returns the breaker's state now (moving it from open to half-open
// when OpenFor has passed); with GuardOptions.MasterOf, the worst of the
// masters' breakers (open, then half-open, then closed: closed when there
// is none yet). Breakers tells them apart.
func (g *Guarded) State() BreakerState {
	if g.o.MasterOf == nil {
		return g.single.state()
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	worst := BreakerClosed
	for _, b := range g.masters {
		worst = max(worst, b.state())
	}
	return worst
}

// Stats returns the counters and the breaker's state. Safe to call at any
// time, but not from OnStateChange.
func (g *Guarded) Stats() GuardStats {
	s := GuardStats{State: g.State(), Opened: g.opened.Load()}
	for op := range g.calls {
		for r := range g.calls[op] {
			s.Calls[op][r] = g.calls[op][r].Load()
		}
	}
	for k := range g.errs {
		s.Errors[k] = g.errs[k].Load()
	}
	return s
}

// Take implements Store within Timeout. Items are checked first: invalid
// ones fail at once with an error wrapping ErrInvalid, whatever the
// breaker's state. ErrVoided is returned as the store gave it. Every other
// error wraps ErrUnavailable, and the store's error (a failure, which the
// store may still have applied: see MayHaveApplied) or the failure that
// opened the breaker and ErrNotSent (a rejection); the Decision is then the
// zero value, but for a *PartialError: with ctx marked by WithPartial, a
// take whose keys span several masters (GuardOptions.MasterOf), some of
// whose breakers are not closed, is sent for the items of the others
// (takeServed), and a take the store served in part is returned as it is.
// Guarded does not void a failed take: an AsyncReconciler over it does.
func (g *Guarded) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	if err := validateItems(items); err != nil {
		g.count(OpTake, ResultInvalid, KindNone, 0)
		return Decision{}, err
	}
	var d Decision
	var buf [4]*breaker
	brs := g.breakersOf(buf[:0], len(items), func(i int) string { return items[i].Key })
	err := g.do(ctx, OpTake, g.o.Timeout, brs, func(ctx context.Context) error {
		var err error
		d, err = g.store.Take(ctx, requestID, items)
		return err
	})
	if err != nil {
		if len(brs) > 1 && errors.Is(err, ErrNotSent) && PartialAllowed(ctx) {
			return g.takeServed(ctx, requestID, items, err)
		}
		if AsPartial(err) != nil {
			return d, err
		}
		return Decision{}, err
	}
	return d, nil
}

// takeServed is Take for a caller that takes partial takes (WithPartial)
// when rejected, the error of the call that was not sent because the
// breaker of one of its masters (GuardOptions.MasterOf) is not closed: the
// items on masters whose breakers are closed are taken in one call (its
// breakers asked again), the others are Failed in the *PartialError
// returned with the Decision over the served items (see PartialError).
// rejected is returned as it is when no item, or every item, is on a
// master whose breaker is closed (a half-open breaker's probe taken by
// another call), and the served part's error when it failed whole. The
// request counts as two calls in Stats and OnCall: the rejected one and
// the served part's.
func (g *Guarded) takeServed(ctx context.Context, requestID string, items []Item, rejected error) (Decision, error) {
	var failed, at []int
	served := make([]Item, 0, len(items))
	for i := range items {
		if k := items[i].Key; g.breakerOf(k, slotOf(k)).state() != BreakerClosed {
			failed = append(failed, i)
			continue
		}
		served = append(served, items[i])
		at = append(at, i)
	}
	if len(served) == 0 || len(failed) == 0 {
		return Decision{}, rejected
	}
	brs := g.breakersOf(nil, len(served), func(i int) string { return served[i].Key })
	var sd Decision
	err := g.do(ctx, OpTake, g.o.Timeout, brs, func(ctx context.Context) error {
		var err error
		sd, err = g.store.Take(ctx, requestID, served)
		return err
	})
	pe := AsPartial(err)
	if err != nil && pe == nil {
		return Decision{}, err
	}
	d := Decision{Allowed: sd.Allowed, DeniedBy: -1, TooLarge: sd.TooLarge, RetryAfter: sd.RetryAfter, Buckets: make([]Status, len(items))}
	if !sd.Allowed && sd.DeniedBy >= 0 && sd.DeniedBy < len(at) {
		d.DeniedBy = at[sd.DeniedBy]
	}
	for j, st := range sd.Buckets {
		d.Buckets[at[j]] = st
	}
	if sd.Windows != nil {
		d.Windows = make([]time.Time, len(items))
		for j, w := range sd.Windows {
			d.Windows[at[j]] = w
		}
	}
	out := &PartialError{Failed: failed, Err: rejected}
	if pe != nil {
		for _, j := range pe.Failed {
			out.Failed = append(out.Failed, at[j])
		}
		slices.Sort(out.Failed)
		out.Err, out.causes = err, pe.causes // the served part's failure: it may have been applied
	}
	return d, out
}

// Reconcile implements Store within ReconcileTimeout. Deltas are checked
// first: invalid ones fail at once with an error wrapping ErrInvalid. Every
// other error wraps ErrUnavailable, as Take's. A failed call may have been
// applied (the reply was lost): a retry with the same requestID is then a
// no-op.
func (g *Guarded) Reconcile(ctx context.Context, requestID string, deltas []Delta) error {
	if err := validateDeltas(requestID, deltas); err != nil {
		g.count(OpReconcile, ResultInvalid, KindNone, 0)
		return err
	}
	var buf [4]*breaker
	brs := g.breakersOf(buf[:0], len(deltas), func(i int) string { return deltas[i].Key })
	return g.do(ctx, OpReconcile, g.o.ReconcileTimeout, brs, func(ctx context.Context) error {
		return g.store.Reconcile(ctx, requestID, deltas)
	})
}

// Void implements Store within ReconcileTimeout, counted as OpReconcile.
// requestID and items are checked first: invalid ones fail at once with an
// error wrapping ErrInvalid. Every other error wraps ErrUnavailable, as
// Take's; a retry is safe.
func (g *Guarded) Void(ctx context.Context, requestID string, items []Item) error {
	if err := validateVoid(requestID, items); err != nil {
		g.count(OpReconcile, ResultInvalid, KindNone, 0)
		return err
	}
	var buf [4]*breaker
	brs := g.breakersOf(buf[:0], len(items), func(i int) string { return items[i].Key })
	return g.do(ctx, OpReconcile, g.o.ReconcileTimeout, brs, func(ctx context.Context) error {
		return g.store.Void(ctx, requestID, items)
	})
}

// ReconcileBatch implements BatchReconciler: one call (one round trip
// when the wrapped store batches) within ReconcileTimeout, for the valid
// elements whose masters' breakers let it through; an invalid element gets
// its error wrapping ErrInvalid, and one with a key on a master whose
// breaker is open (GuardOptions.MasterOf) the rejection (ErrUnavailable,
// ErrNotSent), and neither is sent: an AsyncReconciler holds the rejected
// ones until that master is back while the others land. Each master's
// breaker counts the call as a success when an element with a key on it
// was applied, as a failure when none was and one that failed is placed on
// it (StoreError's Key; unplaced: on every master of the element), and not
// at all otherwise; a store with one breaker counts a failure only when
// every element sent failed (the store is down). An element that fails
// while others were applied keeps its own error, wrapped with
// ErrUnavailable only when it says that part of the store could not be
// reached (partUnavailable: in a Redis Cluster, the master of its keys is
// down or failing over), so that an AsyncReconciler holds it through the
// failover instead of spending its attempts. When every element sent
// failed, their errors wrap ErrUnavailable.
func (g *Guarded) ReconcileBatch(ctx context.Context, batch []Reconciliation) []error {
	start := time.Now()
	errs := make([]error, len(batch))
	background, _ := ctx.Value(backgroundKey{}).(bool)
	probe, _ := ctx.Value(probeKey{}).(bool)
	// The breakers of the valid elements, each let through (or not) once.
	var all []*breaker
	var done []func(error)
	var refused []error // by all's index: the rejection, nil when let through
	elemBrs := make([][]*breaker, len(batch))
	send := make([]Reconciliation, 0, len(batch))
	at := make([]int, 0, len(batch)) // at[j]: the batch element of send[j]
	var rejectedBy string
	for i, rc := range batch {
		if errs[i] = rc.validate(); errs[i] != nil {
			continue
		}
		elemBrs[i] = g.breakersOf(nil, len(rc.Deltas), func(j int) string { return rc.Deltas[j].Key })
		for _, b := range elemBrs[i] {
			k := slices.Index(all, b)
			if k < 0 {
				k = len(all)
				all = append(all, b)
				d, rej := g.allow(b, OpReconcile, background)
				done, refused = append(done, d), append(refused, rej)
			}
			if refused[k] != nil && errs[i] == nil {
				errs[i], rejectedBy = refused[k], b.master
			}
		}
		if errs[i] == nil {
			send = append(send, rc)
			at = append(at, i)
		}
	}
	if len(send) == 0 {
		release(done, nil)
		if len(all) > 0 {
			g.report(Call{Op: OpReconcile, Result: ResultRejected, Probe: probe, Master: g.routed(rejectedBy)})
		}
		return errs
	}
	sent := make([]error, len(send))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.o.ReconcileTimeout)
	if g.batcher != nil {
		copy(sent, g.batcher.ReconcileBatch(cctx, send))
	} else {
		for j, rc := range send {
			if rc.Void {
				sent[j] = g.store.Void(cctx, rc.RequestID, takenBy(rc.Deltas))
			} else {
				sent[j] = g.store.Reconcile(cctx, rc.RequestID, rc.Deltas)
			}
		}
	}
	cancel()
	allFailed := true
	var first error
	for _, err := range sent {
		if err == nil {
			allFailed = false
		} else if first == nil {
			first = err
		}
	}
	// Each breaker's outcome: applied (an element on it was), failed (none
	// was, and a failure is placed on it), or not counted.
	const (
		notCounted = iota
		failedOn
		appliedOn
	)
	outcome := make([]uint8, len(all))
	cause := make([]error, len(all))
	for j, i := range at {
		brs := elemBrs[i]
		if sent[j] == nil {
			for _, b := range brs {
				outcome[slices.Index(all, b)] = appliedOn
			}
			continue
		}
		blamed := g.blame(sent[j], brs)
		for bi, b := range brs {
			k := slices.Index(all, b)
			if (blamed < 0 || blamed == bi) && outcome[k] == notCounted {
				outcome[k], cause[k] = failedOn, sent[j]
			}
		}
	}
	var failedMaster string
	for k, b := range all {
		switch {
		case done[k] == nil: // rejected: nothing to report to it
		case outcome[k] == appliedOn:
			b.succeeded()
			done[k](nil)
		case outcome[k] == failedOn && (g.o.MasterOf != nil || allFailed):
			b.fail(cause[k])
			failedMaster = b.master
			if background {
				done[k](uncountedError{cause[k]})
			} else {
				done[k](cause[k])
			}
		default:
			done[k](uncountedError{errNotCounted})
		}
	}
	for j, i := range at {
		switch {
		case sent[j] == nil:
		case allFailed || partUnavailable(sent[j]):
			// The store did not serve this element's keys: in a cluster,
			// their master is down or failing over.
			errs[i] = &unavailableError{op: OpReconcile, cause: sent[j]}
		default:
			errs[i] = sent[j]
		}
	}
	c := Call{Op: OpReconcile, Result: ResultOK, Duration: time.Since(start), Probe: probe}
	if allFailed {
		c.Result, c.Kind, c.Err, c.Master = ResultFailed, KindOf(first), first, g.routed(failedMaster)
	}
	g.report(c)
	return errs
}

// errNotCounted is what a breaker is told of a call it let through whose
// failure was placed on another master's: counted neither way.
var errNotCounted = errors.New("bucket: failure placed on another master")

// release tells every breaker whose done is in done that its call was not
// made (counted neither way: a half-open breaker's probe slot is freed).
// cause, when not nil, is the reason given.
func release(done []func(error), cause error) {
	for _, d := range done {
		if d != nil {
			d(uncountedError{cmp.Or(cause, errNotCounted)})
		}
	}
}

// allow asks b to let a call of op through: it returns the func that
// reports the call's outcome, or the rejection to return (ErrUnavailable,
// ErrNotSent, b's last failure). A background call (withBackground) is
// let through only by a closed breaker (a charge-back must not take a
// half-open breaker's probe) and, with GuardOptions.MasterOf, only to a
// master whose last call did not fail (BreakerStatus.Failing: a probe or a
// request's call clears it), so that a flush does not wait out the
// timeout of a master that is failing before its breaker opens. (With one
// breaker the caller checks that itself: the app flushes only after a
// call succeeded.)
func (g *Guarded) allow(b *breaker, op Op, background bool) (func(error), error) {
	var err error
	if background && (b.state() != BreakerClosed || g.o.MasterOf != nil && b.failing.Load()) {
		err = gobreaker.ErrOpenState
	} else {
		var done func(error)
		if done, err = b.cb.Allow(); err == nil {
			return done, nil
		}
	}
	return nil, &unavailableError{op: op, cause: b.last(err), rejected: true, state: b.state(), master: g.routed(b.master)}
}

// routed is master for a store with GuardOptions.MasterOf, "" for one
// without (its one breaker is named by Name, not a master).
func (g *Guarded) routed(master string) string {
	if g.o.MasterOf == nil {
		return ""
	}
	return master
}

// blame returns the index in brs of the breaker a failure err is placed
// on: the master of the key err names (StoreError's Key, or a take's
// Subject, the key of the slot group that failed), or -1 when it names
// none of brs' masters (the failure counts against each of them). A call
// with one breaker is placed on it.
func (g *Guarded) blame(err error, brs []*breaker) int {
	if len(brs) == 1 {
		return 0
	}
	var se *StoreError
	if !errors.As(err, &se) {
		return -1
	}
	key := se.Key
	if key == "" && se.Op == "take" {
		key = se.Subject
	}
	if key == "" {
		return -1
	}
	master := g.o.MasterOf(key)
	return slices.IndexFunc(brs, func(b *breaker) bool { return b.master == master })
}

// blameEach places each of causes (the failures of the parts of a take
// served in part) on the breaker of brs blame names: out[i] is the first
// cause placed on brs[i], nil when none was. A cause blame places on none
// is placed on every breaker without one.
func (g *Guarded) blameEach(causes []error, brs []*breaker) []error {
	out := make([]error, len(brs))
	var unplaced error
	for _, c := range causes {
		if i := g.blame(c, brs); i >= 0 {
			if out[i] == nil {
				out[i] = c
			}
		} else if unplaced == nil {
			unplaced = c
		}
	}
	if unplaced != nil {
		for i := range out {
			if out[i] == nil {
				out[i] = unplaced
			}
		}
	}
	return out
}

// partUnavailable reports whether err, the failure of one element of a
// batch the store otherwise served, says that the part of the store holding
// the element's keys could not serve it — a timeout or a broken or refused
// connection (KindOf); a Redis Cluster reply sent while the slot's master
// is down, failing over or moving (CLUSTERDOWN, TRYAGAIN, MOVED, ASK,
// MASTERDOWN, LOADING, READONLY: the go-redis error predicates); or a
// master that refuses every write for now: at its maxmemory with
// noeviction (OOM), short of its min-replicas-to-write (NOREPLICAS), or
// running a script past busy-reply-threshold (BUSY) — rather than that
// the store refused the element (a script error, a key of the wrong type),
// which a retry would not heal. (adv42: OOM and NOREPLICAS from one master
// of a real cluster spent the element's attempts, and its delta was
// dropped, while the same replies to a whole batch held it.)
func partUnavailable(err error) bool {
	if k := KindOf(err); k == KindTimeout || k == KindConnection {
		return true
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.IsClusterDownError(err) || redis.IsTryAgainError(err) ||
		redis.IsMasterDownError(err) || redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.IsOOMError(err) || redis.IsNoReplicasError(err) || busyReply(err)
}

// busyReply reports whether err is Redis's BUSY reply ("BUSY Redis is busy
// running a script…"), which every command but SCRIPT KILL, FUNCTION KILL
// and SHUTDOWN NOSAVE gets while a script or function runs past
// busy-reply-threshold (Redis docs, "busy-reply-threshold"). BUSYGROUP and
// BUSYKEY, refusals of one command, are not it.
func busyReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "BUSY ")
}

// do runs call, whose keys live on the masters of brs, through their
// breakers with its own deadline: sent only when every one lets it
// through. It counts the outcome on each (a failure on the master blame
// places it on, the others not counted; a take served in part counts each
// failed part's failure on its own master: blameEach) and returns the
// error to give the caller.
func (g *Guarded) do(ctx context.Context, op Op, timeout time.Duration, brs []*breaker, call func(context.Context) error) error {
	start := time.Now()
	background, _ := ctx.Value(backgroundKey{}).(bool)
	probe, _ := ctx.Value(probeKey{}).(bool)
	var buf [4]func(error)
	done := buf[:0]
	for _, b := range brs {
		d, rej := g.allow(b, op, background)
		if rej != nil {
			release(done, nil)
			g.report(Call{Op: op, Result: ResultRejected, Duration: time.Since(start), Probe: probe, Master: g.routed(b.master)})
			return rej
		}
		done = append(done, d)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	inner := call(cctx)
	cancel()
	c := Call{Op: op, Result: ResultOK, Probe: probe}
	err := inner
	switch {
	case inner == nil || errors.Is(inner, ErrVoided):
		for i, b := range brs {
			b.succeeded()
			done[i](inner)
		}
	case errors.Is(inner, ErrInvalid):
		c.Result = ResultInvalid
		release(done, inner)
	default:
		c.Result, c.Kind, c.Err = ResultFailed, KindOf(inner), inner
		blamed := g.blame(inner, brs)
		var each []error // a take served in part: each failed part's cause, on its master
		if pe := AsPartial(inner); pe != nil && len(pe.causes) > 1 && len(brs) > 1 {
			each, blamed = g.blameEach(pe.causes, brs), -2
		}
		for i, b := range brs {
			if each != nil && each[i] == nil || blamed >= 0 && i != blamed {
				done[i](uncountedError{errNotCounted})
				continue
			}
			cause := inner
			if each != nil {
				cause = each[i]
			}
			b.fail(cause)
			if c.Master == "" {
				c.Master = g.routed(b.master)
			}
			if background {
				done[i](uncountedError{cause})
			} else {
				done[i](cause)
			}
		}
		err = &unavailableError{op: op, cause: inner}
	}
	c.Duration = time.Since(start)
	g.report(c)
	return err
}

// unavailableError is the error Guarded returns for a call the store could
// not serve: it wraps ErrUnavailable and cause, the store's own error, or
// for a call the breaker rejected (rejected) ErrNotSent and cause, the
// failure that opened the breaker. Its text names the operation once: a
// store's error is a *StoreError (found with errors.As) whose Op and
// Subject it takes in place of repeating the store's text, which Guarded's
// prefix used to do ("bucket: take: store unavailable: bucket: take \"k\":
// dial …").
type unavailableError struct {
	op       Op
	cause    error
	rejected bool
	state    BreakerState // the breaker's state, when rejected
	master   string       // the rejecting breaker's master (GuardOptions.MasterOf), when rejected
}

// Error reads `bucket: take "k": store unavailable: dial tcp …` for a
// store's failure (cause a StoreError{Op: "take", Subject: "k", Err: dial
// tcp …}), and `bucket: take: store unavailable: not sent to the store:
// breaker open (last failure: take "k": dial tcp …)` for a rejected call.
// A cause that is no StoreError is quoted whole after the head.
func (e *unavailableError) Error() string {
	head := "bucket: " + e.op.String()
	var se *StoreError
	if !errors.As(e.cause, &se) {
		if e.rejected {
			return fmt.Sprintf("%s: %v: %v: breaker %s%s (last failure: %v)", head, ErrUnavailable, ErrNotSent, e.state, e.ofMaster(), e.cause)
		}
		return head + ": " + ErrUnavailable.Error() + ": " + e.cause.Error()
	}
	// rest is the store's error without its package: `take "k": dial …`.
	rest := se.text()
	if e.rejected {
		// The key in rest is that of the call that failed, not this one's.
		return fmt.Sprintf("%s: %v: %v: breaker %s%s (last failure: %s)", head, ErrUnavailable, ErrNotSent, e.state, e.ofMaster(), rest)
	}
	if se.Op != e.op.String() {
		return head + ": " + ErrUnavailable.Error() + ": " + rest
	}
	if se.Subject != "" {
		head += " " + strconv.Quote(se.Subject)
	}
	return head + ": " + ErrUnavailable.Error() + ": " + fmt.Sprint(se.Err)
}

// ofMaster is " of master <addr>" for a rejection by one master's breaker,
// else "".
func (e *unavailableError) ofMaster() string {
	if e.master == "" {
		return ""
	}
	return " for master " + e.master
}

// Unwrap returns ErrUnavailable, ErrNotSent when the call was rejected, and
// the cause.
func (e *unavailableError) Unwrap() []error {
	if e.rejected {
		return []error{ErrUnavailable, ErrNotSent, e.cause}
	}
	return []error{ErrUnavailable, e.cause}
}

// count records one call's outcome and reports it to OnCall.
func (g *Guarded) count(op Op, result Result, kind ErrorKind, d time.Duration) {
	g.report(Call{Op: op, Result: result, Kind: kind, Duration: d})
}

// report counts c and reports it to OnCall.
func (g *Guarded) report(c Call) {
	op, result, kind := c.Op, c.Result, c.Kind
	g.calls[op][result].Add(1)
	if kind != KindNone {
		g.errs[kind].Add(1)
	}
	if g.o.OnCall != nil {
		g.o.OnCall(c)
	}
}
