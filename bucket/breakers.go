package bucket

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// MasterRouter names the Redis master that holds a key now: in a Redis
// Cluster, the address ("host:port") of the master serving the key's hash
// slot in the client's current slot map. A Guarded store (GuardOptions.
// MasterOf) and a ChargeBack (its Store, when it implements it) use it to
// give each master its own circuit breaker and its own charges.
type MasterRouter interface {
	// MasterOf returns the master of key; "" when the store has one
	// breaker (a single Redis) or the master is not known (no slot map).
	MasterOf(key string) string
}

// BreakerStatus is one circuit breaker of a Guarded store, as Breakers
// reports it.
type BreakerStatus struct {
	// Master is the address of the Redis master the breaker covers
	// (GuardOptions.MasterOf), or GuardOptions.Name for the one breaker
	// of a store without MasterOf.
	Master string
	// State is the breaker's state now.
	State BreakerState
	// Failing: the last call that reached this master failed (its breaker
	// may still be closed: it opens after GuardOptions.MinCalls failures).
	Failing bool
	// ProbeKey is a key of a hash slot last routed to this master (for the
	// one breaker, "llmguard:{probe}:breaker"): a cost-0 take of it, which
	// writes nothing, probes the master (BreakerStatus.Failing, a breaker
	// not closed).
	ProbeKey string
}

// breaker is the circuit breaker of one Redis master (or of the whole
// store), with the run of failures and the last failure gobreaker does not
// keep. Safe for concurrent use.
type breaker struct {
	master string
	cb     *gobreaker.TwoStepCircuitBreaker[struct{}]

	lastMu  sync.Mutex
	lastErr error // the last failure, wrapped by rejections

	// run counts the failures since the last success, the last state
	// change or creation. gobreaker's own ConsecutiveFailures is kept in
	// its rolling window and loses a run's failures older than it; this
	// one is not. Read and written only by the breaker's callbacks, which
	// gobreaker calls under its mutex.
	run     atomic.Uint32
	failing atomic.Bool   // the last call that reached the master failed
	slot    atomic.Uint32 // a slot last routed here, for its probe key and Forget
}

// newBreaker returns a closed breaker for master, configured by g.o.
func (g *Guarded) newBreaker(master string) *breaker {
	o := g.o
	b := &breaker{master: master}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         master,
		MaxRequests:  o.Probes,
		Interval:     o.Window,
		BucketPeriod: max(o.Window/10, time.Millisecond),
		Timeout:      o.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return b.run.Load() >= o.MinCalls || readyToTrip(c, o.MinCalls, o.FailureRatio)
		},
		// gobreaker asks this once per call that ended in the current
		// generation and was not excluded, just before it counts the call
		// and (on a failure in the closed state) asks ReadyToTrip.
		IsSuccessful: func(err error) bool {
			ok := err == nil || errors.Is(err, ErrVoided)
			if ok {
				b.run.Store(0)
			} else {
				b.run.Add(1)
			}
			return ok
		},
		IsExcluded: func(err error) bool {
			_, uncounted := err.(uncountedError)
			return uncounted || errors.Is(err, ErrInvalid)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.run.Store(0)
			if to == gobreaker.StateOpen {
				g.opened.Add(1)
			}
			if o.OnStateChange != nil {
				o.OnStateChange(master, stateOf(from), stateOf(to))
			}
		},
	})
	return b
}

// state is b's state now (moving it from open to half-open when OpenFor
// has passed).
func (b *breaker) state() BreakerState { return stateOf(b.cb.State()) }

// succeeded records that a call reached b's master and was served. The
// flag is written only when it changes: every call of every request reads
// it, and a store to it on each would bounce its cache line between cores.
func (b *breaker) succeeded() {
	if b.failing.Load() {
		b.failing.Store(false)
	}
}

// fail records err, a failure of a call that reached b's master. A
// *PartialError is recorded as its Err: the rejections that wrap the last
// failure must not read as a take served in part.
func (b *breaker) fail(err error) {
	if pe := AsPartial(err); pe != nil {
		err = pe.Err
	}
	b.failing.Store(true)
	b.lastMu.Lock()
	b.lastErr = err
	b.lastMu.Unlock()
}

// last is the failure that rejections wrap: the last one recorded, or
// fallback when none was (the breaker never opened on a failure).
func (b *breaker) last(fallback error) error {
	b.lastMu.Lock()
	defer b.lastMu.Unlock()
	if b.lastErr == nil {
		return fallback
	}
	return b.lastErr
}

// breakerOf returns the breaker of the master of key, in hash slot slot
// (slotOf(key), which the caller has), made closed on first use. Only for
// a store with GuardOptions.MasterOf (breakersOf gives the one breaker
// otherwise).
func (g *Guarded) breakerOf(key string, slot uint16) *breaker {
	master := g.o.MasterOf(key)
	g.mu.RLock()
	b := g.masters[master]
	g.mu.RUnlock()
	if b == nil {
		g.mu.Lock()
		if b = g.masters[master]; b == nil {
			b = g.newBreaker(master)
			g.masters[master] = b
		}
		g.mu.Unlock()
	}
	if s := uint32(slot); b.slot.Load() != s {
		b.slot.Store(s) // written when it changes: every call reads it
	}
	return b
}

