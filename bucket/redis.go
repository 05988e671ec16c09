package bucket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/lua"
)

// RedisScripter is what the Redis store needs of a client: running scripts
// (EVALSHA, EVAL, SCRIPT LOAD, as redis.Script uses them) and pipelines.
// *redis.Client and *redis.ClusterClient satisfy it. A client that also
// has FCall and FunctionLoad (both of those do) has the scripts loaded as
// one Redis Functions library and called by FCALL (see Redis).
type RedisScripter interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// RedisOptions configures NewRedis. Client is required; the zero value of
// every other field is a documented default.
type RedisOptions struct {
	// Client runs the scripts. Size its pool for the load: every Take and
	// Reconcile holds one connection for one round trip (in a cluster, a
	// Take one per slot group, at once, each on its group's master).
	Client RedisScripter
	// Now overrides the clock, for tests only: its reading (µs) is passed to
	// the scripts. nil, the default, has every script read Redis TIME, one
	// clock for every proxy node.
	Now func() time.Time
	// Cluster runs one script per hash slot of a request's keys, as Redis
	// Cluster requires (see Redis). A *redis.ClusterClient is detected, so
	// set it only for another client of a cluster; false, the default,
	// sends each request's keys to one script.
	Cluster bool
	// DedupFor is how long Reconcile remembers a request id (the TTL of its
	// marker key); 0 means ten minutes. It is kept at whole milliseconds of
	// at least one.
	DedupFor time.Duration
	// VoidFor is the void window: the TTL of the take marker a committed
	// take with a request id leaves for Void (one key per slot group, "t"),
	// and of a Void's tombstone ("v"); 0 means DefaultVoidWindow. It is kept
	// at whole milliseconds of at least one.
	VoidFor time.Duration
	// TakeBatch is how many concurrent takes of one hash slot (of the one
	// Redis, outside a cluster) may share one script call: a take is sent
	// at once when no take of its slot is in flight, and the takes that
	// queue behind one go together when it returns (see Redis). 0 means
	// DefaultTakeBatch; 1 sends every take alone.
	TakeBatch int
	// Log receives the store's rare events, each once when it happens: the
	// Functions library loaded again after a call found it missing (Warn),
	// the store turned to EVALSHA for good because the server has no
	// FCALL or FUNCTION for this client (Warn), and a panic recovered in
	// the background give-back of a failed cluster take (Error). nil, the
	// default, logs nothing.
	Log *slog.Logger
}

