package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
)

// waitWatchEvery is how often the clients of held requests are looked at: a
// client that leaves while its request waits is dropped, and its queue
// slot freed, within about this long. It is the client watch's tick.
const waitWatchEvery = 50 * time.Millisecond

// streamWatchEvery is how often the clients of the answers being relayed
// (streams, and answers too large to hold) are looked at: a client that
// leaves while its upstream sends nothing (thinking, queued) has the
// upstream cut within about this long. A stream's first look comes at the
// watch's next sweep of the answers, at most this long after it starts.
const streamWatchEvery = 500 * time.Millisecond

// streamWatchTicks is streamWatchEvery in ticks of waitWatchEvery.
const streamWatchTicks = uint64(streamWatchEvery / waitWatchEvery)

// watchAction is what a watched entry does once its client has left:
// CloseWithError(errClientGone). A relayed answer's is its upstream body
// (fasthttp.ReadCloserWithError), whose read is cut; a held request's is
// its heldWatch, which closes its gone channel. It is called once, from
// the watch's goroutine, outside the watch's lock; the entry's remove
// waits for it to return.
type watchAction interface {
	CloseWithError(err error) error
}

// clientWatch looks at the clients of held requests (every waitWatchEvery)
// and of the answers being relayed (every streamWatchEvery), from one
// goroutine for all of them (running while any is watched, started again
// by the next entry after it stops): a client that closed or reset its
// connection has its entry's flag set and its action taken, and that
// entry's only. An entry costs no goroutine or timer of its own: a slot in
// a slice whose slots are reused (its flag holds the slot's index, so that
// a request's add and remove touch that slot and no map: perf20, issue
// #13), and one non-blocking poll(2) of its client per look. A connection
// with no socket to look at (an in-memory listener)
// is dropped from the watch at its first look: an answer's client is
// noticed at the next write instead, a held request's not before its wait
// ends. Actions run outside the lock, so a slow one
// (closing an upstream) holds up no add or remove but its own entry's; a
// panic in one entry's look or action is contained and counted (stage
// watch), and the sweep goes on to the others. The zero value is ready to
// use; safe for concurrent use.
type clientWatch struct {
	mu sync.Mutex
	// slots are the entries, each at its flag's index (a free slot's
	// flag is nil); free are the indexes of the free slots below
	// len(slots), and n the entries watched. When the last entry goes,
	// both slices are emptied (their arrays kept for the next ones).
	slots   []watchSlot
	free    []int32
	n       int
	seq     uint64 // the seq of the last entry added
	fast    int    // entries looked at every tick
	running bool
	// slow: the goroutine sleeps until the next sweep of the answers;
	// wake (one slot) brings it back when a held request is added.
	slow bool
	wake chan struct{}
	// acting is the flag of the entry whose action runs now (nil: none);
	// actDone is closed when it has returned.
	acting  *watchFlag
	actDone chan struct{}
	// onSweep, when set (tests), is called after each sweep, outside mu;
	// set before the first entry is watched.
	onSweep func()
}

// watchFlag is a watched entry's flag, set by the watch when the entry's
// client has left (Load reports it), and the index of the entry's slot
// while it is watched, in one word (the flag its top bit), so that an
// owner's flag takes no more room than an atomic.Bool: an exchange fits
// its size class (exchangeBytes). The slot is written and read under the
// watch's lock only, the flag at any time. The zero value is a clear
// flag, not watched; it must not be copied once watched.
type watchFlag struct {
	v atomic.Uint32
}

// watchLeft is the flag's bit of a watchFlag's word, the slot the rest.
const watchLeft = 1 << 31

// Load reports whether the flag is set.
func (f *watchFlag) Load() bool { return f.v.Load()&watchLeft != 0 }

// Store sets or clears the flag, leaving the slot as it is.
func (f *watchFlag) Store(left bool) {
	if left {
		f.v.Or(watchLeft)
	} else {
		f.v.And(^uint32(watchLeft))
	}
}

// slot returns the index of the slot last given to f.
func (f *watchFlag) slot() int { return int(f.v.Load() &^ watchLeft) }

