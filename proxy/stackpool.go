package proxy

import (
	"bufio"
	"errors"
	"sync"
)

// stackPoolIdle is the most idle stream workers a stackPool keeps. A worker
// holds its goroutine's stack (tens of KiB once grown by a stream), so the
// pool holds at most a few MiB; streams beyond it run on workers that exit
// after their stream.
const stackPoolIdle = 64

// stackPool runs stream writers (Proxy.stream) on goroutines kept from one
// stream to the next. fasthttp starts a fresh goroutine for every streamed
// body (fasthttp.NewStreamReader); the tap, the weigher's chunk reader and
// the settlement run deep enough that such a goroutine grew its stack
// (runtime.morestack, copystack) on every stream. A kept worker's stack
// stays grown until the garbage collector shrinks an idle one, so the
// growth is paid once per worker and collection rather than per stream;
// fasthttp's goroutine only hands its writer over and waits. The zero value
// is ready to use; safe for concurrent use.
type stackPool struct {
	mu   sync.Mutex
	idle []*stackWorker
}

// stackWorker is one kept goroutine: it runs each func sent on job and
// answers on done with nil, or with the value of a panic (after which it
// exits).
type stackWorker struct {
	job  chan stackCall
	done chan any
}

// stackCall is one job for a worker: j.runJob(w).
type stackCall struct {
	j stackJob
	w *bufio.Writer
}

// stackJob is what a stack worker runs, given the stream writer's buffer:
// an *exchange's stream (exchange.runJob), or a func (funcJob). A pointer
// or a func goes into the interface without an allocation, where a
// closure binding a stream's arguments was one.
type stackJob interface{ runJob(w *bufio.Writer) }

// funcJob is a func run as a stackJob (it takes no buffer).
type funcJob func()

func (f funcJob) runJob(*bufio.Writer) { f() }

// run calls f on a kept worker and returns when f has returned. A panic in
// f is raised again here, on the caller's goroutine, as if f had run on it.
func (sp *stackPool) run(f func()) { sp.runJob(funcJob(f), nil) }

// runJob is run for any stackJob: j.runJob(w) is called on a kept worker.
func (sp *stackPool) runJob(j stackJob, w *bufio.Writer) {
	var wk *stackWorker
	sp.mu.Lock()
	if n := len(sp.idle); n > 0 {
		wk = sp.idle[n-1]
		sp.idle[n-1] = nil
		sp.idle = sp.idle[:n-1]
	}
	sp.mu.Unlock()
	if wk == nil {
		wk = &stackWorker{job: make(chan stackCall), done: make(chan any)}
		go wk.loop()
	}
	wk.job <- stackCall{j: j, w: w}
	if r := <-wk.done; r != nil {
		panic(r) // the worker has exited
	}
	sp.mu.Lock()
	if len(sp.idle) < stackPoolIdle {
		sp.idle = append(sp.idle, wk)
		wk = nil
	}
	sp.mu.Unlock()
	if wk != nil {
		close(wk.job) // the pool is full: the worker exits
	}
}

// loop runs the worker's jobs until job is closed or one does not return
// (a panic, or runtime.Goexit, answered as errGoexit).
func (w *stackWorker) loop() {
	for f := range w.job {
		returned := false
		func() {
			defer func() {
				if !returned {
					r := recover()
					if r == nil {
						r = errGoexit
					}
					w.done <- r
				}
			}()
			f.j.runJob(f.w)
			returned = true
		}()
		if !returned {
			return
		}
		w.done <- nil
	}
}

// errGoexit is what run raises when its func called runtime.Goexit on the
// worker (nothing in a stream does): the caller's goroutine then ends
// with a panic rather than waiting for ever.
var errGoexit = errors.New("proxy: stream worker exited (runtime.Goexit)")

// idleWorkers is how many workers sp keeps idle now.
func (sp *stackPool) idleWorkers() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.idle)
}
