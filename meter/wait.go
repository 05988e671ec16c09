package meter

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
)

// Waiting instead of failing (limits[].on_limit: wait). A request denied by
// a limit that waits, whose wait (the Decision's RetryAfter) is within the
// limit's max_wait, joins the queue of the denying bucket's key on this
// node instead of being refused. The queue's head sleeps until its computed
// time, then takes again with one store call: admitted, it leaves and the
// next waiter becomes the head and takes at once; denied again, it sleeps
// again while its total wait stays within max_wait, and is refused once it
// cannot. Waiters behind the head block on a channel: no timer fires and no
// store call is made for them until their turn, except the one timer of
// their deadline. A request for a bucket that already has waiters queues
// behind them before its first take, so that it cannot take what the head
// is waiting for. Arrival order is per node: another node's requests take
// from the shared bucket when they can, as a request under a limit that
// does not wait does.

// WaitsOptions configures NewWaits. The zero value is a usable default.
type WaitsOptions struct {
	// PerBucket is the most requests waiting for one bucket key; a request
	// that finds its queue full is refused at once. Zero: 64.
	PerBucket int
	// Total is the most requests waiting on this node, every queue
	// together. Zero: 1024.
	Total int
	// After returns a channel that receives once d has passed on the
	// clock the meter's Options.Now reads, and a function that stops the
	// timer. nil: a time.Timer. Tests pass a manual clock's.
	After func(d time.Duration) (<-chan time.Time, func() bool)
	// Registerer, when set, receives the waiting metrics:
	//
	//	llmguard_wait_seconds{outcome}  histogram of the time requests were held, by how the
	//	                                wait ended: admitted, limited (its wait grew past
	//	                                max_wait), left (the client went away), full (its
	//	                                queue was full: held 0s)
	//	llmguard_waiting                requests held waiting now
	Registerer prometheus.Registerer
}

// Outcomes of a wait, the outcome label of llmguard_wait_seconds.
const (
	WaitAdmitted = "admitted"
	WaitLimited  = "limited"
	WaitLeft     = "left"
	WaitFull     = "full"
)

// Waits holds the per-bucket queues of waiting requests of one node. Each
// queue is FIFO; its first waiter (the head) is the only one that takes
// from the store. Safe for concurrent use; create one with NewWaits.
type Waits struct {
	perBucket, total int
	after            func(d time.Duration) (<-chan time.Time, func() bool)
	seconds          *prometheus.HistogramVec

	mu     sync.Mutex
	queues map[string][]*waiter
	n      int

	closed    chan struct{} // closed by Close: no request waits any more
	closeOnce sync.Once
}

// Close ends every wait, for shutdown: each waiting request is answered as
// if its max_wait had run out (429 with its Retry-After), so that its
// client retries elsewhere instead of the node holding it, and a request
// that would wait from now on is refused at once as if its queue were
// full. It never blocks; later calls do nothing.
func (w *Waits) Close() {
	w.closeOnce.Do(func() { close(w.closed) })
}

// waiter is one request in a queue: turn is closed when it becomes its
// queue's head.
type waiter struct {
	key  string
	turn chan struct{}
}

// NewWaits builds the waiting queues. Errors: registration conflicts from
// o.Registerer.
func NewWaits(o WaitsOptions) (*Waits, error) {
	if o.PerBucket <= 0 {
		o.PerBucket = 64
	}
	if o.Total <= 0 {
		o.Total = 1024
	}
	if o.After == nil {
		o.After = func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		}
	}
	w := &Waits{perBucket: o.PerBucket, total: o.Total, after: o.After, queues: map[string][]*waiter{},
		closed: make(chan struct{})}
	if o.Registerer != nil {
		w.seconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llmguard_wait_seconds",
			Help:    "Time requests were held waiting for their buckets (on_limit: wait), by how the wait ended.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60},
		}, []string{"outcome"})
		waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llmguard_waiting",
			Help: "Requests held waiting for their buckets now (on_limit: wait)."}, func() float64 { return float64(w.Len()) })
		for _, c := range []prometheus.Collector{w.seconds, waiting} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
		for _, o := range []string{WaitAdmitted, WaitLimited, WaitLeft, WaitFull} {
			w.seconds.WithLabelValues(o)
		}
	}
	return w, nil
}

// Len is the number of requests waiting now.
func (w *Waits) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// busy reports whether key's queue has waiters.
func (w *Waits) busy(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queues[key]) > 0
}

// join appends a waiter to key's queue; nil when the queue or the node is
// full. The first waiter of a queue gets its turn at once.
func (w *Waits) join(key string) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.closed:
		return nil // shutting down: refused as if full
	default:
	}
	q := w.queues[key]
	if len(q) >= w.perBucket || w.n >= w.total {
		return nil
	}
	wt := &waiter{key: key, turn: make(chan struct{})}
	if len(q) == 0 {
		close(wt.turn)
	}
	w.queues[key] = append(q, wt)
	w.n++
	return wt
}

