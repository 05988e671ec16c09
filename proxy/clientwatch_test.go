package proxy

import (
	"errors"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// leftConns returns n server-side TCP connections whose clients have
// closed their ends, each already seen closed by peerClosed.
func leftConns(t *testing.T, n int) []net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		c.Close()
		conns = append(conns, s)
	}
	deadline := time.Now().Add(60 * time.Second) // only ends a hung run
	for _, s := range conns {
		for {
			if closed, ok := peerClosed(s); !ok {
				t.Skip("peerClosed cannot look at a socket on this platform")
			} else if closed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a closed client never showed")
			}
			time.Sleep(time.Millisecond)
		}
	}
	return conns
}

// countingAction is a watchAction that counts its calls and the errors it
// was given, and panics when told to.
type countingAction struct {
	calls  atomic.Int32
	panics bool
	err    error
}

func (a *countingAction) CloseWithError(err error) error {
	a.calls.Add(1)
	a.err = err
	if a.panics {
		panic("injected: an action that panics")
	}
	return nil
}

// handSwept is a clientWatch whose goroutine never starts (running set):
// the test sweeps it by hand.
func handSwept() *clientWatch { return &clientWatch{running: true} }

// sweepOnce sweeps w once at tick 0 (every entry due) and reports a panic
// that escaped it.
func sweepOnce(t *testing.T, w *clientWatch, p *Proxy) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a panic escaped the sweep: %v", r)
		}
	}()
	w.sweep(p, 0, nil)
}

// TestClientWatchPanicInOneEntry: a panic in one entry's look (the test
// hook at pointWatch, first look only), or in one entry's action, is
// recovered and counted (panics_total{stage="watch"}); the sweep goes on
// and takes the action of every other entry whose client left, and the
// entry that panicked is no longer watched (its remove returns at once).
func TestClientWatchPanicInOneEntry(t *testing.T) {
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t)})
	p := r.px
	var looks atomic.Int32
	p.opt.inject = func(at string) {
		if at == pointWatch && looks.Add(1) == 1 {
			panic("injected: a look that panics")
		}
	}

	// A panic in a look: the first entry looked at (whichever it is).
	w := handSwept()
	conns := leftConns(t, 3)
	flags := make([]watchFlag, len(conns))
	acts := make([]countingAction, len(conns))
	for i, c := range conns {
		w.add(p, &flags[i], watchSlot{conn: c, action: &acts[i], every: 1})
	}
	sweepOnce(t, w, p)
	acted := 0
	for i := range acts {
		acted += int(acts[i].calls.Load())
		if acts[i].calls.Load() == 1 && (!flags[i].Load() || !errors.Is(acts[i].err, errClientGone)) {
			t.Errorf("entry %d acted on without its flag set or errClientGone (%v)", i, acts[i].err)
		}
	}
	if acted != len(conns)-1 {
		t.Errorf("look panic: %d actions taken, want %d (every entry but the one that panicked)", acted, len(conns)-1)
	}
	if n := r.panics("watch"); n != 1 {
		t.Errorf("look panic: %v panics counted, want 1", n)
	}
	if w.n != 0 || w.fast != 0 {
		t.Errorf("look panic: %d entries still watched (%d fast), want none", w.n, w.fast)
	}

	// A panic in an action: the first entry's.
	w = handSwept()
	conns = leftConns(t, 3)
	flags = make([]watchFlag, len(conns))
	acts = make([]countingAction, len(conns))
	acts[0].panics = true
	for i, c := range conns {
		w.add(p, &flags[i], watchSlot{conn: c, action: &acts[i], every: streamWatchTicks})
	}
	sweepOnce(t, w, p)
	for i := range acts {
		if n := acts[i].calls.Load(); n != 1 {
			t.Errorf("action panic: entry %d acted on %d times, want 1", i, n)
		}
	}
	if n := r.panics("watch"); n != 2 {
		t.Errorf("action panic: %v panics counted in all, want 2", n)
	}
	removed := make(chan struct{})
	go func() {
		w.remove(&flags[0])
		close(removed)
	}()
	select {
	case <-removed:
	case <-time.After(60 * time.Second): // only ends a hung run
		t.Fatal("the remove of the entry whose action panicked never returned")
	}
}

// blockingAction is a watchAction that signals started, then returns once
// release is closed, recording when it returned in order.
type blockingAction struct {
	started, release chan struct{}
	order            *atomic.Int32
	returned         int32
}

func (a *blockingAction) CloseWithError(error) error {
	close(a.started)
	<-a.release
	a.returned = a.order.Add(1)
	return nil
}

// TestClientWatchActionOutsideTheLock: while one entry's action is under
// way (a slow upstream close), other entries are added and removed
// without waiting for it, and the entry's own remove returns only after
// its action has returned (the caller then releases what it touched).
func TestClientWatchActionOutsideTheLock(t *testing.T) {
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t)})
	p := r.px
	w := handSwept()
	var order atomic.Int32
	slow := &blockingAction{started: make(chan struct{}), release: make(chan struct{}), order: &order}
	var slowFlag watchFlag
	w.add(p, &slowFlag, watchSlot{conn: leftConns(t, 1)[0], action: slow, every: streamWatchTicks})
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		w.sweep(p, 0, nil)
	}()
	<-slow.started

	// Others come and go meanwhile.
	other := leftConns(t, 1)[0]
	others := make(chan struct{})
	go func() {
		defer close(others)
		var f watchFlag
		w.add(p, &f, watchSlot{conn: other, action: &countingAction{}, every: 1})
		w.remove(&f)
	}()
	select {
	case <-others:
	case <-time.After(60 * time.Second): // only ends a hung run
		t.Fatal("an add and a remove waited for another entry's action")
	}

	// The slow entry's own remove waits for its action.
	var removedAt atomic.Int32
	calling := make(chan struct{})
	removed := make(chan struct{})
	go func() {
		close(calling)
		w.remove(&slowFlag)
		removedAt.Store(order.Add(1))
		close(removed)
	}()
	<-calling
	for range 100 { // give a remove that does not wait the time to return
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
	close(slow.release)
	<-removed
	<-swept
	if !slowFlag.Load() {
		t.Error("the flag of the entry acted on is not set")
	}
	if removedAt.Load() < slow.returned {
		t.Errorf("remove returned (%d) before the action did (%d)", removedAt.Load(), slow.returned)
	}
}
