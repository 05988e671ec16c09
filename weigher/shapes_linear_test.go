//go:build !race

package weigher

import (
	"cmp"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// weighCost weighs body (after a warm-up) several times and returns the
// least CPU time of one weighing, and the bytes one weighing allocated.
func weighCost(w *Weigher, s bodyShape, body []byte, runs int) (time.Duration, uint64) {
	w.Weigh(s.kind, body)
	best := time.Duration(1<<63 - 1)
	for range runs {
		best = min(best, cpuTime(func() { w.Weigh(s.kind, body) }))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w.Weigh(s.kind, body)
	runtime.ReadMemStats(&after)
	return best, after.TotalAlloc - before.TotalAlloc
}

// TestBodyShapesLinear: every shape weighs in time linear in its size (a
// byte of a 1 MiB body costs at most 2.5× a byte of a 256 KiB one), within
// a constant factor of the CPU time per byte of plain prose of the same size
// (1.6 × defaultMaxRatio, 28.8×; 88× for random letters, see bodyShapes), both measured in the same
// run (no absolute time bound), and allocates at most a small multiple of
// the body. A superlinear step (the old recursive
// validator, a quadratic merge) shows as 15× to 100× at 1 MiB. Timing under
// the race detector says nothing, hence the build tag.
func TestBodyShapesLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("weighs several MiB per shape")
	}
	w := uncached(t)
	const size = 1 << 20
	prose := bodyShapes[0]
	proseBody := prose.make(size)
	for _, s := range bodyShapes[1:] {
		body := s.make(size)
		if e := w.Weigh(s.kind, body); e.TooDeep || e.DuplicateKeys || !e.Parsed {
			t.Fatalf("%s: not weighed: %+v", s.name, e)
		}
		// Prose is measured again next to each shape, so that both see the
		// same load on the machine. Neighbours on a shared machine move the
		// CPU time per byte of one text more than another's (caches, clock
		// speed: prose's own figure moved 2× between runs on 2 loaded
		// cores), so a shape over a bound is measured again, up to three
		// times: a superlinear step is over on every attempt.
		var alloc uint64
		var failures []string
		for attempt := 1; attempt <= 3; attempt++ {
			failures = failures[:0]
			proseTime, _ := weighCost(w, prose, proseBody, 5)
			var d time.Duration
			d, alloc = weighCost(w, s, body, 5)
			ratio := float64(d) / float64(len(body)) / (float64(proseTime) / float64(len(proseBody)))
			t.Logf("%-24s %6.2f MiB  %8v  %5.2f× prose per byte  %6.2f B allocated per body byte (attempt %d)", s.name,
				float64(len(body))/(1<<20), d.Round(time.Microsecond), ratio, float64(alloc)/float64(len(body)), attempt)
			// A constant factor of prose, with room for a loaded machine: what a
			// byte costs depends on the text (CJK without punctuation makes long
			// pieces to merge), so it is measured in the same run and the bound
			// is generous; linearity itself is checked next.
			if bound := 1.6 * cmp.Or(s.maxRatio, defaultMaxRatio); ratio > bound {
				failures = append(failures, fmt.Sprintf("%s: %.1f× the CPU time per byte of prose, over %v× (%v for %d bytes, prose %v for %d)",
					s.name, ratio, bound, d, len(body), proseTime, len(proseBody)))
			}
			// Linear: a quarter of the body costs about a quarter of the time
			// (a quadratic step would make the whole cost 16× the quarter).
			quarter := s.make(size / 4)
			dq, _ := weighCost(w, s, quarter, 3)
			// The thread clock ticks coarsely: a quarter that costs under 20 ms
			// is too short to time (and a shape that cheap hides no quadratic
			// step at 1 MiB; the prose ratio above bounds it).
			growth := (float64(d) / float64(len(body))) / (float64(dq) / float64(len(quarter)))
			if dq >= 20*time.Millisecond && growth > 2.5 {
				failures = append(failures, fmt.Sprintf("%s: a byte costs %.1f× as much in %d bytes as in %d (%v vs %v): not linear",
					s.name, growth, len(body), len(quarter), d, dq))
			}
			if len(failures) == 0 {
				break
			}
		}
		for _, f := range failures {
			t.Error(f + " (on each of 3 attempts)")
		}
		// Allocation: a few bytes per body byte at most (the weigher keeps
		// no copy of the body; key bookkeeping is 8 bytes per key).
		if alloc > 4*uint64(len(body))+1<<20 {
			t.Errorf("%s: allocated %d bytes for a %d-byte body", s.name, alloc, len(body))
		}
	}
}
