package proxy

import (
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// TestTapCountsIncrementallyOnlyWithoutUsage: with more text than
// tapCountEvery (8 KiB) and less than tapTextMax (64 KiB), a stream that
// is expected to report its usage and does is never counted, while one not
// expected to report any is counted as it goes (before it ends, in pieces
// of about tapCountEvery), and charged its text. Issue #13, item 4: a
// stream's output is counted incrementally and only when the upstream
// reports no usage. (TestTapCountsOnlyWhenNeeded streams 1.2 KB, which
// neither kind counts before the end.)
func TestTapCountsIncrementallyOnlyWithoutUsage(t *testing.T) {
	event := []byte(`data: {"choices":[{"index":0,"delta":{"content":"hello world "}}]}` + "\n\n")
	const events = 2000 // 24,000 bytes of text, 4,000 words
	if n := events * len("hello world "); n <= tapCountEvery || n >= tapTextMax {
		t.Fatalf("%d bytes of text: want between tapCountEvery (%d) and tapTextMax (%d)", n, tapCountEvery, tapTextMax)
	}
	usage := []byte(`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4100,"total_tokens":4109}}` + "\n\n")

	// Expected and reported: held, never counted; the usage is the bill.
	c := &wordCounter{}
	tap := newUsageTap(weigher.NewStream(weigher.KindChat), false, true, c.count)
	for range events {
		tap.feed(event)
	}
	tap.feed(usage)
	u, _ := tap.settle(weigher.Estimate{InputTokens: 9})
	if c.calls != 0 || u.OutputTokens != 4100 {
		t.Errorf("usage expected and reported: counted %d times (%d bytes), output %d; want no count, 4100", c.calls, c.bytes, u.OutputTokens)
	}

	// Not expected: counted while it streams, then charged its words.
	c = &wordCounter{}
	tap = newUsageTap(weigher.NewStream(weigher.KindChat), false, false, c.count)
	for range events {
		tap.feed(event)
	}
	during := c.calls
	u, _ = tap.settle(weigher.Estimate{InputTokens: 9})
	if during < 2 {
		t.Errorf("usage not expected: counted %d times while streaming %d bytes, want at least 2 (every %d bytes)", during, events*len("hello world "), tapCountEvery)
	}
	if want := int64(2 * events); u.OutputTokens != want {
		t.Errorf("usage not expected: output %d, want %d (its words)", u.OutputTokens, want)
	}
}