// Redis is a Store that keeps every bucket in Redis, so that any number of
// proxy processes share one budget per key: N processes against one Redis
// admit what one process would. It is safe for concurrent use. Create one
// with NewRedis and call Load at start-up; the zero Redis is not usable.
//
// Each Take is one script (lua/take.lua) over all of its keys, token buckets
// and quotas together: it refills and checks every bucket and commits every
// cost only when all can pay, with the same arithmetic, bit for bit, as the
// Memory store: one MGET reads every key (the take marker with the
// buckets), and a commit writes each changed key once. A take sent alone
// whose buckets are all token buckets goes in take.lua's lone layout (its
// marker TTL and limits as one text, read once per text by the library and
// kept, then its costs; see loneArgs) to the script's token-bucket path,
// with the same writes and reply. Reconciliations
// (lua/reconcile.lua) apply the deltas once per request id (a call of one
// reconciliation of a NewRequestID id on token buckets and quotas goes in
// the script's lone layout, see reconcileCall.loneArgs); ReconcileBatch
// applies many requests' in one script (one per slot in a cluster), reading
// and writing each bucket once however many requests touch it, so that an
// AsyncReconciler's batches cost Redis little more than a marker per
// request. Deltas of zero units are never sent. Time is Redis TIME. A token bucket's
// state is one string key, "<level> <updated µs>", that expires one second
// after the bucket would be full again; a bucket left full is deleted. A
// quota's is one string key, "q <used units> <window start µs>", that
// expires an hour after its window ends (so that late reconciliations still
// find it); a quota left with nothing used is deleted.
//
// In Redis Cluster, a request's keys may lie in several slots (a tenant's
// buckets share its hash tag, global buckets do not). Take then runs the
// script once per slot group, every group's call sent at once (each
// through its slot's batching, below), so that each master is asked in
// parallel and a master that does not answer costs the request that
// master's call only; the request is decided when every group has
// answered. When a group denies, the groups that took are refunded. So
// Redis Cluster never admits more than one Redis would, but a denied
// request holds the other groups' units for the instant until the refund,
// which may briefly deny another request (under-admission). On a denial
// a refunded group's statuses are what it held before its take, worked
// out from its take's reply (token buckets and quotas) or read again in
// the refunds' round trip (in-flight limits, window counters), so the
// Decision reports every bucket (retry-after, too-large, statuses) as one
// script would. A failed round trip leaves, at worst, units taken that
// refill in time: never over-admission. Each master reads its own TIME, so
// the buckets of one slot share one clock. Reconcile runs one script per
// slot group, each with its own marker, in one pipelined round trip; a
// batch, one script per slot of all its requests' groups.
//
// Concurrent takes are coalesced per hash slot (one Redis: one slot): a
// take whose slot has no call in flight is sent at once, alone (a lone
// caller never waits for a batch); the takes that arrive while one is in
// flight queue, and go, up to TakeBatch of them, in one script
// (lua/takebatch.lua) when it returns. Each is still its own all-or-nothing
// take, run in order of arrival as take.lua would run it alone, with its
// own reply; the script reads each key once and writes it once, so a
// tenant's or a global bucket that a batch's requests share costs one MGET
// and one SET per batch. A take whose context ends while it waits in the
// queue is never sent. A batch's call carries the latest of its takes'
// deadlines, each caller still stopping at its own; when the call fails,
// every take it carried gets the error (a script error applied none of
// them; a timeout may have applied all, as for a lone take, and each is
// voided by its request id).
//
// The scripts are one Redis Functions library (lua.Library, Redis 7.0 and
// later): Load loads it once per server by FUNCTION LOAD (on every master
// of a cluster; replicas get it by replication, and keep it through a
// failover), so that a call runs only its script's entry, by FCALL, not
// the whole script with every helper function made again as EVALSHA does
// (about a tenth of a lone take's instructions in Redis). Function names
// are global to a server, so the library's name and its functions' end in
// a hash of its text (lua.Version): nodes of two llmguard versions keep
// their own functions side by side during a rolling upgrade, and read and
// write the same stored values. A call answered "Function not found" (a
// server restarted without persistence, a FUNCTION FLUSH, a node new to a
// cluster) loads the library and is sent once more, then by EVALSHA; the
// calls that miss it together load it once. A server without FUNCTION
// (Redis before 7.0, miniredis), an ACL user refused FCALL or FUNCTION
// (NOPERM), or a client without FCall runs every script by EVALSHA, and by
// EVAL when Redis answers NOSCRIPT, as before. A function without flags may write, so
// Redis refuses its FCALL when used memory is above maxmemory with the
// noeviction policy (the Redis docs' "deny-oom" for functions), where an
// EVALSHA failed only at its first write: a take that would be denied then
// fails too; set an eviction policy or room for the buckets. (Redis docs:
// https://redis.io/docs/latest/develop/programmability/functions-intro/ for
// FUNCTION LOAD, FCALL, replication and persistence of libraries;
// https://redis.io/docs/latest/develop/programmability/eval-intro/#script-flags
// for flags; each checked against redis-server 7.0.15.)
//
// A Take with a request id that commits also sets its take marker,
// "llmguard:{<hash tag>}::tk:<request id>" = "t", one per slot group,
// expiring after VoidFor; Void (reconcile.lua in void mode) refunds each
// group whose marker says "t" and leaves "v" in every group, so that a take
// that reaches Redis after its Void finds "v" and applies nothing. A take
// of an id of NewRequestID's (the proxy's) that commits in a batch
// (takebatch.lua) records the id in the set of its slot's and epoch's ids
// taken, "llmguard:{<hash tag>}::tkt:<epoch>" (one SADD per set and batch,
// the set living VoidFor past its last write), instead of setting its
// marker key, which it does not read either: the Void of such an id counts
// a missing marker as "t" when the id is in that set, leaves "v" in the
// marker key as for any id, and adds the id to the set of its slot's and
// epoch's ids voided, "llmguard:{<hash tag>}::tkv:<epoch>" (living VoidFor
// past its last write), which a batch asks instead: one SCARD per set and
// batch, and only while the set exists (a void of its epoch came) one
// SMEMBERS when it holds no more ids than the batch has takes, else one
// SISMEMBER per take. The marker key is still written for a rolling upgrade:
// a node of the version before the voided set, whose batches read marker
// keys, sees a void of this version. A void of that older version writes
// only the marker key, which this version's batches do not read; it never
// reaches them, since a take and its void are sent by the node that made
// the id (its AsyncReconciler, in memory) and so run the same version's
// functions (TestVoidSetSeenByEveryTake).
//
// A Reconcile records its request id in its first delta's slot: an id of
// NewRequestID's (the proxy's) as a member of the set of its epoch's ids,
// "llmguard:{<hash tag>}::rcs:<epoch>" (epoch: the id's second / 10), read
// by one SMISMEMBER and written by one SADD per set and batch, the set
// living DedupFor past its last write; any other id as a key of its own,
// "llmguard:{<hash tag>}::rc:<request id>", SET NX with DedupFor. The form
// follows from the id alone, so every attempt of an id finds its marker;
// a node takes, voids and reconciles only the ids it made, so nodes of two
// versions never share one (an older version, which knows only marker
// keys, never sees a NewRequestID id).
type Redis struct {
	client    RedisScripter
	now       func() time.Time
	cluster   bool
	dedupFor  string // ms, for ARGV
	voidFor   string // ms, for ARGV
	take      *script
	reconcile *script
	takeBatch *script
	fns       functions
	takes     *takeBatcher
	log       *slog.Logger // never nil
	// periodMoved counts the reconciliations the script applied with a
	// quota's delta that applied to nothing (PeriodMoved).
	periodMoved atomic.Uint64
	// rcGeneric sends every reconciliation in reconcile.lua's batch
	// layout, a lone one too (see reconcileCall.loneArgs), so that tests
	// can compare the two; tests only.
	rcGeneric bool
}

var (
	_ Store           = (*Redis)(nil)
	_ BatchReconciler = (*Redis)(nil)
	_ RedisScripter   = (*redis.Client)(nil)
	_ RedisScripter   = (*redis.ClusterClient)(nil)
)

