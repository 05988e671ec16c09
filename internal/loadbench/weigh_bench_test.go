package loadbench

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/llmguard/llmguard/weigher"
)

// BenchmarkWeighWarm weighs the load benchmark's warm bodies (one worker's
// growing conversation, trimmed as the load generator trims it) through a
// weigher with the count cache, after the unmeasured first body: the
// weigher's share of a warm request of the "Performance" table, per body
// size. The bodies are built outside the timer. For instruction counts,
// inside the weighing only:
//
//	go test -c -o /tmp/lb.test ./internal/loadbench
//	GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	  --collect-atstart=no --toggle-collect='*weigher.(*Weigher).chat' \
//	  /tmp/lb.test -test.run XXX -test.bench '^BenchmarkWeighWarm$/^1k$' -test.benchtime 200x -test.cpu 1
//
// and the same with 1200x: the difference over 1000 is one body's
// instructions, without the set-up and the first body. GOGC=off keeps the
// collector's goroutines from running inside the toggled function (with
// it on, two runs differ by up to 20%; off, by under 0.1%);
// cpu.rdtscp=off keeps the runtime off RDTSCP, which valgrind 3.19 does
// not decode. The '^…$' anchors keep BenchmarkWeighWarmTail out.
func BenchmarkWeighWarm(b *testing.B) {
	benchWeigh(b, true)
}

// BenchmarkWeighCold weighs the load benchmark's cold bodies (every body
// new text) the same way, at 1 and 16 KiB: the weigher's share of a cold
// request. The callgrind command of BenchmarkWeighWarm applies, with
// 'WeighCold$/^1k' (or 16k).
func BenchmarkWeighCold(b *testing.B) {
	benchWeigh(b, false)
}

// benchWeigh runs BenchmarkWeighWarm (warm) or BenchmarkWeighCold.
func benchWeigh(b *testing.B, warm bool) {
	pool := newTextPool(1)
	sizes := []int{1 << 10, 16 << 10, 128 << 10}
	if !warm {
		sizes = sizes[:2]
	}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("%dk", size>>10), func(b *testing.B) {
			w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
			if err != nil {
				b.Fatal(err)
			}
			c := newConversation(pool, Shape{Size: size, Warm: warm}, 7)
			growStack(64)
			w.Chat(c.next()) // the first body: all new text, as the warm-up sends it
			bytes := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				body := c.next()
				bytes += len(body)
				b.StartTimer()
				if e := w.Chat(body); !e.Parsed {
					b.Fatal(e.FaultDetail)
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "body-bytes/op")
		})
	}
}

// BenchmarkWeighWarmTrimmed weighs the warm bodies of BenchmarkWeighWarm
// at 1, 16 and 128 KiB the same way, each through one of two functions: a
// body that follows a trim of the conversation's oldest exchanges (one in
// eight at 128 KiB, about two in five at 1 KiB: it resumes at most after
// its system message, a point carried from an earlier body, and its kept
// messages are found, hashed and looked up again) through weighTrimmed,
// any other through
// weighGrown. Callgrind counts either kind alone with
// --toggle-collect='*loadbench.weighTrimmed' (or weighGrown) in the
// command of BenchmarkWeighWarm ('^BenchmarkWeighWarmTrimmed$/^16k$'); its
// count of calls (callgrind_annotate --tree=caller) divides the total.
// The trimmed-bodies metric is their share of the bodies.
func BenchmarkWeighWarmTrimmed(b *testing.B) {
	pool := newTextPool(1)
	for _, size := range []int{1 << 10, 16 << 10, 128 << 10} {
		b.Run(fmt.Sprintf("%dk", size>>10), func(b *testing.B) {
			w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
			if err != nil {
				b.Fatal(err)
			}
			c := newConversation(pool, Shape{Size: size, Warm: true}, 7)
			growStack(64)
			last := len(c.next())
			w.Chat(c.body)
			trimmed := 0
			for b.Loop() {
				body := c.next()
				e := weighGrown
				if len(body) < last { // a trim drops more than a turn adds
					e = weighTrimmed
					trimmed++
				}
				if est := e(w, body); !est.Parsed {
					b.Fatal(est.FaultDetail)
				}
				last = len(body)
			}
			b.ReportMetric(float64(trimmed)/float64(b.N), "trimmed-bodies/op")
		})
	}
}

