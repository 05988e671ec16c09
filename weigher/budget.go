package weigher

import (
	"math"
	"time"
	"unicode/utf8"
)

// checkEveryBytes is how many bytes of text are counted exactly between two
// readings of the clock of [Options.CountTimeBudget]: a clock read costs
// ~20–50 ns, 4 KiB of text ~100 µs to count, so checking costs nothing
// measurable; a body smaller than this is never checked at all.
const checkEveryBytes = 4 << 10

// budget is one request's allowance of exact counting
// ([Options.ExactMaxBytes], [Options.CountTimeBudget]): once it is spent,
// the rest of the request's text is counted with the upper bound of
// bound.go. It is made per request by weighRow and used by one goroutine.
type budget struct {
	now        func() time.Time
	deadline   time.Time // zero: no time budget
	exactLeft  int64     // bytes of text still counted exactly (math.MaxInt64: no limit)
	untilCheck int       // bytes to count before the clock is read again
	over       bool      // spent: the rest is bounded
	bounded    bool      // some text was bounded (Estimate.Bounded)
}

// spend records n more bytes counted exactly and reads the clock when due.
func (b *budget) spend(n int) {
	b.exactLeft -= int64(n)
	b.untilCheck -= n
	if b.exactLeft <= 0 {
		b.over = true
		return
	}
	if b.untilCheck <= 0 {
		b.untilCheck = checkEveryBytes
		if !b.deadline.IsZero() && !b.now().Before(b.deadline) {
			b.over = true
		}
	}
}

// allowance is how many bytes may be counted exactly before spend is due.
func (b *budget) allowance() int { return int(min(b.exactLeft, int64(max(b.untilCheck, 1)))) }

// budgetCounter is a request's counter: the shared counter of its encoding
// (exact; bpe its fast form, nil for tiktoken-go's) under the request's
// budget. countText calls it as any counter; a text it is given is counted
// exactly up to the piece where the budget runs out, and bounded from there.
type budgetCounter struct {
	exact counter
	bpe   *bpeCounter
	b     *budget
}

func (bc budgetCounter) count(text string) int64 {
	b := bc.b
	if bc.bpe == nil { // tiktoken-go: the budget is checked per call
		if b.over {
			b.bounded = true
			return byteBound(text)
		}
		n := bc.exact.count(text)
		b.spend(len(text))
		return n
	}
	if !utf8.ValidString(text) {
		text = validText(text)
	}
	var n int64
	i := 0
	for i < len(text) && !b.over {
		k, j := bc.bpe.countFrom(text, i, i+b.allowance())
		n += k
		b.spend(j - i)
		i = j
	}
	if i < len(text) {
		b.bounded = true
		n += bc.bpe.boundFrom(text, i)
	}
	return n
}

// weighRow weighs body with r under the request budget of
// [Options.ExactMaxBytes] and [Options.CountTimeBudget]. A body that cannot
// reach either limit (no larger than ExactMaxBytes and, with a time budget,
// smaller than checkEveryBytes) is weighed as it always was, with the
// shared counters. Any other gets a shallow copy of w whose encoders are
// budgetCounters sharing one budget (a handful of allocations, for bodies
// of kilobytes), so chat.go, messages.go and the other per-kind code count
// through it unchanged; Estimate.Bounded reports whether the bound was used.
func (w *Weigher) weighRow(r *kindRow, body []byte, resolve func(string) string) Estimate {
	bySize := w.exactMax > 0 && int64(len(body)) > w.exactMax
	byTime := w.timeBudget > 0 && len(body) >= checkEveryBytes
	if !bySize && !byTime {
		return r.weigh(w, body, resolve)
	}
	b := &budget{now: w.now, exactLeft: math.MaxInt64, untilCheck: checkEveryBytes}
	if bySize {
		b.exactLeft = w.exactMax
	}
	if byTime {
		b.deadline = w.now().Add(w.timeBudget)
	}
	rw := *w
	rw.budget = b
	rw.encoders = make(map[string]counter, len(w.encoders))
	for name, c := range w.encoders {
		bpe, _ := c.(*bpeCounter)
		rw.encoders[name] = budgetCounter{exact: c, bpe: bpe, b: b}
	}
	e := r.weigh(&rw, body, resolve)
	e.Bounded = b.bounded
	return e
}