// NewRedis returns a Redis store configured by o. It does not talk to Redis:
// call Load to load the scripts. The error wraps ErrInvalid when o.Client is
// nil.
func NewRedis(o RedisOptions) (*Redis, error) {
	if o.Client == nil {
		return nil, fmt.Errorf("bucket: redis: no client: %w", ErrInvalid)
	}
	dedupFor := o.DedupFor
	if dedupFor <= 0 {
		dedupFor = 10 * time.Minute
	}
	voidFor := o.VoidFor
	if voidFor <= 0 {
		voidFor = DefaultVoidWindow
	}
	_, isCluster := o.Client.(*redis.ClusterClient)
	takeBatch := o.TakeBatch
	if takeBatch <= 0 {
		takeBatch = DefaultTakeBatch
	}
	r := &Redis{
		client:    o.Client,
		now:       o.Now,
		cluster:   o.Cluster || isCluster,
		dedupFor:  strconv.FormatInt(max(1, dedupFor.Milliseconds()), 10),
		voidFor:   strconv.FormatInt(max(1, voidFor.Milliseconds()), 10),
		take:      &script{fn: lua.TakeFunction, eval: redis.NewScript(lua.Take)},
		reconcile: &script{fn: lua.ReconcileFunction, eval: redis.NewScript(lua.Reconcile)},
		takeBatch: &script{fn: lua.TakeBatchFunction, eval: redis.NewScript(lua.TakeBatch)},
	}
	r.fns.client, _ = o.Client.(redisFunctions)
	r.fns.loading = make(chan struct{}, 1)
	r.takes = newTakeBatcher(r, takeBatch)
	r.log = o.Log
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Load loads the scripts into Redis, so that the first calls, and
// pipelined ones, find them: the library lua.Library by FUNCTION LOAD (on
// every master of a cluster) when the client can call functions (see
// Redis), else, or when Redis answers that it has no FUNCTION command
// (Redis before 7.0), each script by SCRIPT LOAD. Call it at start-up; a
// Redis that loses them later (a restart without persistence, a FUNCTION
// FLUSH or SCRIPT FLUSH, a new cluster node) has them loaded again by the
// first call that misses them. The error is Redis's or the network's.
func (r *Redis) Load(ctx context.Context) error {
	if r.fns.on() {
		err := r.loadLibrary(ctx)
		if err == nil {
			return nil
		}
		if !isUnknownCommand(err) {
			return fmt.Errorf("bucket: redis: function load: %w", err)
		}
	}
	for _, s := range []*script{r.take, r.reconcile, r.takeBatch} {
		if err := s.eval.Load(ctx, r.client).Err(); err != nil {
			return fmt.Errorf("bucket: redis: script load: %w", err)
		}
	}
	return nil
}

// Take implements Store in one round trip (in a cluster, one per slot
// group, all sent at once; a denial then adds the round trip that refunds
// the groups that took). Items must have valid limits, costs >= 0 and
// distinct keys; otherwise Take sends nothing and returns an error
// wrapping ErrInvalid. When requestID was voided (in any slot group) the
// take applies nothing and the error wraps ErrVoided. Other errors are
// Redis's, the network's or ctx's; the Decision is then the zero value. In
// a cluster, an error of one group has the groups that took refunded (best
// effort, in the background, within 100ms, so that the request is answered
// within ctx; with a request id, as a Void of each such group, so that the
// caller's Void does not refund it again). With ctx marked by WithPartial,
// a group that fails (but for ErrVoided) is left out instead and the other
// groups decide: when another group was served, the Decision over the
// served items comes with a *PartialError naming the failed items and
// holding each failed group's error (every group failed: the first
// failure, whole).
func (r *Redis) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	if err := validateItems(items); err != nil {
		return Decision{}, err
	}
	if err := validateHolders(requestID, items); err != nil {
		return Decision{}, err
	}
	if len(items) == 0 {
		return Decision{Allowed: true, DeniedBy: -1, Buckets: []Status{}}, nil
	}
	if r.cluster {
		if groups := groupBySlot(len(items), func(i int) string { return items[i].Key }); len(groups) > 1 {
			return r.takeGroups(ctx, requestID, items, groups)
		}
	}
	d := Decision{Buckets: make([]Status, len(items))}
	keys, args := r.takeArgs(requestID, items, nil, true)
	var slot uint16
	if r.cluster {
		slot = slotOf(items[0].Key)
	}
	reply, err := r.takes.do(ctx, slot, keys, args)
	if err == nil {
		err = decide(&d, reply, nil)
	}
	if err != nil {
		return Decision{}, &StoreError{Op: "take", Subject: items[0].Key, Err: err}
	}
	return d, nil
}

// Reconcile implements Store: one script (in a cluster, one per slot group,
// pipelined) applies the deltas, each group once per requestID. An empty
// requestID is never recorded, so such deltas apply on every call. Deltas
// of zero units are not sent; a group with no other records nothing (see
// ReconcileBatch). Deltas with an invalid limit fail the call before
// anything is sent, with an error wrapping ErrInvalid. Other errors are Redis's, the network's or ctx's; a
// failed call may have applied some groups, and a retry with the same
// requestID applies only the rest. Reconcile waits for Redis: wrap the store
// in an AsyncReconciler to keep it off the request's path.
func (r *Redis) Reconcile(ctx context.Context, requestID string, deltas []Delta) error {
	errs := r.ReconcileBatch(ctx, []Reconciliation{{RequestID: requestID, Deltas: deltas}})
	return errs[0]
}

// Void implements Store: one script (reconcile.lua in void mode; in a
// cluster one per slot group of items, pipelined) refunds each group whose
// take of requestID was applied and leaves every group voided, for VoidFor.
// An empty requestID or invalid items fail the call before anything is
// sent, with an error wrapping ErrInvalid. Other errors are Redis's, the
// network's or ctx's; a retry is safe.
func (r *Redis) Void(ctx context.Context, requestID string, items []Item) error {
	errs := r.ReconcileBatch(ctx, []Reconciliation{{RequestID: requestID, Deltas: refunds(items), Void: true}})
	return errs[0]
}