// setSlot records i (below 2^31) as f's slot, leaving the flag as it is.
func (f *watchFlag) setSlot(i int) {
	for {
		old := f.v.Load()
		if f.v.CompareAndSwap(old, old&watchLeft|uint32(i)) {
			return
		}
	}
}

// watchSlot is one watched entry: its flag (nil: a free slot), its
// exchange (named when a panic is recovered; nil for a held request), its
// client's connection, its action, how many ticks apart it is looked at
// (1 or streamWatchTicks), and the seq it was added with.
type watchSlot struct {
	flag   *watchFlag
	x      *exchange
	conn   net.Conn
	action watchAction
	every  uint64
	seq    uint64
}

// watchLook is a sweep's copy of one entry due.
type watchLook struct {
	flag *watchFlag
	seq  uint64
	conn net.Conn
	x    *exchange
}

// addAnswer watches the client (conn) of x's answer being relayed until
// remove(cut): when the client leaves first, cut is set, then upstream is
// closed with errClientGone. cut must not be watched already.
func (w *clientWatch) addAnswer(p *Proxy, cut *watchFlag, x *exchange, conn net.Conn, upstream fasthttp.ReadCloserWithError) {
	w.add(p, cut, watchSlot{x: x, conn: conn, action: upstream, every: streamWatchTicks})
}

// heldWatch is the watch of one held request's client: gone is closed
// when it leaves.
type heldWatch struct {
	left watchFlag // its entry's flag
	gone chan struct{}
}

// CloseWithError implements watchAction: it closes h.gone (err unused).
func (h *heldWatch) CloseWithError(error) error {
	close(h.gone)
	return nil
}

// addHeld watches conn, the client of a held request, until stop is
// called; gone is closed if the client leaves first.
func (w *clientWatch) addHeld(p *Proxy, conn net.Conn) (gone <-chan struct{}, stop func()) {
	h := &heldWatch{gone: make(chan struct{})}
	w.add(p, &h.left, watchSlot{conn: conn, action: h, every: 1})
	return h.gone, func() { w.remove(&h.left) }
}