// leave removes wt from its queue (nil: nothing); when wt was the head, the
// next waiter's turn comes.
func (w *Waits) leave(wt *waiter) {
	if wt == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[wt.key]
	for i, u := range q {
		if u != wt {
			continue
		}
		copy(q[i:], q[i+1:])
		q[len(q)-1] = nil
		q = q[:len(q)-1]
		w.n--
		if len(q) == 0 {
			delete(w.queues, wt.key)
			return
		}
		w.queues[wt.key] = q
		if i == 0 {
			close(q[0].turn)
		}
		return
	}
}

// observe records a wait of d that ended with outcome.
func (w *Waits) observe(outcome string, d time.Duration) {
	if w.seconds != nil {
		w.seconds.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

// isHead reports whether wt's turn has come.
func (wt *waiter) isHead() bool {
	select {
	case <-wt.turn:
		return true
	default:
		return false
	}
}

// minRetry is the shortest a head sleeps before it takes again, so that a
// denial that reports no wait (a quota whose window the store already saw
// end) cannot spin.
const minRetry = time.Millisecond

// waitsFor reports whether a rule of rules waits (on_limit: wait).
func waitsFor(rules []*policy.Rule) bool {
	for _, r := range rules {
		if r.MaxWait > 0 {
			return true
		}
	}
	return false
}

// waitBudget is how long x, just denied, may wait in all: the shortest
// max_wait of the rules that denied it; ok is false when one of them does
// not wait (or the denial is not one waiting can cure). A rule denied when
// its bucket's status shows less than its cost.
func (x *Exchange) waitBudget() (d time.Duration, ok bool) {
	if x.verdict != Denied {
		return 0, false
	}
	d = -1
	for _, a := range x.rules {
		if !a.Denied && (a.Reserved == 0 || a.Status.Remaining >= a.Reserved) {
			continue
		}
		if a.Rule.MaxWait <= 0 {
			return 0, false
		}
		if d < 0 || a.Rule.MaxWait < d {
			d = a.Rule.MaxWait
		}
	}
	return d, d > 0
}

// resetTake clears what a take set, before x takes again.
func (x *Exchange) resetTake() {
	x.verdict, x.decision, x.closedBy = Admitted, bucket.Decision{}, nil
	x.fallback, x.unlimited, x.warnings = false, false, nil
}

// Waited is how long the request was held waiting for its buckets
// (on_limit: wait), on the meter's clock (Options.Now); zero when it was
// not held.
func (x *Exchange) Waited() time.Duration { return x.waited }

// Held reports whether the request joined a wait queue, even for no time
// (see Waited).
func (x *Exchange) Held() bool { return x.held }

// takeOrWait takes x's reservation under rules (x.take) and, when a rule
// that waits denies it, holds it in the denying bucket's queue until the
// buckets can pay, its wait would pass max_wait, its queue is full, or its
// client leaves (Request.Watch; verdict Left).
func (m *Meter) takeOrWait(x *Exchange, rules []*policy.Rule) {
	w := m.opt.Waits
	if w == nil || !waitsFor(rules) {
		x.take(rules)
		return
	}
	s := waitRun{m: m, w: w, x: x, start: m.opt.Now()}
	defer s.end()
	// Arrival order: behind the waiters of a bucket this request would
	// take from, before any take.
	for _, r := range rules {
		if r.MaxWait <= 0 {
			continue
		}
		if key := r.ModelKey(x.req.Principal, x.quote.Label); w.busy(key) {
			if s.q = w.join(key); s.q == nil {
				s.full = true // refused below unless the take admits it
			} else {
				s.deadline = s.start.Add(r.MaxWait)
			}
			break
		}
	}
	var tookAt time.Time // when the last denial was taken; zero before any take
	for {
		if s.q != nil && !s.q.isHead() {
			switch s.block(s.q.turn, nil, s.deadline) {
			case left:
				return
			case expired:
				if tookAt.IsZero() {
					x.peekDenial(rules, s.q.key) // never taken: a status read for the answer, taking nothing
				} else {
					x.decision.RetryAfter = max(0, x.decision.RetryAfter-m.opt.Now().Sub(tookAt))
				}
				s.outcome = WaitLimited
				return
			}
		}
		x.resetTake()
		x.take(rules)
		tookAt = m.opt.Now()
		switch {
		case x.verdict == Admitted:
			s.outcome = WaitAdmitted
			return
		case x.verdict != Denied:
			return
		case s.full:
			s.outcome = WaitFull
			return
		}
		budget, ok := x.waitBudget()
		if !ok {
			s.outcome = WaitLimited
			return
		}
		if end := s.start.Add(budget); s.deadline.IsZero() || end.Before(s.deadline) {
			s.deadline = end
		}
		need := x.decision.RetryAfter
		if tookAt.Add(need).After(s.deadline) {
			s.outcome = WaitLimited
			return
		}
		if key := x.rules[x.decision.DeniedBy].Key; s.q == nil || s.q.key != key {
			w.leave(s.q)
			if s.q = w.join(key); s.q == nil {
				s.outcome = WaitFull
				return
			}
			if !s.q.isHead() {
				continue // its turn first, then a take
			}
		}
		c, stop := w.after(max(need, minRetry))
		r := s.block(nil, c, time.Time{})
		stop()
		switch r {
		case left:
			return
		case expired: // no deadline here: Close ended the wait; its last denial stands
			s.outcome = WaitLimited
			return
		}
	}
}

// waitRun is one request's wait: its queue, deadline and outcome.
type waitRun struct {
	m        *Meter
	w        *Waits
	x        *Exchange
	start    time.Time // on the meter's clock
	deadline time.Time // start + the shortest max_wait of the rules that denied it
	q        *waiter   // the queue it is in; nil when none
	joined   bool      // it joined a queue (set by block)
	full     bool      // its bucket's queue was full on arrival
	outcome  string    // how the wait ended, a Wait* outcome; "" when it never waited
	watched  bool      // Request.Watch was called
	gone     <-chan struct{}
	unwatch  func()
}

// Results of waitRun.block.
const (
	woke    = iota // turn or timer
	left           // the client left: verdict Left
	expired        // deadline passed
)

// block waits for turn or timer (either may be nil), the client leaving
// (which sets the verdict Left) or deadline (zero: none), whichever comes
// first.
func (s *waitRun) block(turn <-chan struct{}, timer <-chan time.Time, deadline time.Time) int {
	s.joined = true
	if !s.watched && s.x.req.Watch != nil {
		s.watched = true
		s.gone, s.unwatch = s.x.req.Watch.Watch()
	}
	var dl <-chan time.Time
	if !deadline.IsZero() {
		c, stop := s.w.after(deadline.Sub(s.m.opt.Now()))
		defer stop()
		dl = c
	}
	select {
	case <-turn:
		return woke
	case <-timer:
		return woke
	case <-dl:
		return expired
	case <-s.w.closed: // shutting down: answered as if max_wait ran out
		return expired
	case <-s.gone:
		s.x.resetTake()
		s.x.verdict, s.x.rules, s.outcome = Left, nil, WaitLeft
		return left
	}
}

// end leaves the queue (the next waiter's turn comes), stops watching the
// client and records the wait.
func (s *waitRun) end() {
	s.w.leave(s.q)
	if s.unwatch != nil {
		s.unwatch()
	}
	if s.outcome == WaitFull {
		s.w.observe(WaitFull, 0)
	}
	if !s.joined {
		return
	}
	if s.outcome == "" || s.outcome == WaitFull {
		s.outcome = WaitLimited // refused after waiting (its queue full, or the store failed)
	}
	s.x.held, s.x.waited = true, s.m.opt.Now().Sub(s.start)
	s.w.observe(s.outcome, s.x.waited)
}

// peekDenial sets x denied by the bucket key it waited for without ever
// taking: one take of zero cost reads every bucket's status (taking
// nothing, so that the waiters ahead keep what they wait for), and the
// wait is that bucket's own until it could pay (a token bucket: its
// deficit at its refill rate; a quota: its window's end), at least
// minRetry.
func (x *Exchange) peekDenial(rules []*policy.Rule, key string) {
	x.resetTake()
	x.peek = true
	x.take(rules)
	x.peek = false
	if x.verdict != Admitted { // the store failed, or refused
		return
	}
	i := 0
	for j := range x.rules {
		if x.rules[j].Key == key {
			i = j
		}
	}
	a := &x.rules[i]
	// A quota: until its window ends. A window counter: until it is
	// empty again (a fixed window: its end), never shorter than the wait
	// its take would compute; an in-flight limit: its short retry.
	wait := a.Status.Reset
	if !a.Limit.IsQuota() && !a.Limit.IsWindow() && !a.Limit.Concurrent && a.Limit.Rate > 0 {
		deficit := a.Reserved - a.Status.Remaining
		wait = time.Duration(math.Ceil(float64(max(deficit, 0)) * float64(a.Limit.Per) / float64(a.Limit.Rate)))
	}
	a.Denied = true
	x.verdict = Denied
	x.decision = bucket.Decision{DeniedBy: i, RetryAfter: max(wait, minRetry), Buckets: x.decision.Buckets}
}