// breakersOf appends to brs the distinct breakers of n keys (key(i)) and
// returns it, in the order of each one's first key.
func (g *Guarded) breakersOf(brs []*breaker, n int, key func(i int) string) []*breaker {
	if g.o.MasterOf == nil {
		return append(brs, g.single)
	}
	var last uint16
	for i := range n {
		k := key(i)
		s := slotOf(k)
		if i > 0 && s == last {
			continue // a tenant's keys share their slot: routed once
		}
		last = s
		if b := g.breakerOf(k, s); !slices.Contains(brs, b) {
			brs = append(brs, b)
		}
	}
	return brs
}

// MasterOf implements MasterRouter with GuardOptions.MasterOf: "" when it
// is nil (one breaker for the whole store).
func (g *Guarded) MasterOf(key string) string {
	if g.o.MasterOf == nil {
		return ""
	}
	return g.o.MasterOf(key)
}

// Breakers returns every breaker the store has, sorted by master: the one
// breaker of a store without GuardOptions.MasterOf, else one per master a
// call was routed to and not forgotten since (Forget). Cheap enough to
// call at every scrape.
func (g *Guarded) Breakers() []BreakerStatus {
	brs := []*breaker{g.single}
	if g.o.MasterOf != nil {
		brs = g.masterBreakers()
	}
	out := make([]BreakerStatus, len(brs))
	for i, b := range brs {
		out[i] = BreakerStatus{Master: b.master, State: b.state(), Failing: b.failing.Load(), ProbeKey: g.probeKeyOf(b)}
	}
	slices.SortFunc(out, func(a, b BreakerStatus) int { return strings.Compare(a.Master, b.Master) })
	return out
}

// AnyFailing reports whether any breaker is not closed or had its
// master's last call fail: what Breakers would show as a State other than
// BreakerClosed or a Failing, without building the list (no allocation;
// a read lock on the masters' map, not the sort). A node's log of a run of
// failed calls asks it on each call that succeeds while the run lasts.
func (g *Guarded) AnyFailing() bool {
	if g.o.MasterOf == nil {
		return g.single.failing.Load() || g.single.state() != BreakerClosed
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, b := range g.masters {
		if b.failing.Load() || b.state() != BreakerClosed {
			return true
		}
	}
	return false
}

// probeKeyOf is the key a probe of b's master takes (BreakerStatus.ProbeKey).
func (g *Guarded) probeKeyOf(b *breaker) string {
	if g.o.MasterOf == nil {
		return singleProbeKey
	}
	return probeKeyIn(uint16(b.slot.Load()))
}

// singleProbeKey is the probe key of a store with one breaker.
const singleProbeKey = "llmguard:{probe}:breaker"

// probeTags caches, by slot, a hash tag of that slot (probeKeyIn).
var probeTags sync.Map // uint16 -> string

// probeKeyIn returns "llmguard:{probe-<n>}:breaker", the first n whose tag
// hashes to slot: a key no rule uses, in slot. About 16384 tries (a
// millisecond) the first time for a slot, then cached.
func probeKeyIn(slot uint16) string {
	if tag, ok := probeTags.Load(slot); ok {
		return "llmguard:{" + tag.(string) + "}:breaker"
	}
	for n := 0; ; n++ {
		tag := "probe-" + strconv.Itoa(n)
		if slotOf(tag) == slot {
			probeTags.Store(slot, tag)
			return "llmguard:{" + tag + "}:breaker"
		}
	}
}

// Forget drops the breakers of masters that no longer serve the slot last
// routed to them (a failover promoted a replica, or the slots were moved:
// a call to those slots now goes to the new master's breaker, and the old
// one, open for a master that is gone, would stay open for ever; the
// unknown master "" once the slot map is loaded). So the breakers are at
// most the cluster's masters and the unknown one. It returns the masters
// dropped. A store without GuardOptions.MasterOf has nothing to
// forget. Call it now and then (the app does at each probe tick): it only
// reads the client's slot map.
func (g *Guarded) Forget() []string {
	if g.o.MasterOf == nil {
		return nil
	}
	var gone []string
	for _, b := range g.masterBreakers() {
		if g.o.MasterOf(probeKeyIn(uint16(b.slot.Load()))) == b.master {
			continue
		}
		g.mu.Lock()
		if g.masters[b.master] == b {
			delete(g.masters, b.master)
			gone = append(gone, b.master)
		}
		g.mu.Unlock()
	}
	return gone
}

// masterBreakers is a copy of the per-master breakers (GuardOptions.
// MasterOf), taken under the read lock, in no order.
func (g *Guarded) masterBreakers() []*breaker {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Collect(maps.Values(g.masters))
}