// weighGrown weighs a body that grew from the last (BenchmarkWeighWarmTrimmed).
//
//go:noinline
func weighGrown(w *weigher.Weigher, body []byte) weigher.Estimate { return w.Chat(body) }

// weighTrimmed weighs a body whose conversation was trimmed
// (BenchmarkWeighWarmTrimmed).
//
//go:noinline
func weighTrimmed(w *weigher.Weigher, body []byte) weigher.Estimate { return w.Chat(body) }

// growStack grows the goroutine's stack by about n KiB before the bodies
// are weighed, so that no stack growth happens inside a weighing: valgrind
// follows calls and returns by the stack pointer, and a stack copied
// inside the toggled function left its collection on for the rest of the
// run (the benchmark's own ReadMemStats included), a per-body figure that
// moved by 40% with an unrelated change of frame sizes.
//
//go:noinline
func growStack(n int) byte {
	var pad [1024]byte
	pad[n%len(pad)] = byte(n)
	if n > 1 {
		return growStack(n-1) + pad[(n*7)%len(pad)]
	}
	return pad[0]
}

// BenchmarkWeighWarmTail weighs 3,000 of the load benchmark's warm 128 KiB
// bodies per op, one at a time, and reports the quantiles of a body's
// weighing time (wall clock, so read them on a quiet machine or as ratios
// within one run) and how many of the slowest 1% saw a garbage collection
// start: the weigher's own share of the cell's latency tail. The count
// cache is the process's: with -count 2 the second pass finds every turn
// remembered (no counting: the cost of the rest alone).
//
//	go test -run XXX -bench WeighWarmTail -benchtime 1x ./internal/loadbench
func BenchmarkWeighWarmTail(b *testing.B) {
	pool := newTextPool(1)
	for b.Loop() {
		w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
		if err != nil {
			b.Fatal(err)
		}
		c := newConversation(pool, Shape{Size: 128 << 10, Warm: true}, 7)
		w.Chat(c.next())
		const n = 3000
		took := make([]time.Duration, n)
		gc := make([]bool, n)
		var ms runtime.MemStats
		for i := range n {
			body := c.next()
			runtime.ReadMemStats(&ms)
			before := ms.NumGC
			t0 := time.Now()
			w.Chat(body)
			took[i] = time.Since(t0)
			runtime.ReadMemStats(&ms)
			gc[i] = ms.NumGC != before
		}
		sorted := slices.Clone(took)
		slices.Sort(sorted)
		p99 := sorted[n*99/100]
		withGC := 0
		for i := range n {
			if took[i] >= p99 && gc[i] {
				withGC++
			}
		}
		b.ReportMetric(float64(sorted[n/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		b.ReportMetric(float64(sorted[n-1].Microseconds()), "max-µs")
		b.ReportMetric(float64(withGC), "slowest-1%-with-gc")
	}
}

// BenchmarkWeighWarmWorkers is BenchmarkWeighWarm with the load
// benchmark's 32 workers: 32 growing conversations through one weigher,
// each worker's next body in turn, as a c32 warm run sends them (the
// callgrind command of BenchmarkWeighWarm applies, with
// '^BenchmarkWeighWarmWorkers$/^1k$'). One conversation alone keeps the
// weigher's resume points and caches on itself; 32 interleaved share them.
// Measured 2026-12-06 (callgrind as above, (I1200 − I200)/1000, one run):
// 1 KiB 41.5k instructions a body against BenchmarkWeighWarm's 40.5k, so
// the c32 warm cell's weigh is the single conversation's plus ~2.5%.
func BenchmarkWeighWarmWorkers(b *testing.B) {
	pool := newTextPool(1)
	for _, size := range []int{1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("%dk", size>>10), func(b *testing.B) {
			w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
			if err != nil {
				b.Fatal(err)
			}
			const workers = 32
			cs := make([]*conversation, workers)
			for i := range cs {
				cs[i] = newConversation(pool, Shape{Size: size, Warm: true}, uint64(7+i))
				w.Chat(cs[i].next()) // each first body: all new text, as the warm-up sends it
			}
			growStack(64)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				body := cs[i%workers].next()
				i++
				b.StartTimer()
				if e := w.Chat(body); !e.Parsed {
					b.Fatal(e.FaultDetail)
				}
			}
		})
	}
}
