package weigher

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// TestColdKindsMatchTiktoken: countText gives tiktoken-go's count on 16 KB
// of each benchmarked text kind, in both encodings.
func TestColdKindsMatchTiktoken(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	for _, k := range textKinds {
		text := kindText(k.name, 16<<10)
		for _, enc := range []string{EncodingO200k, EncodingCL100k} {
			if got, want := countText(w.encoders[enc], text), reference(t, enc).count(text); got != want {
				t.Errorf("%s %s: countText = %d, tiktoken-go says %d", k.name, enc, got, want)
			}
		}
	}
}

// boundSamples are texts that stress the bound: the alphabet of
// TestBPECounterMatchesTiktoken, runs that merge a lot or not at all,
// random bytes and random letters.
func boundSamples(r *rand.Rand) []string {
	s := []string{"", "a", "ab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", strings.Repeat(" ", 300),
		strings.Repeat("-", 90), strings.Repeat("ab", 200), "\xff\xfe\xfd", "q" + strings.Repeat("z", 64),
		cookbookMessages, cookbookTools}
	for range 3000 {
		s = append(s, randomText(r, 1+r.IntN(40)))
	}
	for range 300 {
		b := make([]byte, 1+r.IntN(200))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		s = append(s, string(b))
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[r.IntN(52)]
		}
		s = append(s, string(b))
	}
	return s
}

func TestBoundNeverBelowExact(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	samples := boundSamples(rand.New(rand.NewPCG(3, 4)))
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c := w.encoders[enc].(*bpeCounter)
		for _, s := range samples {
			if b, n := c.bound(s), c.count(s); b < n {
				t.Errorf("%s: bound(%q) = %d < count %d", enc, s, b, n)
			}
		}
	}
	for _, s := range samples {
		if b, n := byteBound(s), w.encoders[EncodingP50k].count(s); b < n {
			t.Errorf("p50k_base: byteBound(%q) = %d < count %d", s, b, n)
		}
	}
}

// TestBoundRatio measures bound / exact over 2 MiB of each text kind (10
// MiB in all, o200k_base and cl100k_base), per 4 KiB slice and in total:
// no slice may be bounded below its exact count. The figures it logs are
// those of bound.go's doc comment and the README.
func TestBoundRatio(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	if testing.Short() {
		t.Skip("10 MiB of text")
	}
	w := testWeigher(t)
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c := w.encoders[enc].(*bpeCounter)
		for _, k := range textKinds {
			text := kindText(k.name, 2<<20)
			var exact, bound int64
			lo, hi := 1e9, 0.0
			for i := 0; i < len(text); {
				j := min(i+4<<10, len(text))
				for j < len(text) && (text[j]&0xc0 == 0x80) { // whole runes
					j++
				}
				n, b := countText(c, text[i:j]), c.bound(text[i:j])
				if b < n {
					t.Errorf("%s %s: bound %d < exact %d at byte %d", enc, k.name, b, n, i)
				}
				r := float64(b) / float64(n)
				lo, hi = min(lo, r), max(hi, r)
				exact, bound = exact+n, bound+b
				i = j
			}
			t.Logf("%s %-6s bound/exact %.3f (4 KiB slices: %.3f–%.3f)", enc, k.name, float64(bound)/float64(exact), lo, hi)
		}
	}
}

func FuzzBound(f *testing.F) {
	for _, s := range []string{"tiktoken is great!", "I'M HERE'S", "a\u0301\u0301b", " \n\t x", "٣٣٣٣", "ǅǅa'LL", "\xff\x00zz"} {
		f.Add(s)
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, enc := range []string{EncodingO200k, EncodingCL100k} {
			c := w.encoders[enc].(*bpeCounter)
			if b, n := c.bound(s), c.count(s); b < n {
				t.Errorf("%s: bound(%q) = %d < count %d", enc, s, b, n)
			}
		}
	})
}

// stepClock is a clock that moves by step at every reading.
type stepClock struct {
	t     time.Time
	step  time.Duration
	reads int
}

func (c *stepClock) now() time.Time { c.reads++; c.t = c.t.Add(c.step); return c.t }

