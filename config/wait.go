package config

import (
	"time"

	"github.com/llmguard/llmguard/spec"
)

// WaitQueue bounds the requests held waiting by limits with on_limit: wait.
// Each waiting request holds its handler goroutine, its connection and its
// body (the body counted against max_inflight_body_bytes) until it is
// admitted, refused or its client leaves; a request that finds its queue
// full is refused at once (429), never held.
type WaitQueue struct {
	// PerBucket is the most requests waiting for one bucket (one limit's
	// bucket of one key, user, tenant or the global one) on this node.
	// Default 64, at most MaxWaitQueue.
	PerBucket int `yaml:"per_bucket"`
	// Total is the most requests waiting on this node, all buckets
	// together. Default 1024, at least PerBucket, at most MaxWaitQueue.
	Total int `yaml:"total"`
}

// Waiting bounds and defaults.
const (
	// DefaultMaxWait is limits[].max_wait when on_limit is wait.
	DefaultMaxWait = 2 * time.Second
	// MaxLimitWait is the longest max_wait: a held request keeps a
	// connection, a goroutine and its body, and clients time out.
	MaxLimitWait = 60 * time.Second
	// DefaultWaitPerBucket and DefaultWaitTotal are wait_queue's defaults.
	DefaultWaitPerBucket = 64
	DefaultWaitTotal     = 1024
	// MaxWaitQueue bounds wait_queue.per_bucket and wait_queue.total.
	MaxWaitQueue = 1 << 16
)

// applyWaitDefaults fills on_limit, max_wait and wait_queue.
func (c *Config) applyWaitDefaults() {
	for i := range c.Limits {
		l := &c.Limits[i]
		if l.OnLimit == "" {
			l.OnLimit = spec.OnLimitFail.String()
		}
		if l.Waits() && l.MaxWait == 0 {
			l.MaxWait = Duration(DefaultMaxWait)
		}
	}
	if c.WaitQueue.PerBucket == 0 {
		c.WaitQueue.PerBucket = DefaultWaitPerBucket
	}
	if c.WaitQueue.Total == 0 {
		c.WaitQueue.Total = max(DefaultWaitTotal, c.WaitQueue.PerBucket)
	}
}

// checkWait reports a bad on_limit or max_wait of limit l at field f.
func checkWait(p *problems, f string, l Limit) {
	o, ok := spec.ParseOnLimit(l.OnLimit)
	switch {
	case l.OnLimit != "" && !ok:
		p.notOneOf(f+".on_limit", l.OnLimit, spec.OnLimitNames())
	case o == spec.OnLimitFail: // "" too: the default
		if l.MaxWait != 0 {
			p.add(f+".max_wait", "only with on_limit: wait")
		}
	case o == spec.OnLimitWait: // max_wait 0: the default, DefaultMaxWait
		if u, ok := spec.ParseUnit(l.Unit); ok && u == spec.UnitConcurrent {
			// A slot frees when a response ends, at no time a take can
			// compute: nothing to wait for.
			p.add(f+".on_limit", "wait is not supported on in-flight limits (unit: concurrent); their 429 says Retry-After: 1")
		}
		checkDuration(p, f+".max_wait", l.MaxWait)
		if time.Duration(l.MaxWait) < time.Millisecond && l.MaxWait > 0 {
			p.add(f+".max_wait", "at least 1ms (got %s)", time.Duration(l.MaxWait))
		}
		if time.Duration(l.MaxWait) > MaxLimitWait {
			p.add(f+".max_wait", "at most %s (got %s)", MaxLimitWait, time.Duration(l.MaxWait))
		}
	}
}

// Waits reports whether a request l denies waits for it (on_limit: wait,
// spec.OnLimitWait) rather than failing at once.
func (l Limit) Waits() bool { return l.OnLimit == spec.OnLimitWait.String() }

// checkWaitQueue reports bad wait_queue bounds (0: the default).
func checkWaitQueue(p *problems, q WaitQueue) {
	if q.PerBucket < 0 || q.PerBucket > MaxWaitQueue {
		p.add("wait_queue.per_bucket", "must be 1 to %d (got %d)", MaxWaitQueue, q.PerBucket)
	}
	if q.Total < 0 || q.Total > MaxWaitQueue {
		p.add("wait_queue.total", "must be 1 to %d (got %d)", MaxWaitQueue, q.Total)
	} else if q.Total > 0 && q.Total < q.PerBucket {
		p.add("wait_queue.total", "must be at least per_bucket (%d, got %d)", q.PerBucket, q.Total)
	}
}
