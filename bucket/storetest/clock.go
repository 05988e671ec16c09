package storetest

import (
	"sync"
	"time"
)

// Clock is the time the suite steers and a store under test reads. It only
// moves when Set is called; it may be set backwards. Safe for concurrent use.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	hooks []func(time.Time)
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the instant last set. It suits bucket.MemoryOptions.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forwards or backwards, then calls every OnSet
// hook with t, in the order they were added.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	hooks := c.hooks
	c.mu.Unlock()
	for _, h := range hooks {
		h(t)
	}
}

// OnSet calls f with the current instant now and with every later Set: a
// store whose clock lives elsewhere (miniredis SetTime) follows the suite's
// clock through it. f must not call Set.
func (c *Clock) OnSet(f func(time.Time)) {
	c.mu.Lock()
	c.hooks = append(c.hooks, f)
	now := c.now
	c.mu.Unlock()
	f(now)
}

// KeepUp returns next, or start plus the wall-clock time since wallStart
// if that is later, in whole microseconds (the scripts' resolution). A run
// that steers a store on a real Redis by an injected clock steps its clock
// through it, so that the injected clock never falls behind the wall
// clock: a bucket key's TTL (its time to full, plus 1 s) is counted by
// Redis on the wall clock from the injected time the script ran at, so an
// injected clock slower than the wall clock — a run stalled on a loaded
// machine — saw keys expire before their buckets were full, and an expired
// key is a full bucket: the run admitted more than its own clock's bound
// (TestShardedPropertyCluster at load 40: 6005 units against 6003).
// Never behind, the injected clock reaches a key's time to full no later
// in wall time than Redis expires it. Production has no such gap: its
// scripts read Redis TIME, the clock that counts the TTLs.
func KeepUp(next, start, wallStart time.Time) time.Time {
	floor := start.Add(time.Since(wallStart)).Truncate(time.Microsecond)
	if floor.After(next) {
		return floor
	}
	return next
}
