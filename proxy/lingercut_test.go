package proxy

import (
	"sync/atomic"
	"testing"
	"time"
)

// cutCounter is a fasthttp.ReadCloserWithError that counts its cuts.
type cutCounter struct {
	cuts atomic.Int32
	cut  chan struct{}
}

func (c *cutCounter) Read([]byte) (int, error) { return 0, nil }
func (c *cutCounter) Close() error             { return nil }
func (c *cutCounter) CloseWithError(error) error {
	if c.cuts.Add(1) == 1 {
		close(c.cut)
	}
	return nil
}

// A lingerCut armed and left cuts its body once; one stopped first never
// does, nor does the pooled timer it gave back, armed for another body.
func TestLingerCut(t *testing.T) {
	fired := &cutCounter{cut: make(chan struct{})}
	var l lingerCut
	l.arm(fired, time.Millisecond)
	select {
	case <-fired.cut:
	case <-time.After(time.Minute): // only ends a failing run
		t.Fatal("an armed lingerCut never cut its body")
	}
	if !l.fired() {
		t.Error("fired() is false after the cut")
	}
	l.arm(fired, time.Millisecond) // more bytes after the cut: no second arming
	l.stop()
	l.stop() // again: nothing
	if !l.cut {
		t.Error("stop did not record the cut")
	}

	for i := range 100 {
		kept := &cutCounter{cut: make(chan struct{})}
		var m lingerCut
		m.arm(kept, time.Hour)
		m.arm(kept, time.Hour) // started again
		m.stop()
		if m.fired() || kept.cuts.Load() != 0 {
			t.Fatalf("arming %d: a lingerCut stopped before its grace cut its body", i)
		}
	}
	time.Sleep(10 * time.Millisecond) // a stray fire of the first timer would come now
	if n := fired.cuts.Load(); n != 1 {
		t.Errorf("the first body was cut %d times, want 1", n)
	}
}
