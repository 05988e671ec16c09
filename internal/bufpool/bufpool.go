// Package bufpool keeps large byte buffers for reuse within a bound in
// bytes. The proxy reads each request body into a buffer of its own (the
// server streams request bodies so that a caller is refused before its
// body is read); allocating one per request costs, at 128 KiB, the
// zeroing of the buffer and a garbage collection every few dozen
// requests. A buffer taken with Get and given back with Put after the
// request is done is reused by a later request of about its size.
//
// Capacities are rounded up to one of eight sizes per power of two (at
// most 1/8 above the length asked for), so that a conversation resent
// with a turn more (1/16 larger) mostly finds its buffer again.
package bufpool

import (
	"math/bits"
	"sync"
)

// MinBytes is the shortest buffer a Pool keeps: below it, Get allocates
// an exact buffer and Put drops it (small allocations are cheap).
const MinBytes = 4 << 10

// steps is the number of size classes per power of two.
const steps = 8

// Pool holds buffers given back, at most maxBytes (New) of capacity in
// all. Create it with New; safe for concurrent use. A nil *Pool keeps
// nothing: Get allocates, Put drops.
type Pool struct {
	mu      sync.Mutex
	max     int64
	held    int64
	classes map[int][][]byte // by class size, in bytes: buffers of that capacity
}

// New returns an empty pool that keeps at most maxBytes of buffers (0 or
// negative: it keeps none, and Get always allocates).
func New(maxBytes int64) *Pool {
	return &Pool{max: maxBytes, classes: make(map[int][][]byte)}
}

// classSize is the capacity of the buffers of the class holding length n
// (n ≥ MinBytes): n rounded up to a multiple of 1/steps of the power of
// two at or below it.
func classSize(n int) int {
	step := 1 << (bits.Len(uint(n)) - 1) / steps
	return (n + step - 1) / step * step
}

// Get returns a buffer of length n whose contents are undefined (not
// zeroed when reused): one given back whose capacity is n's class or a
// larger one up to n + n/4, when there is one, else a new one with the
// class's capacity (at most n + n/8). Below MinBytes, a new buffer of
// exactly n.
func (p *Pool) Get(n int) []byte {
	if n < MinBytes || p == nil {
		return make([]byte, n)
	}
	first := classSize(n)
	p.mu.Lock()
	for c := first; c <= n+n/4; c = classSize(c + 1) {
		if free := p.classes[c]; len(free) > 0 {
			b := free[len(free)-1]
			free[len(free)-1] = nil
			p.classes[c] = free[:len(free)-1]
			p.held -= int64(c)
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	return make([]byte, n, first)
}

// Put gives b back for reuse: kept when its capacity is a class's (a
// buffer from Get) and the pool has room for it, else left to the garbage
// collector. The caller must not touch b afterwards.
func (p *Pool) Put(b []byte) {
	c := cap(b)
	if c < MinBytes || classSize(c) != c || p == nil {
		return
	}
	p.mu.Lock()
	if p.held+int64(c) <= p.max {
		p.classes[c] = append(p.classes[c], b[:0])
		p.held += int64(c)
	}
	p.mu.Unlock()
}

// Held is the capacity, in bytes, of the buffers the pool keeps.
func (p *Pool) Held() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}
