package bucket

import (
	"context"
	"time"

	"github.com/maypok86/otter/v2"
)

// DefaultDenyCacheKeys is how many keys' denials a DenyCache remembers at
// once unless told otherwise: 16384 entries of about 250 bytes each (the
// key, the denial, otter's node), some 4 MiB at most.
const DefaultDenyCacheKeys = 1 << 14

// DenyCacheOptions configures NewDenyCache. Window is required; the zero
// value of every other field is a documented default.
type DenyCacheOptions struct {
	// Window is the longest a denial is reused: a denial whose wait is w
	// answers from memory for min(w, Window). It must be positive.
	Window time.Duration
	// MaxKeys bounds the number of keys whose last denial is remembered;
	// past it the least used go first (otter's W-TinyLFU). 0 means
	// DefaultDenyCacheKeys.
	MaxKeys int
	// Now is this node's clock, which times the reuse; nil means time.Now.
	Now func() time.Time
	// OnCached, when set, is called with the denying item of every denial
	// answered from memory (to count them), once per request: of the tries
	// of one TakeSharded, only a cached denial that ends the take is
	// reported (an earlier try's is not the request's answer, and a later
	// try may admit it). It must not block.
	OnCached func(it Item)
}

// DenyCache is a Store that answers from memory, without a round trip, the
// takes that its store has just denied: when a take is denied with a wait
// w (Decision.RetryAfter) by bucket Key for a cost c, then for min(w,
// Window) every take that includes Key with a cost of at least c, under
// the same limit, is denied at once (Decision.Cached), by the item of
// those whose rest of w is the longest (the first of those that wait as
// long), with that rest of w as RetryAfter. It caches denials only, never
// admissions, so it can only under-admit: refills alone cannot let the
// bucket pay c (nor more) before w has passed, and other nodes' takes only
// lower it; what it may hold back is what refunds, reconciliations and
// voids give back to the bucket within the reuse, at most Window after the
// denial. A too-large denial (waiting cannot help) and a take with a cost
// above its capacity go to the store, which says so; so do a take of cost 0,
// Reconcile and Void, which change no denial. The memory kept is bounded
// (MaxKeys). Safe for concurrent use; create one with NewDenyCache and
// Close it when done.
//
// It suits the Redis stores, where it saves a round trip per denial of a
// hot key (llmguard wraps them in it: store.deny_cache). The memory store
// gains nothing from it: its take is a map lookup under a lock, no dearer
// than the cache's own lookup.
type DenyCache struct {
	Store
	window   time.Duration
	now      func() time.Time
	onCached func(Item)
	denials  *otter.Cache[string, denial]
}

var _ Store = (*DenyCache)(nil)

// denial is a key's last denial by the store.
type denial struct {
	cost   int64         // units denied; takes of at least this much are denied
	limit  Limit         // under this limit only
	status Status        // the bucket's, as the store reported it
	at     time.Time     // when the denial came back
	wait   time.Duration // the store's RetryAfter
	reuse  time.Duration // min(wait, Window)
}

// NewDenyCache wraps s. It panics when o.Window is not positive (a
// programming error: a zero window means no cache, so do not build one).
func NewDenyCache(s Store, o DenyCacheOptions) *DenyCache {
	if o.Window <= 0 {
		panic("bucket: NewDenyCache with a window that is not positive")
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultDenyCacheKeys
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &DenyCache{Store: s, window: o.Window, now: o.Now, onCached: o.OnCached}
	c.denials = otter.Must(&otter.Options[string, denial]{
		MaximumSize: o.MaxKeys,
		// An entry lives while it may answer; the cache's clock is the
		// node's (an expired entry is never read).
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, denial]) time.Duration { return e.Value.reuse }),
		Clock:            clock{o.Now},
		// Maintenance runs on the calling goroutine, amortized over the
		// writes, rather than in a goroutine per drain.
		Executor: func(fn func()) { fn() },
	})
	return c
}

// Take implements Store: a cached denial (see DenyCache) when one of items
// has one, else the store's take, whose denial is then remembered.
func (c *DenyCache) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	now := c.now()
	if i, e, ok := c.cached(items, now); ok {
		d := Decision{DeniedBy: i, Cached: true, RetryAfter: e.wait - now.Sub(e.at), Buckets: make([]Status, len(items))}
		d.Buckets[i] = e.status
		d.Buckets[i].Reset = max(0, e.status.Reset-now.Sub(e.at))
		if c.onCached != nil {
			if h, ok := ctx.Value(cachedTryKey{}).(*cachedTry); ok {
				h.report, h.item = c.onCached, items[i] // TakeSharded reports it if this try ends the take
			} else {
				c.onCached(items[i])
			}
		}
		return d, nil
	}
	d, err := c.Store.Take(ctx, requestID, items)
	if err == nil && !d.Allowed && !d.TooLarge && !d.Cached && d.RetryAfter > 0 && d.DeniedBy >= 0 && d.DeniedBy < len(items) {
		it := items[d.DeniedBy]
		at := c.now()
		c.denials.Set(it.Key, denial{cost: it.Cost, limit: it.Limit, status: d.Buckets[d.DeniedBy], at: at,
			wait: d.RetryAfter, reuse: min(d.RetryAfter, c.window)})
	}
	return d, err
}

// cached returns the item with a denial that still answers at now and
// waits longest (the first of those that wait as long: the denier the
// store names), unless an item is too large for its bucket (the store
// reports that).
func (c *DenyCache) cached(items []Item, now time.Time) (int, denial, bool) {
	hit, e := -1, denial{}
	for i, it := range items {
		if it.Cost > it.Limit.Capacity {
			return -1, denial{}, false
		}
		if it.Cost == 0 {
			continue
		}
		d, ok := c.denials.GetIfPresent(it.Key)
		if ok && it.Cost >= d.cost && now.Sub(d.at) < d.reuse && sameLimit(it.Limit, d.limit) &&
			(hit < 0 || d.wait-now.Sub(d.at) > e.wait-now.Sub(e.at)) {
			hit, e = i, d
		}
	}
	return hit, e, hit >= 0
}

// cachedTry holds the cached denial of one try of a TakeSharded, for
// TakeSharded to report (DenyCacheOptions.OnCached) only when that try ends
// the take with a denial: a request tried on several shards is one denial,
// or none when a later shard admits it (llmguard_denials_cached_total is
// read against the 429s). A DenyCache finds it in the take's context.
type cachedTry struct {
	report func(Item) // nil: this try was not answered by a DenyCache
	item   Item
}

// cachedTryKey is the context key of a TakeSharded's *cachedTry.
type cachedTryKey struct{}

// sameLimit reports whether a and b are the same bucket shape, windows
// compared as instants.
func sameLimit(a, b Limit) bool {
	return a.Capacity == b.Capacity && a.Rate == b.Rate && a.Per == b.Per && a.Algorithm == b.Algorithm &&
		a.WindowStart.Equal(b.WindowStart) && a.WindowEnd.Equal(b.WindowEnd)
}

// Close forgets every denial and stops the cache's goroutines; it does not
// close the store. It always returns nil.
func (c *DenyCache) Close() error {
	c.denials.InvalidateAll()
	c.denials.StopAllGoroutines()
	return nil
}

// clock is otter's view of the node's clock: no ticks, so no periodic
// clean-up goroutine (expired entries go at writes, and MaxKeys bounds them).
type clock struct{ now func() time.Time }

func (c clock) NowNano() int64                      { return c.now().UnixNano() }
func (c clock) Tick(time.Duration) <-chan time.Time { return nil }