// ReconcileBatch implements BatchReconciler: it applies every element of
// batch as Reconcile (or Void) would, all in one round trip: one script
// (lua/reconcile.lua) carrying every element, in a cluster one per slot
// (pipelined), so that Redis reads and writes a bucket that many elements
// touch once per batch, and settles their deltas on it once: the refunds of
// every element applied, then the charges, the strictest order of the
// elements (never more generous than any order of separate Reconcile calls;
// order changes a result only through the clamps at capacity and at 0).
// Deltas of zero units change nothing and are not
// sent: an element with no other deltas sends nothing and records no
// request id (a retry of it is a no-op as well). A Void is always sent (its
// tombstone is needed even when its costs are zero). When a script fails,
// every element it carried gets its error; none of its writes happened (it
// reads every bucket before it writes anything).
func (r *Redis) ReconcileBatch(ctx context.Context, batch []Reconciliation) []error {
	errs := make([]error, len(batch))
	var calls []*reconcileCall
	bySlot := map[uint16]*reconcileCall{}
	callFor := func(slot uint16) *reconcileCall {
		if !r.cluster {
			slot = 0
		}
		c := bySlot[slot]
		if c == nil {
			c = r.newReconcileCall()
			bySlot[slot] = c
			calls = append(calls, c)
		}
		return c
	}
	for b, rc := range batch {
		if err := rc.validate(); err != nil {
			errs[b] = err
			continue
		}
		mode, deltas := modeReconcile, rc.Deltas
		if rc.Void {
			mode = modeVoid
		}
		if len(deltas) == 0 {
			continue
		}
		if !r.cluster {
			callFor(0).add(b, rc.RequestID, deltas, nil, mode)
			continue
		}
		for _, g := range groupBySlot(len(deltas), func(i int) string { return deltas[i].Key }) {
			callFor(g.slot).add(b, rc.RequestID, deltas, g.idx, mode)
		}
	}
	if len(calls) == 0 {
		return errs
	}
	sc := make([]scriptCall, len(calls))
	for k, c := range calls {
		keys, args := c.callArgs(r)
		sc[k] = scriptCall{script: r.reconcile, keys: keys, args: args}
	}
	r.run(ctx, sc)
	var moved []bool // by batch element: a quota's delta applied to nothing
	for k, c := range calls {
		err := sc[k].cmd.Err()
		if err == nil {
			moved = periodMovedIn(sc[k].cmd, c.owners, moved, len(batch))
			continue
		}
		for _, b := range c.owners {
			if errs[b] != nil {
				continue
			}
			op := "reconcile"
			if batch[b].Void {
				op = "void"
			}
			errs[b] = &StoreError{Op: op, Subject: batch[b].RequestID, Err: err, Key: c.keys()[0]}
		}
	}
	for _, m := range moved {
		if m {
			r.periodMoved.Add(1)
		}
	}
	return errs
}

// periodMovedIn marks in moved (made, of n elements, at the first) the
// batch element (owners: each entry's) of every entry that reconcile.lua's
// reply, read from cmd, says applied with a quota's delta applying to
// nothing (2), and returns moved. It reads the reply the client has
// parsed, allocating nothing when no entry says 2.
func periodMovedIn(cmd *redis.Cmd, owners []int, moved []bool, n int) []bool {
	reply, _ := cmd.Val().([]any)
	for i, v := range reply {
		if x, _ := v.(int64); x == 2 && i < len(owners) {
			if moved == nil {
				moved = make([]bool, n)
			}
			moved[owners[i]] = true
		}
	}
	return moved
}

// PeriodMoved returns how many reconciliations (Reconcile, Void, each
// element of ReconcileBatch: settlements, voids, fallback charges) Redis
// applied since r was made with at least one quota delta that applied to
// nothing, because Redis already held a later window of that quota than
// the delta's (the period moved on: another node, its clock ahead, or this
// one, took in the next period first; Delta). Such units are not moved
// into the new period on purpose; this count makes them seen. A
// reconciliation split across slot groups counts once. Safe for
// concurrent use.
func (r *Redis) PeriodMoved() uint64 { return r.periodMoved.Load() }

// refundTimeout bounds the refund, in the background, of the slot groups
// a take applied when another group's call failed (takeGroups).
const refundTimeout = 100 * time.Millisecond

// groupAnswer is what one slot group's take (takeGroups) came back with:
// its Decision over its own items (Buckets shared with the request's), or
// the error of its call or of its reply.
type groupAnswer struct {
	d   Decision
	err error
	// before is, for an allowed take whose reply carries them
	// (statusesIn: a sliding window among its items), each sliding
	// window's prev and cur units before the take (2 numbers an item, in
	// the group's order); nil otherwise.
	before []int64
}

