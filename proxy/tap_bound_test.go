package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/sse"
	"github.com/llmguard/llmguard/weigher"
)

// TestTapHoldsBoundedText streams 8 MiB of content without usage through
// the tap: the text it holds stays under two counting pieces whatever the
// stream's length, and what it counts in pieces equals a count of the
// whole text.
func TestTapHoldsBoundedText(t *testing.T) {
	w := testWeigher(t)
	count := func(s string) int64 { return w.CountText("gpt-4o-mini", s) }
	tap := usageTap{stream: weigher.NewStream(weigher.KindChat), count: count}
	const word = "lorem ipsum dolor sit amet, consectetur adipiscing elit "
	var whole strings.Builder
	maxHeld := 0
	for i := 0; whole.Len() < 8<<20; i++ {
		piece := fmt.Sprintf("%s%d ", word, i)
		whole.WriteString(piece)
		tap.feed([]byte(`data: {"choices":[{"index":0,"delta":{"content":"` + piece + `"}}]}` + "\n\n"))
		maxHeld = max(maxHeld, cap(tap.text))
	}
	if maxHeld > 2*(tapTextPiece+len(word)+16) {
		t.Errorf("the tap held up to %d bytes of text for an 8 MiB stream, want under two pieces of %d", maxHeld, tapTextPiece)
	}
	if got, want := tap.outputTokens(), count(whole.String()); got != want {
		t.Errorf("counted %d tokens in pieces, %d in one count of the whole text", got, want)
	}
}

// TestTapMarksUnreadData: an event over the scanner's limit is relayed but
// not read, and the tap says so.
func TestTapMarksUnreadData(t *testing.T) {
	tap := usageTap{stream: weigher.NewStream(weigher.KindChat)}
	big := `data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", sse.DefaultMaxEventBytes) + `"}}]}` + "\n\n"
	out := tap.feed([]byte(big))
	if len(out) != len(big) {
		t.Errorf("relayed %d of %d bytes", len(out), len(big))
	}
	if !tap.unread {
		t.Error("an event over the scanner's limit was not marked unread")
	}
}

// sseAnswer is a whole HTTP answer carrying body as an event stream.
func sseAnswer(body string) string {
	return "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + itoa(len(body)) + "\r\n\r\n" + body
}

// TestStreamsLlmguardCannotReadKeepTheirCharge: a stream without usage
// whose output llmguard could not read (an event too large to parse) keeps
// the output reservation; a stream whose usage object has no readable
// figures is charged its input and its text counted locally, not nothing.
func TestStreamsLlmguardCannotReadKeepTheirCharge(t *testing.T) {
	w := testWeigher(t)
	est := w.Chat([]byte(panicStreamBody))
	content := func(s string) string {
		return `data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n"
	}
	for _, tc := range []struct {
		name   string
		stream string
		want   int64
	}{
		{"event over the scanner's limit, no usage",
			content("hello") + content(strings.Repeat("x ", sse.DefaultMaxEventBytes/2+1)) + "data: [DONE]\n\n",
			est.InputTokens + est.OutputTokens},
		{"usage without figures",
			content("hello world") + `data: {"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":null}}` + "\n\ndata: [DONE]\n\n",
			est.InputTokens + w.CountText("gpt-4o-mini", "hello world")},
		{"negative usage",
			content("hello world") + `data: {"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":-100}}` + "\n\ndata: [DONE]\n\n",
			est.InputTokens + w.CountText("gpt-4o-mini", "hello world")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startRawUpstream(t, sseAnswer(tc.stream))
			r := newRig(t, rigOptions{url: up.url(), w: w})
			full := r.remaining()
			status, _, _, err := r.do("/v1/chat/completions", panicStreamBody)
			if err != nil || status != 200 {
				t.Fatalf("status %d, err %v", status, err)
			}
			r.waitLedger(1) // a stream settles after its last byte left
			if charged := full - r.remaining(); charged < tc.want {
				t.Errorf("charged %d, want at least %d", charged, tc.want)
			}
		})
	}
}

// waitLedger waits (generously) until n ledger records are written: the
// ledger record is a settlement's last step.
func (r *panicRig) waitLedger(n int) {
	r.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); r.ledger.count() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d ledger records after 30s, want %d", r.ledger.count(), n)
		}
	}
}
