package proxy

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// goid is the calling goroutine's id, read from its stack header.
func goid() int {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// TestStackPoolReuses: streams run one after another run on the same kept
// goroutine, not the caller's, and the pool keeps one idle worker.
func TestStackPoolReuses(t *testing.T) {
	var sp stackPool
	var ids []int
	for range 5 {
		sp.run(func() { ids = append(ids, goid()) })
		if n := sp.idleWorkers(); n != 1 {
			t.Fatalf("%d idle workers after a run, want 1", n)
		}
	}
	for i, id := range ids {
		if id != ids[0] || id == goid() {
			t.Fatalf("run %d on goroutine %d, first on %d, caller %d", i, id, ids[0], goid())
		}
	}
}

// TestStackPoolBound: more streams at once than stackPoolIdle each get a
// worker, and only stackPoolIdle workers stay idle after.
func TestStackPoolBound(t *testing.T) {
	var sp stackPool
	const n = stackPoolIdle + 20
	var started, wg sync.WaitGroup
	release := make(chan struct{})
	ids := make([]int, n)
	started.Add(n)
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			sp.run(func() { ids[i] = goid(); started.Done(); <-release })
		}()
	}
	started.Wait() // every run holds its own worker now
	close(release)
	wg.Wait()
	seen := map[int]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if len(seen) != n {
		t.Fatalf("%d runs at once on %d goroutines", n, len(seen))
	}
	if got := sp.idleWorkers(); got != stackPoolIdle {
		t.Fatalf("%d idle workers, want %d", got, stackPoolIdle)
	}
}

// TestStackPoolPanic: a panic in a stream is raised again on the caller's
// goroutine with its value; the worker is not kept, and the pool still
// runs the next stream. runtime.Goexit on the worker is raised as
// errGoexit rather than leaving the caller waiting.
func TestStackPoolPanic(t *testing.T) {
	var sp stackPool
	sp.run(func() {}) // one idle worker, which the panicking run takes
	raised := func(f func()) (r any) {
		defer func() { r = recover() }()
		sp.run(f)
		return nil
	}
	id := 0
	if r := raised(func() { id = goid(); panic("tap broke") }); r != "tap broke" {
		t.Fatalf("raised %v, want the stream's panic", r)
	}
	// The worker's goroutine ends (a bounded number of yields to let it).
	for i := 0; goroutineExists(id); i++ {
		if i == 10000 {
			t.Fatalf("the worker that panicked (goroutine %d) is still there", id)
		}
		runtime.Gosched()
	}
	if n := sp.idleWorkers(); n != 0 {
		t.Fatalf("%d idle workers after a panic, want 0", n)
	}
	if r := raised(func() { runtime.Goexit() }); r != errGoexit {
		t.Fatalf("Goexit raised %v, want errGoexit", r)
	}
	ran := false
	sp.run(func() { ran = true })
	if !ran || sp.idleWorkers() != 1 {
		t.Fatalf("after the panics: ran %v, %d idle", ran, sp.idleWorkers())
	}
}

// goroutineExists reports whether a goroutine of id id exists now.
func goroutineExists(id int) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Contains(buf, []byte("goroutine "+strconv.Itoa(id)+" ["))
}