// takeGroups is Take over several slot groups: every group's take is sent
// at once, each committing its own items all or nothing, each through the
// take batching of its slot (takeBatcher.do), so that every master is
// asked in parallel and each call ends on its own, within ctx (one dead
// master costs the request that master's call, not the others'). When
// every group answers, the request is decided as one take over all items
// would be: every group allowed, admitted; a group denied, the groups
// that took are refunded in one round trip, and the denial is reported
// with every bucket's status, as Memory would report it (a group that
// took reports what it held before its take, as its reply says or worked
// out from it, statusesBefore; read again at
// cost zero in the refund's round trip only when neither tells it).
func (r *Redis) takeGroups(ctx context.Context, requestID string, items []Item, groups []group) (Decision, error) {
	d := Decision{Buckets: make([]Status, len(items))}
	answers := r.sendGroups(ctx, requestID, items, groups, d.Buckets)
	// With WithPartial, a group that fails is left out and the others
	// decide (PartialError); failed are its items, causes every failed
	// group's error in order (the breakers count each).
	partial := PartialAllowed(ctx)
	var failed []int
	var causes []error
	var stop error // a failure that fails the whole take
	var took []group
	var tookAt []int // each group of took's index in groups
	deniedAt := -1
	for gi, g := range groups {
		a := &answers[gi]
		switch {
		case a.err != nil:
			err := &StoreError{Op: "take", Subject: items[g.idx[0]].Key, Err: a.err}
			switch {
			case errors.Is(err, ErrVoided):
				// The request was voided: nothing else decides it.
				if stop == nil || !errors.Is(stop, ErrVoided) {
					stop = err
				}
			case partial:
				failed = append(failed, g.idx...)
				causes = append(causes, err)
			case stop == nil:
				stop = err
			}
		case a.d.Allowed:
			took = append(took, g)
			tookAt = append(tookAt, gi)
		default:
			if deniedAt < 0 {
				deniedAt = gi
			}
		}
	}
	if stop == nil && len(failed) == len(items) {
		return Decision{}, causes[0] // nothing served: a failure, whole
	}
	if stop != nil {
		if len(took) > 0 {
			// Those groups took: give their costs back, in the background
			// (at most refundTimeout), so that the request is answered
			// within its own deadline, not that plus the refund's. With a
			// request id each refund is the group's Void, so the caller's
			// Void of the request, which a failed take is given, refunds
			// nothing twice; without one this is the only refund (a
			// failure is not retried).
			calls := r.refunds(requestID, items, took)
			go func() {
				defer func() {
					// Best effort: units left taken refill in time; a panic
					// here must not end the process (no request recovers
					// it), but is not silent either.
					if p := recover(); p != nil {
						r.log.Error("redis: panic while giving back a failed take's served slot groups", "panic", fmt.Sprint(p))
					}
				}()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
				defer cancel()
				r.run(rctx, calls)
			}()
		}
		return Decision{}, stop
	}
	if deniedAt < 0 {
		d.Allowed, d.DeniedBy = true, -1
		d.Windows = groupWindows(answers, len(items))
		return d, partialOf(failed, causes)
	}
	// Denied: the first denying group's verdict, merged with every other
	// denying group's (Retry-After from the group that waits longest, a
	// too-large bucket first); the groups that took refunded in one round
	// trip.
	d = answers[deniedAt].d
	for gi := range groups {
		if a := &answers[gi]; gi != deniedAt && a.err == nil && !a.d.Allowed { // another denying group
			merge(&d, answers[gi].d)
		}
	}
	d.Windows = groupWindows(answers, len(items))
	if len(took) > 0 {
		// Each group that took reports what it held before its take,
		// worked out from its reply (statusesBefore; a sliding window's
		// from the counts the reply carries), else (a wait past the
		// scripts' cap) read again at cost zero after the refund.
		var reread []group
		for k, g := range took {
			if !statusesBefore(items, g.idx, d.Buckets, d.Windows, answers[tookAt[k]].before) {
				reread = append(reread, g)
			}
		}
		calls := append(r.refunds(requestID, items, took), r.rereads(items, reread)...)
		r.run(ctx, calls)
		if err := firstErr(calls); err != nil {
			return Decision{}, &StoreError{Op: "take", Subject: items[0].Key, Err: fmt.Errorf("refund: %w", err)}
		}
		for _, c := range calls {
			if c.script != r.take {
				continue
			}
			reply, _ := c.cmd.Int64Slice()
			e := Decision{Buckets: d.Buckets, Windows: d.Windows}
			if err := decide(&e, reply, c.idx); err != nil {
				return Decision{}, &StoreError{Op: "take", Subject: items[0].Key, Err: err}
			}
			d.Windows = e.Windows
			merge(&d, e)
		}
	}
	return d, partialOf(failed, causes)
}

// sendGroups sends the take of every group at once (the first on the
// caller's goroutine, each other on one of its own) and returns each
// group's answer, by position, once all have come back: each Decision
// writes its statuses into buckets (the request's, by item). A panic in a
// group's call is that group's error.
func (r *Redis) sendGroups(ctx context.Context, requestID string, items []Item, groups []group, buckets []Status) []groupAnswer {
	answers := make([]groupAnswer, len(groups))
	one := func(gi int) {
		g, a := groups[gi], &answers[gi]
		defer func() {
			if p := recover(); p != nil {
				a.err = fmt.Errorf("panic in the take of a slot group: %v", p)
			}
		}()
		keys, args := r.takeArgs(requestID, items, g.idx, true)
		reply, err := r.takes.do(ctx, g.slot, keys, args)
		if err == nil {
			a.d.Buckets = buckets
			err = decide(&a.d, reply, g.idx)
			a.before = statusesIn(reply, len(g.idx))
		}
		a.err = err
	}
	var wg sync.WaitGroup
	for gi := 1; gi < len(groups); gi++ {
		wg.Go(func() { one(gi) })
	}
	one(0)
	wg.Wait()
	return answers
}

// groupWindows joins the window starts of the groups' Decisions (each over
// all n items, nil when its group has no window counter) into one slice,
// or nil when no group has one.
func groupWindows(answers []groupAnswer, n int) []time.Time {
	var w []time.Time
	for _, a := range answers {
		if a.err != nil || a.d.Windows == nil {
			continue
		}
		if w == nil {
			w = make([]time.Time, n)
		}
		for i, t := range a.d.Windows {
			if !t.IsZero() {
				w[i] = t
			}
		}
	}
	return w
}

// partialOf is the PartialError of a take whose items at failed (in
// groups' order) failed, with causes, each failed group's error, in
// order; nil when none did.
func partialOf(failed []int, causes []error) error {
	if failed == nil {
		return nil
	}
	slices.Sort(failed)
	return &PartialError{Failed: failed, Err: causes[0], causes: causes}
}

// refunds returns the calls that give back each group's costs. With a
// request id each refund is the group's Void (its take marker then says
// voided, so a later Void of the request refunds nothing more); without,
// a reconcile with no marker.
func (r *Redis) refunds(requestID string, items []Item, groups []group) []scriptCall {
	var calls []scriptCall
	mode := modeRefund
	if requestID != "" {
		mode = modeVoid
	}
	for _, g := range groups {
		deltas := make([]Delta, len(g.idx))
		for j, i := range g.idx {
			deltas[j] = Delta{Key: items[i].Key, Limit: items[i].Limit, Units: -items[i].Cost}
		}
		c := r.newReconcileCall()
		c.add(0, requestID, deltas, nil, mode)
		calls = append(calls, scriptCall{script: r.reconcile, keys: c.keys(), args: c.args(r)})
	}
	return calls
}