// add watches the entry s under flag until remove(flag).
func (w *clientWatch) add(p *Proxy, flag *watchFlag, s watchSlot) {
	w.mu.Lock()
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	w.seq++
	s.seq, s.flag = w.seq, flag
	if k := len(w.free); k > 0 {
		i := int(w.free[k-1])
		w.free = w.free[:k-1]
		w.slots[i] = s
		flag.setSlot(i)
	} else {
		flag.setSlot(len(w.slots))
		w.slots = append(w.slots, s)
	}
	w.n++
	if s.every == 1 {
		w.fast++
		if w.slow {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	if !w.running {
		w.running = true
		go w.run(p)
	}
	w.mu.Unlock()
}

// remove ends the watch of the entry under flag; once it returns the watch
// neither sets flag nor runs the entry's action, and an action under way
// has returned, so that the caller may release what the action touches
// (an upstream body).
func (w *clientWatch) remove(flag *watchFlag) {
	w.mu.Lock()
	if s := w.slotOf(flag); s != nil {
		w.deleteLocked(s)
	}
	if w.acting == flag {
		done := w.actDone
		w.mu.Unlock()
		<-done
		return
	}
	w.mu.Unlock()
}

// slotOf returns the slot of the entry watched under flag, nil when none
// is; w.mu is held.
func (w *clientWatch) slotOf(flag *watchFlag) *watchSlot {
	if i := flag.slot(); i < len(w.slots) && w.slots[i].flag == flag {
		return &w.slots[i]
	}
	return nil
}

// deleteLocked drops the entry in slot s (one of w.slots); w.mu is held.
func (w *clientWatch) deleteLocked(s *watchSlot) {
	if s.every == 1 {
		w.fast--
	}
	i := int32(s.flag.slot())
	*s = watchSlot{} // keep no exchange, connection or action alive
	w.n--
	if w.n == 0 {
		w.slots, w.free = w.slots[:0], w.free[:0]
		return
	}
	w.free = append(w.free, i)
}

// run sweeps the watched entries until a sweep finds none: every tick
// (waitWatchEvery) while a held request is watched, else every
// streamWatchTicks ticks. A panic outside an entry's look (which sweep
// contains) is contained and counted (stage watch), and the next entry
// added starts the goroutine again.
func (w *clientWatch) run(p *Proxy) {
	defer func() {
		if r := recover(); r != nil {
			w.mu.Lock()
			w.running, w.slow = false, false
			w.mu.Unlock()
			p.panicked(meter.StageWatch, r, nil)
		}
	}()
	t := time.NewTimer(waitWatchEvery)
	defer t.Stop()
	var tick uint64
	var batch []watchLook
	for {
		w.mu.Lock()
		step := uint64(1)
		if w.fast == 0 { // to the next sweep of the answers
			step = streamWatchTicks - tick%streamWatchTicks
		}
		w.slow = step > 1
		w.mu.Unlock()
		t.Reset(time.Duration(step) * waitWatchEvery)
		select {
		case <-t.C:
			tick += step
		case <-w.wake: // a held request: look at it from the next tick
			continue
		}
		// Stop only once a sleep found nothing watched: entries that come
		// and go faster than that (short streams) do not start a
		// goroutine, a timer and a batch each.
		w.mu.Lock()
		if w.n == 0 {
			w.running, w.slow = false, false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		batch = w.sweep(p, tick, batch)
		if w.onSweep != nil {
			w.onSweep()
		}
	}
}

// sweep looks at the entries due at tick (those whose every divides it)
// and returns batch emptied, for the next sweep to reuse. The sockets are
// looked at outside the lock, from a copy of the entries (into batch); an
// entry is acted on only when it is still watched under the same seq.
func (w *clientWatch) sweep(p *Proxy, tick uint64, batch []watchLook) []watchLook {
	w.mu.Lock()
	for i := range w.slots {
		if s := &w.slots[i]; s.flag != nil && tick%s.every == 0 {
			batch = append(batch, watchLook{flag: s.flag, seq: s.seq, conn: s.conn, x: s.x})
		}
	}
	w.mu.Unlock()
	for i := range batch {
		w.look(p, &batch[i])
	}
	clear(batch) // keep no exchange alive until the next sweep
	return batch[:0]
}

// look looks at one entry's client and drops the entry when it has left
// (taking its action) or has no socket to look at. A panic is contained
// and counted (stage watch, naming the entry's exchange) and the entry
// dropped, so that it does not come back at every sweep.
func (w *clientWatch) look(p *Proxy, l *watchLook) {
	defer func() {
		if r := recover(); r != nil {
			p.panicked(meter.StageWatch, r, l.x)
			w.mu.Lock()
			if s := w.slotOf(l.flag); s != nil && s.seq == l.seq {
				w.deleteLocked(s)
			}
			w.mu.Unlock()
		}
	}()
	p.inject(pointWatch)
	if closed, ok := peerClosed(l.conn); !ok || closed {
		w.drop(l, closed)
	}
}

// drop ends the watch of l when it is still watched under l's seq; when
// its client has left (gone), it sets l's flag and takes the entry's
// action, outside the lock but marked as under way (acting), so that the
// entry's remove waits for it to return before the caller releases what
// it touches, while other entries are added and removed meanwhile.
func (w *clientWatch) drop(l *watchLook, gone bool) {
	w.mu.Lock()
	s := w.slotOf(l.flag)
	if s == nil || s.seq != l.seq {
		w.mu.Unlock()
		return
	}
	action := s.action
	w.deleteLocked(s)
	if !gone {
		w.mu.Unlock()
		return
	}
	done := make(chan struct{})
	w.acting, w.actDone = l.flag, done
	w.mu.Unlock()
	defer func() { // after a panic too: remove must not wait for ever
		w.mu.Lock()
		w.acting, w.actDone = nil, nil
		w.mu.Unlock()
		close(done)
	}()
	l.flag.Store(true)
	action.CloseWithError(errClientGone)
}
