package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/llmguard/llmguard/sse"
	"github.com/llmguard/llmguard/weigher"
)

// wordCounter is a cheap stand-in for a tokenizer: one token per run of
// non-spaces. It cuts where safeCut cuts, so pieces add up exactly.
type wordCounter struct{ calls, bytes int }

func (c *wordCounter) count(s string) int64 {
	c.calls++
	c.bytes += len(s)
	var n int64
	in := false
	for _, r := range s { // strings.Fields' count, without its slice
		if sp := unicode.IsSpace(r); !sp && !in {
			n++
			in = true
		} else if sp {
			in = false
		}
	}
	return n
}

// TestTapHoldsBoundedText streams mixed content (prose, code, CJK, emoji:
// mixedText) through the tap, once with the usage arriving at the end and
// once cut off before it: the text the tap holds never exceeds tapTextMax
// (64 KiB); with the usage, only what overflowed that is counted and the
// reported usage is charged; cut off, the text counted in pieces is at
// least the count of the whole text and within a token per piece of it.
// 50 MB are counted by words (the bound on memory does not depend on the
// counter), 4 MiB by the model's tokenizer.
func TestTapHoldsBoundedText(t *testing.T) {
	for _, tc := range []struct {
		total int
		real  bool // counted by the model's tokenizer; a cheap word count otherwise
	}{{50 << 20, false}, {4 << 20, true}} {
		tapHoldsBoundedText(t, tc.total, tc.real)
	}
}

func tapHoldsBoundedText(t *testing.T, total int, real bool) {
	t.Helper()
	w := testWeigher(t)
	plain := mixedText(60) // ~3 KiB per event
	quoted, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	event := []byte(`data: {"choices":[{"index":0,"delta":{"content":` + string(quoted) + `}}]}` + "\n\n")
	for _, usage := range []bool{true, false} {
		c := &wordCounter{}
		count := c.count
		if real {
			count = func(s string) int64 { c.calls++; c.bytes += len(s); return w.CountText("gpt-4o-mini", s) }
		}
		tap := newUsageTap(weigher.NewStream(weigher.KindChat), true, true, count)
		maxHeld, streamed, events := 0, 0, 0
		for ; streamed < total; streamed += len(plain) {
			tap.feed(event)
			events++
			maxHeld = max(maxHeld, cap(tap.text.buf))
		}
		if maxHeld > tapTextMax {
			t.Errorf("%d bytes, usage %v: the tap held up to %d bytes of text for a %d-byte stream, want at most %d", total, usage, maxHeld, streamed, tapTextMax)
		}
		if usage {
			// A usage the text does not contradict: as many tokens as
			// the text has bytes (a lower count has the text counted:
			// TestTapCountsOnlyWhenNeeded).
			tap.feed([]byte(fmt.Sprintf(`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":%d,"total_tokens":%d}}`, streamed, streamed+9) + "\n\ndata: [DONE]\n\n"))
		}
		u, src := tap.settle(weigher.Estimate{InputTokens: 9})
		if usage {
			if src != weigher.SourceReported || u.OutputTokens != int64(streamed) {
				t.Errorf("usage arrived: settled %+v from %v, want the reported %d output tokens", u, src, streamed)
			}
			if c.bytes > streamed-len(plain) || c.bytes < streamed-tapTextMax {
				t.Errorf("usage arrived: counted %d of %d bytes, want only what overflowed the %d bytes held", c.bytes, streamed, tapTextMax)
			}
			continue
		}
		whole := c.count(strings.Repeat(plain, events))
		if real {
			whole = w.CountText("gpt-4o-mini", strings.Repeat(plain, events))
		}
		if got := u.OutputTokens; got < whole || got > whole+int64(c.calls) {
			t.Errorf("cut off: %d tokens counted in %d pieces, %d in the whole text", got, c.calls, whole)
		}
	}
}

// TestTapCountsOnlyWhenNeeded: a stream that reports its usage is not
// counted at all (under tapTextMax of text); one cut off before its usage,
// one not expected to report any, and one whose usage its text
// contradicts (fewer output tokens than text events, or than
// weigher.OutputCheckBytes allows for its text) are counted.
func TestTapCountsOnlyWhenNeeded(t *testing.T) {
	content := func(s string) []byte {
		return []byte(`data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n")
	}
	usageOf := func(out int) []byte {
		return []byte(fmt.Sprintf(`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":%d,"total_tokens":%d}}`, out, out+9) + "\n\n")
	}
	for _, tc := range []struct {
		name            string
		expect, arrives bool
		reported        int   // output tokens the usage reports
		wantCounted     bool  // the text was counted
		want            int64 // output tokens settled
	}{
		{"usage expected and reported", true, true, 300, false, 300},
		{"usage expected, never reported", true, false, 0, true, 200},
		{"usage not expected", false, false, 0, true, 200},
		{"usage below the text events", true, true, 99, true, 200},
	} {
		c := &wordCounter{}
		tap := newUsageTap(weigher.NewStream(weigher.KindChat), false, tc.expect, c.count)
		for range 100 {
			tap.feed(content("hello world "))
		}
		if tc.arrives {
			tap.feed(usageOf(tc.reported))
		}
		u, _ := tap.settle(weigher.Estimate{InputTokens: 9})
		if counted := c.calls > 0; counted != tc.wantCounted {
			t.Errorf("%s: counted %v (%d calls), want %v", tc.name, counted, c.calls, tc.wantCounted)
		}
		if u.OutputTokens != tc.want {
			t.Errorf("%s: output %d, want %d", tc.name, u.OutputTokens, tc.want)
		}
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

// TestStreamsLlmguardCannotReadKeepTheirCharge: a stream without a readable
// usage whose output llmguard could not read (an event too large to parse,
// not JSON, nested past the limit, or naming a key twice) keeps the output
// reservation; a stream whose usage object has no readable
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
		{"chunk naming content twice, no usage",
			content("hello") + `data: {"choices":[{"index":0,"delta":{"content":"a","content":"` + strings.Repeat("y ", 2000) + `"}}]}` + "\n\ndata: [DONE]\n\n",
			est.InputTokens + est.OutputTokens},
		{"usage named twice",
			content("hello") + `data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1},"usage":{"prompt_tokens":1,"completion_tokens":9000}}` + "\n\ndata: [DONE]\n\n",
			est.InputTokens + est.OutputTokens},
		{"chunk that is not JSON, no usage",
			content("hello") + "data: {\"choices\":[{\"delta\":{\"content\":'single quotes'}}]}\n\ndata: [DONE]\n\n",
			est.InputTokens + est.OutputTokens},
		{"chunk nested past the limit, no usage",
			content("hello") + `data: {"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `,"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("z ", 2000) + `"}}]}` + "\n\ndata: [DONE]\n\n",
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
			// The upstream writes its whole answer at once; the timeout,
			// which bounds the whole exchange (Upstream.Timeout), is the
			// production default, far above its relay: relaying an event
			// of 16 MiB through the tap under -race took past the rig's
			// 10s on a loaded machine, and the stream was then cut by the
			// timeout (the client's "unexpected EOF"), not by llmguard.
			r := newRig(t, rigOptions{url: up.url(), w: w, timeout: 10 * time.Minute})
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