// rereads returns the calls that check each group at cost zero for its
// statuses (run after the groups' refunds, in the same round trip).
func (r *Redis) rereads(items []Item, groups []group) []scriptCall {
	var calls []scriptCall
	for _, g := range groups {
		zero := make([]Item, len(g.idx))
		for j, i := range g.idx {
			zero[j] = Item{Key: items[i].Key, Limit: items[i].Limit}
		}
		keys, args := r.takeArgs("", zero, nil, false)
		calls = append(calls, scriptCall{script: r.take, keys: keys, args: args, idx: g.idx})
	}
	return calls
}

// merge folds the check of another slot group into d, as one take over all
// items would have decided: the first too-large bucket if any, else the
// short one that waits longest (of those that wait as long, the first in
// items' order, whichever group it is in).
func merge(d *Decision, e Decision) {
	if e.Allowed {
		return
	}
	switch {
	case e.TooLarge && (!d.TooLarge || e.DeniedBy < d.DeniedBy):
		d.DeniedBy, d.TooLarge, d.RetryAfter = e.DeniedBy, true, 0
	case !e.TooLarge && !d.TooLarge:
		if e.RetryAfter > d.RetryAfter || e.RetryAfter == d.RetryAfter && e.DeniedBy < d.DeniedBy {
			d.DeniedBy, d.RetryAfter = e.DeniedBy, e.RetryAfter
		}
	}
}

// takeArgs returns the KEYS and ARGV of take.lua for items (those at idx,
// when idx is not nil), with the take marker of requestID when it is not
// empty.
func (r *Redis) takeArgs(requestID string, items []Item, idx []int, commit bool) ([]string, []any) {
	n := len(items)
	if idx != nil {
		n = len(idx)
	}
	keys := make([]string, 0, n+1)
	args := make([]any, 3, 3+6*n)
	args[0], args[1], args[2] = r.nowArg(), "0", "0"
	if commit {
		args[1] = "1"
	}
	for j := range n {
		it := items[j]
		if idx != nil {
			it = items[idx[j]]
		}
		if j == 0 && requestID != "" {
			keys = append(keys, takeMarkerKey(it.Key, requestID))
			args[2] = r.voidFor
		}
		keys = append(keys, it.Key)
		args = appendLimit(args, it.Limit)
		args = append(args, it.Cost)
	}
	return keys, args
}

// scriptMode is how reconcile.lua applies its deltas.
type scriptMode uint8

const (
	modeRefund    scriptMode = iota // no marker: the deltas apply on every call
	modeReconcile                   // once per request id (none when it is empty)
	modeVoid                        // as the void of the request id's take
)

// reconcileCall is one run of reconcile.lua being built: the entries of
// one or more requests (in a cluster, of one slot), and what they share,
// each sent once: the distinct keys (KEYS), limits and shapes (mode, marker
// set, bucket keys and limits) their entries name.
type reconcileCall struct {
	now     string
	in      interner      // the distinct keys (KEYS, in order of first use), limits and shapes
	limits  []any         // 1 ARGV per distinct limit, its text (limitText)
	sets    []markerSet   // the marker sets of mode h, in order of first use
	setOf   index[string] // the marker sets' keys, numbered as sets
	shapes  []any         // per shape: mode, set (modes h, w), count, then key and limit index per delta
	entries []any         // per run of entries of one shape: shape index, run length, then per entry: marker index (modes r, v, w), id (mode w), units per delta
	run     int           // the index in entries of the last run's length
	runOf   int           // the shape of the last run (0: none yet)
	owners  []int         // the batch element of each entry
	first   rcFirst       // the first entry as add was given it (see loneArgs)
	sig     []byte        // scratch: the signature of the shape being added
	at      []int         // scratch: its key and limit indexes, two per delta

	// Room for a lone reconciliation's slices (newReconcileCall starts
	// them here), so that a call of one or two entries grows none of them
	// through three allocations each.
	sigBuf     [24]byte
	atBuf      [8]int
	limitsBuf  [4]any
	shapesBuf  [12]any
	entriesBuf [12]any
	ownersBuf  [2]int
	setsBuf    [1]markerSet
}

// markerSet is a marker set of mode h in a reconcileCall: its key's index
// among KEYS and the request ids of its entries, in entry order.
type markerSet struct {
	key int
	ids []any
}

// newReconcileCall returns a call with no entries yet.
func (r *Redis) newReconcileCall() *reconcileCall {
	c := &reconcileCall{now: r.nowArg()}
	c.sig, c.at, c.limits, c.shapes = c.sigBuf[:0], c.atBuf[:0], c.limitsBuf[:0], c.shapesBuf[:0]
	c.entries, c.owners, c.sets = c.entriesBuf[:0], c.ownersBuf[:0], c.setsBuf[:0]
	return c
}

// keys is the call's KEYS: every distinct key its entries name, in order
// of first use.
func (c *reconcileCall) keys() []string { return c.in.keys.items }

// callArgs returns the call's KEYS and ARGV as the store sends them: in
// the lone layout when c fits it (loneArgs), in the run layout when it
// fits that (runArgs), else in the batch layout.
func (c *reconcileCall) callArgs(r *Redis) ([]string, []any) {
	if !r.rcGeneric {
		if keys, args := c.loneArgs(r); args != nil {
			return keys, args
		}
		if keys, args := c.runArgs(r); args != nil {
			return keys, args
		}
	}
	return c.keys(), c.args(r)
}

// args returns the call's ARGV in the batch layout (see lua/reconcile.lua):
// inlineArgs with the entries' units moved into one last ARGV (packUnits).
func (c *reconcileCall) args(r *Redis) []any { return packUnits(c.inlineArgs(r)) }

