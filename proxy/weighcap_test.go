package proxy

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/weigher"
)

// gateWeigher is a Weigher whose weighing waits at a gate, counting how many
// weigh at once.
type gateWeigher struct {
	Weigher
	gate            chan struct{}
	inside, maxSeen atomic.Int32
	entered         chan struct{}
}

func (g *gateWeigher) WeighResolved(weigher.Kind, []byte, func(string) string) weigher.Estimate {
	n := g.inside.Add(1)
	for m := g.maxSeen.Load(); n > m && !g.maxSeen.CompareAndSwap(m, n); m = g.maxSeen.Load() {
	}
	g.entered <- struct{}{}
	<-g.gate
	g.inside.Add(-1)
	return weigher.Estimate{Parsed: true}
}

// TestWeighingIsCapped: however many requests arrive at once, at most
// GOMAXPROCS are weighed at the same time (weighing is pure CPU; more at
// once only lengthens the run queues a store reply waits in), and the
// others are weighed as slots free up.
func TestWeighingIsCapped(t *testing.T) {
	slots := runtime.GOMAXPROCS(0)
	const requests = 16
	g := &gateWeigher{gate: make(chan struct{}), entered: make(chan struct{}, requests)}
	p := &Proxy{weighing: make(chan struct{}, slots), weighWait: time.Hour}
	x := &exchange{live: &live{weigher: g}, upstream: &Upstream{}, kind: weigher.KindChat}
	var wg sync.WaitGroup
	for range requests {
		// An exchange each: weighAs writes the estimate into it.
		wg.Go(func() { p.weighAs(&exchange{live: x.live, upstream: x.upstream, kind: x.kind}, []byte(`{}`)) })
	}
	for range slots { // the first slots get in
		<-g.entered
	}
	for range 10000 { // give the others every chance to get in too
		runtime.Gosched()
	}
	if n := g.inside.Load(); n != int32(slots) {
		t.Fatalf("%d weighings at once, want %d (GOMAXPROCS)", n, slots)
	}
	for range requests - slots { // each release lets one more in
		g.gate <- struct{}{}
		<-g.entered
	}
	for range slots {
		g.gate <- struct{}{}
	}
	wg.Wait()
	if m := g.maxSeen.Load(); m != int32(slots) {
		t.Fatalf("at most %d weighings at once, want %d", m, slots)
	}
}

// TestWeighingSlotsAreNotHeldForever: a request that finds every slot
// taken (a caller whose bodies are slow to weigh) is weighed without one
// once it has waited weighWait, instead of waiting for the slots.
func TestWeighingSlotsAreNotHeldForever(t *testing.T) {
	p := &Proxy{weighing: make(chan struct{}, 2), weighWait: time.Millisecond}
	p.weighing <- struct{}{}
	p.weighing <- struct{}{} // every slot held, never released
	g := &gateWeigher{gate: make(chan struct{}, 1), entered: make(chan struct{}, 1)}
	g.gate <- struct{}{}
	x := &exchange{live: &live{weigher: g}, upstream: &Upstream{}, kind: weigher.KindChat}
	if p.weighAs(x, []byte(`{}`)); !x.est.Parsed {
		t.Fatalf("estimate %+v", x.est)
	}
	if len(p.weighing) != 2 {
		t.Fatalf("%d slots taken after weighing without one, want the 2 held", len(p.weighing))
	}
}
