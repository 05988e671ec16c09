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
// an exact buffer and Put drops it. It was 4 KiB; at 512 bytes a 1 KiB
// chat body's buffer is reused too: its allocation (489 instructions,
// most of them zeroing, in BenchmarkProxyPath/llmguard under callgrind)
// and its kilobyte of the heap the collector sweeps were a sixth of a
// request's allocations, where a Get and a Put from the pool cost about
// half as much. Below 512 bytes an allocation costs about what the pool
// does.
const MinBytes = 512

// steps is the number of size classes per power of two.
const steps = 8

// Pool holds buffers given back, at most maxBytes (New) of capacity in
// all. Create it with New; safe for concurrent use. A nil *Pool keeps
// nothing: Get allocates, Put drops.
type Pool struct {
	mu   sync.Mutex
	max  int64
	held int64
	// classes holds the buffers given back, by class (classIndex of their
	// capacity): an array, not a map keyed by size, since a Get and a Put
	// run on every request of MinBytes or more (a map's hash, look-up and
	// store were about 200 instructions of the two).
	classes [64 * steps][][]byte
}

// New returns an empty pool that keeps at most maxBytes of buffers (0 or
// negative: it keeps none, and Get always allocates).
func New(maxBytes int64) *Pool {
	return &Pool{max: maxBytes}
}

// classSize is the capacity of the buffers of the class holding length n
// (n ≥ MinBytes): n rounded up to a multiple of 1/steps of the power of
// two at or below it.
func classSize(n int) int {
	step := 1 << (bits.Len(uint(n)) - 1) / steps
	return (n + step - 1) / step * step
}

// classIndex is the position of class size c (a classSize, at least
// steps) among all classes: steps a power of two, in increasing order.
func classIndex(c int) int {
	l := bits.Len(uint(c)) - 1
	return l*steps + (c-1<<l)/(1<<l/steps)
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
		if free := p.classes[classIndex(c)]; len(free) > 0 {
			b := free[len(free)-1]
			free[len(free)-1] = nil
			p.classes[classIndex(c)] = free[:len(free)-1]
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
		i := classIndex(c)
		p.classes[i] = append(p.classes[i], b[:0])
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
