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

// Pacer steps an injected clock through a run that steers a store on a
// real Redis, so that the injected clock never moves less than the wall
// clock between two steps. A key's TTL (a bucket's time to full plus 1 s,
// an in-flight holder's lease plus 1 s) is counted by Redis on the wall
// clock from the write, at the injected instant the script ran at. An
// injected clock that fell behind the wall clock — a run stalled on a
// loaded machine — saw keys expire before their buckets were full, and an
// expired key is a full bucket: the run admitted more than its own clock's
// bound (TestShardedPropertyCluster at load 40: 6005 units against 6003).
// Kept only from falling behind the run's start plus the wall time since
// (KeepUp, before), a clock that had run ahead of the wall clock — random
// gaps adding up faster than the run took — moved by a gap of 0.1 s across
// a stall of seconds, and a key written just before the stall expired
// while the injected clock had barely moved (flake14). Stepped at least by
// the wall time between steps, the injected clock reaches a key's expiry
// no later in wall time than Redis expires it. Production has no such
// gap: its scripts read Redis TIME, the clock that counts the TTLs.
//
// Not safe for concurrent use.
type Pacer struct {
	last, lastWall time.Time
}

// NewPacer starts a Pacer at start (the injected clock's instant now).
func NewPacer(start time.Time) *Pacer {
	return &Pacer{last: start, lastWall: time.Now()}
}

// Step returns next, or the last step's instant plus the wall-clock time
// since that step if that is later, in whole microseconds (the scripts'
// resolution), and makes it the last step. Steps never go back: a next
// before the last step returns at least the last step.
func (p *Pacer) Step(next time.Time) time.Time {
	wall := time.Now()
	if floor := p.last.Add(wall.Sub(p.lastWall)).Truncate(time.Microsecond); floor.After(next) {
		next = floor
	}
	if next.Before(p.last) {
		next = p.last
	}
	p.last, p.lastWall = next, wall
	return next
}