// inlineArgs returns the call's ARGV in the batch layout of the scripts
// before the units were packed (reconcile.lua of d2d4679 to 03e3938): each
// entry's units, int64s, after its marker and id (the only int64s of the
// ARGV).
func (c *reconcileCall) inlineArgs(r *Redis) []any {
	n := 6 + len(c.limits) + 2*len(c.sets) + len(c.shapes) + len(c.entries)
	for _, s := range c.sets {
		n += len(s.ids)
	}
	args := make([]any, 0, n)
	args = append(args, c.now, r.dedupFor, r.voidFor, len(c.limits), c.in.shapes.len(), len(c.sets))
	args = append(args, c.limits...)
	for _, s := range c.sets {
		args = append(args, s.key, len(s.ids))
		args = append(args, s.ids...)
	}
	args = append(args, c.shapes...)
	return append(args, c.entries...)
}

// add appends to c the entry of requestID's deltas (those at idx, when idx
// is not nil) in mode, for batch element owner: its marker key (none for
// modeRefund, or modeReconcile with an empty requestID; for modeReconcile
// and an id of NewRequestID's, the marker set of its epoch, the id then
// sent in that set's list), named in the slot of its first delta, then its deltas
// of non-zero units. An entry of
// modeReconcile or modeRefund with no such delta is not added.
func (c *reconcileCall) add(owner int, requestID string, deltas []Delta, idx []int, mode scriptMode) {
	n := len(deltas)
	if idx != nil {
		n = len(idx)
	}
	at := func(j int) Delta {
		if idx != nil {
			return deltas[idx[j]]
		}
		return deltas[j]
	}
	count := 0
	for j := range n {
		if at(j).Units != 0 {
			count++
		}
	}
	e := rcEntry{mode: 'n'}
	switch {
	case mode == modeVoid:
		e.mode, e.marker = 'v', takeMarkerKey(at(0).Key, requestID)
		if epoch, ok := markerEpoch(requestID); ok {
			e.mode, e.set, e.id = 'w', takenSetKey(at(0).Key, epoch), requestID
			e.voided = voidedSetKey(at(0).Key, epoch)
		}
	case count == 0:
		return
	case mode == modeReconcile && requestID != "":
		if epoch, ok := markerEpoch(requestID); ok {
			e.mode, e.set, e.id = 'h', markerSetKey(at(0).Key, epoch), requestID
		} else {
			e.mode, e.marker = 'r', markerKey(at(0).Key, requestID)
		}
	}
	c.entry(owner, e, n, at)
	if len(c.owners) == 1 {
		c.first = rcFirst{mode: e.mode, set: e.set, id: requestID, deltas: deltas, idx: idx}
	}
}

// rcEntry is what an entry of reconcile.lua names besides its deltas: its
// mode ('r', 'h', 'v', 'w' or 'n'), its own marker key (modes r, v, w),
// its marker set's key and its request id (modes h, w), and its voided
// set's key (mode w).
type rcEntry struct {
	mode        byte
	marker, set string
	id          string
	voided      string
}

// entry appends to c, for batch element owner, the entry e with the n
// deltas at(0) … at(n-1) (those of non-zero units): its shape, added when
// new, then its marker index, id and units.
func (c *reconcileCall) entry(owner int, e rcEntry, n int, at func(int) Delta) {
	sig := append(c.sig[:0], e.mode)
	set := 0
	switch {
	case e.mode == 'h':
		set = c.markerSet(e.set)
		c.sets[set-1].ids = append(c.sets[set-1].ids, e.id)
		sig = binary.AppendUvarint(sig, uint64(set))
	case e.set != "":
		set = c.key(e.set)
		sig = binary.AppendUvarint(sig, uint64(set))
	}
	voided := 0
	if e.mode == 'w' {
		voided = c.key(e.voided)
		sig = binary.AppendUvarint(sig, uint64(voided))
	}
	c.at = c.at[:0]
	for j := range n {
		dl := at(j)
		if dl.Units == 0 {
			continue
		}
		k, l := c.key(dl.Key), c.limit(dl.Limit)
		c.at = append(c.at, k, l)
		sig = binary.AppendUvarint(binary.AppendUvarint(sig, uint64(k)), uint64(l))
	}
	c.sig = sig
	shape, added := c.in.shape(sig)
	if added {
		c.shapes = append(c.shapes, string(e.mode))
		if e.set != "" {
			c.shapes = append(c.shapes, set)
		}
		if e.mode == 'w' {
			c.shapes = append(c.shapes, voided)
		}
		c.shapes = append(c.shapes, len(c.at)/2)
		for _, i := range c.at {
			c.shapes = append(c.shapes, i)
		}
	}
	c.owners = append(c.owners, owner)
	if shape == c.runOf {
		c.entries[c.run] = c.entries[c.run].(int) + 1
	} else {
		c.runOf, c.run = shape, len(c.entries)+1
		c.entries = append(c.entries, shape, 1)
	}
	if e.marker != "" {
		c.entries = append(c.entries, c.key(e.marker))
	}
	if e.mode == 'w' {
		c.entries = append(c.entries, e.id)
	}
	for j := range n {
		if dl := at(j); dl.Units != 0 {
			c.entries = append(c.entries, dl.Units)
		}
	}
}

// markerSet returns the index (from 1) of the marker set key among c's
// sets of mode h, adding it.
func (c *reconcileCall) markerSet(key string) int {
	i, added := c.setOf.add(key)
	if added {
		c.sets = append(c.sets, markerSet{key: c.key(key)})
	}
	return i
}

// key returns the index (from 1) of key among c's KEYS, adding it.
func (c *reconcileCall) key(key string) int { return c.in.key(key) }

// limit returns the index (from 1) of l among c's limits, adding it.
func (c *reconcileCall) limit(l Limit) int {
	a := limitArgs(l)
	i, added := c.in.limit(a)
	if added {
		c.limits = append(c.limits, limitText(a[0], a[1], a[2], a[3], a[4]))
	}
	return i
}