func budgetWeigher(t *testing.T, opts Options) *Weigher {
	t.Helper()
	opts.Models = map[string]Model{"my-legacy-model": {Encoding: EncodingP50k}}
	// Cold: remembered counts cost no budget (and TestBoundCountsAreNotRemembered
	// covers the two together).
	opts.CacheBytes = -1
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTimeBudgetSwitchesToBound: with a clock that says the budget is
// spent at its second reading, a 128 KB chat body is weighed Bounded, at
// least its exact estimate; with a clock that stands still, exactly.
func TestTimeBudgetSwitchesToBound(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	body := chatBody(t, 128<<10)
	exact := testWeigher(t).Chat(body)
	for _, step := range []struct {
		name    string
		step    time.Duration
		bounded bool
	}{
		{name: "clock stands still", step: 0, bounded: false},
		{name: "budget spent at the second reading", step: 25 * time.Millisecond, bounded: true},
	} {
		clk := &stepClock{t: time.Unix(1e9, 0), step: step.step}
		w := budgetWeigher(t, Options{CountTimeBudget: 20 * time.Millisecond, Now: clk.now})
		e := w.Weigh(KindChat, body)
		if e.Bounded != step.bounded || !e.Parsed {
			t.Fatalf("%s: Bounded %v Parsed %v, want Bounded %v", step.name, e.Bounded, e.Parsed, step.bounded)
		}
		if step.bounded && e.InputTokens <= exact.InputTokens || !step.bounded && e.InputTokens != exact.InputTokens {
			t.Errorf("%s: %d input tokens, exact %d", step.name, e.InputTokens, exact.InputTokens)
		}
		if want := 1 + 1; step.bounded && clk.reads != want { // start, then the reading that found it spent
			t.Errorf("%s: clock read %d times, want %d", step.name, clk.reads, want)
		}
		if !step.bounded && clk.reads < len(body)/checkEveryBytes/2 {
			t.Errorf("%s: clock read %d times for %d bytes", step.name, clk.reads, len(body))
		}
		t.Logf("%s: %d tokens (exact %d), %d clock readings", step.name, e.InputTokens, exact.InputTokens, clk.reads)
	}
	// A body under checkEveryBytes is never timed.
	clk := &stepClock{t: time.Unix(1e9, 0), step: time.Hour}
	w := budgetWeigher(t, Options{CountTimeBudget: time.Nanosecond, Now: clk.now})
	if e := w.Weigh(KindChat, chatBody(t, 2<<10)); e.Bounded || clk.reads != 0 {
		t.Errorf("2 KB body: Bounded %v after %d clock readings", e.Bounded, clk.reads)
	}
}

// TestExactMaxBytes: a body whose text runs past ExactMaxBytes is
// Bounded, never below the exact count; one whose text does not (a body at
// or just above the limit: its text is shorter than the body) is exact.
// Every weighed kind goes through the budget.
func TestExactMaxBytes(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	exactW := testWeigher(t)
	bodies := map[Kind][]byte{KindChat: chatBody(t, 64<<10), KindMessages: messagesBody(t, 64<<10), KindResponses: responsesBody(t, 64<<10)}
	for k, body := range bodies {
		exact := exactW.Weigh(k, body)
		for _, limit := range []int64{1, 16 << 10, int64(len(body)) - 1, int64(len(body))} {
			e := budgetWeigher(t, Options{ExactMaxBytes: limit}).Weigh(k, body)
			over := limit < int64(len(body))/2
			name := fmt.Sprintf("%v, %d-byte body, limit %d", k, len(body), limit)
			if e.Bounded != over || !e.Parsed {
				t.Errorf("%s: Bounded %v Parsed %v", name, e.Bounded, e.Parsed)
			}
			if e.InputTokens < exact.InputTokens || !over && e.InputTokens != exact.InputTokens {
				t.Errorf("%s: %d input tokens, exact %d", name, e.InputTokens, exact.InputTokens)
			}
			t.Logf("%s: %d tokens, exact %d (%.2f)", name, e.InputTokens, exact.InputTokens, float64(e.InputTokens)/float64(exact.InputTokens))
		}
	}
}

func TestBudgetOptionsValidated(t *testing.T) {
	for _, o := range []Options{{ExactMaxBytes: -1}, {CountTimeBudget: -time.Second}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// BenchmarkBound compares the upper bound with the exact count on 128 KB
// of each text kind (o200k_base), in the same run.
func BenchmarkBound(b *testing.B) {
	c := testWeigher(b).encoders[EncodingO200k].(*bpeCounter)
	for _, k := range textKinds {
		text := kindText(k.name, 128<<10)
		b.Run(k.name+"/exact", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				countText(c, text)
			}
		})
		b.Run(k.name+"/bound", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				n = c.bound(text)
			}
			b.ReportMetric(float64(n)/float64(countText(c, text)), "bound/exact")
		})
	}
}
