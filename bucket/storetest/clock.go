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