// appendLimit appends l to a script's ARGV as both scripts read it:
// capacity, rate, per (µs), windowStart (µs), windowEnd (µs). A token bucket
// sends a window of 0 and 0; a quota a rate and per of 0 (unused); a window
// counter a rate of 0, the window its delta's take counted in as
// windowStart (-1: the current window) and windowEnd windowSliding or
// windowFixed.
func appendLimit(args []any, l Limit) []any {
	a := limitArgs(l)
	return append(args, a[0], a[1], a[2], a[3], a[4])
}

// limitArgs is l as both scripts read it (see appendLimit).
func limitArgs(l Limit) [5]int64 {
	if l.Concurrent { // rate 0 marks it (see lua/core.lua kindOf)
		return [5]int64{l.Capacity, 0, l.slotLease(), 0, 0}
	}
	if l.IsWindow() {
		_, per, taken, sliding := l.windowed()
		code := int64(windowFixed)
		if sliding {
			code = windowSliding
		}
		return [5]int64{l.Capacity, 0, per, taken, code}
	}
	if l.IsQuota() {
		_, windowStart, windowEnd := l.window()
		return [5]int64{l.Capacity, 0, 0, windowStart, windowEnd}
	}
	return [5]int64{l.Capacity, l.Rate, int64(l.Per / time.Microsecond), 0, 0}
}

// The windowEnd codes of a window counter in the scripts' ARGV (core.lua).
const (
	windowSliding = -1
	windowFixed   = -2
)

// nowArg is ARGV[1] of both scripts: the override clock in µs, or "" for
// Redis TIME.
func (r *Redis) nowArg() string {
	if r.now == nil {
		return ""
	}
	return strconv.FormatInt(r.now().UnixMicro(), 10)
}

// decide reads a take.lua reply into d: the verdict (for the items at idx,
// when not nil, mapping the script's indexes back) and one Status per key;
// or ErrVoided for the reply of a voided take. An allowed take's counts
// before it, which the reply carries when a bucket is a sliding window
// (take.lua's reply), are left to statusesIn.
func decide(d *Decision, reply []int64, idx []int) error {
	if len(reply) == 1 && reply[0] == -1 {
		return ErrVoided
	}
	n := len(d.Buckets)
	if idx != nil {
		n = len(idx)
	}
	// A window counter among the buckets: their windows follow (and, after
	// an allowed take with a sliding window, the counts before it).
	windows := len(reply) == 4+3*n || len(reply) == 4+5*n && reply[0] == 1
	if len(reply) != 4+2*n && !windows {
		return fmt.Errorf("unexpected reply of %d numbers", len(reply))
	}
	at := func(j int) int {
		if idx == nil {
			return j
		}
		return idx[j]
	}
	d.Allowed = reply[0] == 1
	d.DeniedBy = -1
	if !d.Allowed {
		d.DeniedBy = at(int(reply[1]))
	}
	d.TooLarge = reply[2] == 1
	d.RetryAfter = time.Duration(reply[3]) * time.Microsecond
	for j := range n {
		d.Buckets[at(j)] = Status{Remaining: reply[4+2*j], Reset: time.Duration(reply[5+2*j]) * time.Microsecond}
	}
	if windows {
		if d.Windows == nil {
			d.Windows = make([]time.Time, len(d.Buckets))
		}
		for j := range n {
			if w := reply[4+2*n+j]; w != 0 {
				d.Windows[at(j)] = time.UnixMicro(w).UTC()
			}
		}
	}
	return nil
}

// statusesIn returns the counts before the take that an allowed take.lua
// reply of n buckets carries after its windows when a bucket is a sliding
// window (2 numbers a bucket: each sliding window's prev and cur units,
// slid to now's window; 0 and 0 for the others), or nil when it carries
// none.
func statusesIn(reply []int64, n int) []int64 {
	if len(reply) != 4+5*n || reply[0] != 1 {
		return nil
	}
	return reply[4+3*n:]
}

// scriptCall is one script run of a pipelined round trip.
type scriptCall struct {
	script *script
	keys   []string
	args   []any
	idx    []int // the items a take covers, for decide
	cmd    *redis.Cmd
}

// run runs calls, one by one (by call) when there is one, else in one
// pipeline of FCALLs (EVALSHAs without Functions); a call that meets a
// missing function or script (Redis restarted or flushed) is run again
// alone by call, which loads it. Errors are left in each call's cmd.
func (r *Redis) run(ctx context.Context, calls []scriptCall) {
	if len(calls) == 1 {
		c := &calls[0]
		c.cmd = r.call(ctx, c.script, c.keys, c.args...)
		return
	}
	pipe := r.client.Pipeline()
	for k := range calls {
		c := &calls[k]
		c.cmd = r.pipelined(ctx, pipe, c.script, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // errors are in each cmd
	for k := range calls {
		c := &calls[k]
		if needsRerun(c.cmd.Err()) {
			c.cmd = r.call(ctx, c.script, c.keys, c.args...)
		}
	}
}

func firstErr(calls []scriptCall) error {
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

// packUnits returns args with its int64s (the units of reconcile.lua's
// entries: nothing else of its layout is an int64; takebatch.lua's
// layout packs its ints too, packNumbers) taken out, in order, and
// appended as one last ARGV that holds them packed, as core.lua's
// unitsOf reads them: each 8 bytes,
// the IEEE 754 double float64(units) little-endian (float64 rounds an
// int64 to the nearest double, ties to even, as strtod rounds its decimal
// text: the script gets the numbers "text + 0" gave it). The ARGV is
// empty when args has no int64. It reuses args's array.
func packUnits(args []any) []any {
	n := 0
	for _, a := range args {
		if _, ok := a.(int64); ok {
			n++
		}
	}
	packed := make([]byte, 0, 8*n)
	out := args[:0]
	for _, a := range args {
		if u, ok := a.(int64); ok {
			packed = binary.LittleEndian.AppendUint64(packed, math.Float64bits(float64(u)))
			continue
		}
		out = append(out, a)
	}
	return append(out, string(packed))
}
