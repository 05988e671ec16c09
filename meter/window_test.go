package meter

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/spec"
)

// A window limit's settlement lands in the window of the take, on the
// store's clock, even when it comes after the boundary: a sliding window's
// refund lowers the previous window's count, and a fixed window's extra
// charge for a window that has ended charges nothing.
func TestTimelineWindowSettlesIntoTheTakesWindow(t *testing.T) {
	tl := newTimeline(t, `  - {name: tpm-sliding, scope: user, unit: tokens, rate: 1000, per: 1m, algorithm: sliding_window}
  - {name: tpm-fixed, scope: user, unit: tokens, rate: 1000, per: 1m, algorithm: fixed_window}
`)
	tl.advance(50 * time.Second) // the clock starts on a minute boundary
	x := tl.admit(100, 400)
	if x.Verdict() != Admitted {
		t.Fatalf("verdict %v, want admitted", x.Verdict())
	}
	y := tl.admit(100, 100)
	if y.Verdict() != Admitted {
		t.Fatalf("verdict %v, want admitted", y.Verdict())
	}
	tl.advance(20 * time.Second) // 10s into the next window
	// x used 150 of 500: the sliding window's previous window counts
	// 700 − 350 = 350, weighing 350 × 50/60 ≈ 291.7.
	x.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 120, OutputTokens: 30}, Status: 200})
	if got := tl.level(tl.mem, "tpm-sliding"); got != 708 {
		t.Fatalf("sliding: %d left, want 708: the refund must lower the previous window", got)
	}
	// y used 600 of 200: 400 more, for a fixed window that has ended.
	y.Settle(Settlement{Source: spec.SourceReported, Usage: spec.Usage{InputTokens: 100, OutputTokens: 500}, Status: 200})
	if got := tl.level(tl.mem, "tpm-fixed"); got != 1000 {
		t.Fatalf("fixed: %d left, want 1000: a past window's charge applies to nothing", got)
	}
	// 350 + 400 = 750 in the previous window, weighing 625.
	if got := tl.level(tl.mem, "tpm-sliding"); got != 375 {
		t.Fatalf("sliding: %d left, want 375: the charge goes to the previous window", got)
	}
}
