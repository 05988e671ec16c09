package proxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/sse"
	"github.com/llmguard/llmguard/weigher"
)

const chatStream = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n" +
	"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" Hello\"}}],\"usage\":null}\n\n" +
	": keep-alive comment\n\n" +
	"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"}}],\"usage\":null}\r\n\r\n" +
	"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n" +
	"data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\n" +
	"data: [DONE]\n\n"

// runTap feeds input to a tap in pieces cut at the given offsets and returns
// what the client would receive.
func runTap(tap *usageTap, input []byte, cuts []int) []byte {
	var out []byte
	prev := 0
	for _, c := range append(cuts, len(input)) {
		if c < prev || c > len(input) {
			continue
		}
		out = append(out, tap.feed(input[prev:c])...)
		prev = c
	}
	return append(out, tap.end()...)
}

func TestUsageTap(t *testing.T) {
	usageOnly := "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\n"
	for _, tc := range []struct {
		name  string
		strip bool
		want  string
	}{
		{name: "pass-through keeps every byte", strip: false, want: chatStream},
		{name: "strip drops only the usage-only chunk", strip: true, want: strings.Replace(chatStream, usageOnly, "", 1)},
	} {
		for _, size := range []int{1, 7, 64, len(chatStream)} {
			tap := &usageTap{stream: weigher.NewStream(weigher.KindChat), strip: tc.strip}
			var cuts []int
			for c := size; c < len(chatStream); c += size {
				cuts = append(cuts, c)
			}
			got := runTap(tap, []byte(chatStream), cuts)
			if string(got) != tc.want {
				t.Errorf("%s (pieces of %d): client got\n%q\nwant\n%q", tc.name, size, got, tc.want)
			}
			if u := tap.stream.Usage(); !u.Final || u.Usage != (weigher.Usage{InputTokens: 9, OutputTokens: 2}) {
				t.Errorf("%s (pieces of %d): usage %+v", tc.name, size, u)
			}
			if string(tap.text.buf) != " Hello world" {
				t.Errorf("%s (pieces of %d): held text %q", tc.name, size, tap.text.buf)
			}
		}
	}
}

// FuzzUsageTap: for any upstream bytes cut anywhere, the tap never panics,
// passes every byte through unchanged when not stripping, and when
// stripping removes exactly the usage-only events a one-shot parse finds.
func FuzzUsageTap(f *testing.F) {
	f.Add([]byte(chatStream), uint16(3), uint16(40), uint8(0))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\r\rdata: x\r"), uint16(1), uint16(2), uint8(1))
	f.Add([]byte("\xef\xbb\xbfdata: [DONE]\n\ndata"), uint16(5), uint16(0), uint8(2))
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\nevent: message_stop\ndata: {}\n\n"), uint16(30), uint16(90), uint8(4))
	f.Add([]byte("event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":2}}}\r\n\r\n"), uint16(7), uint16(8), uint8(3))
	kinds := []weigher.Kind{weigher.KindChat, weigher.KindCompletions, weigher.KindOther, weigher.KindResponses, weigher.KindMessages}
	f.Fuzz(func(t *testing.T, input []byte, a, b uint16, k uint8) {
		kind := kinds[int(k)%len(kinds)]
		cuts := []int{int(a) % (len(input) + 1), int(b) % (len(input) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		plain := runTap(&usageTap{stream: weigher.NewStream(kind)}, input, cuts)
		if !bytes.Equal(plain, input) {
			t.Fatalf("pass-through changed the bytes:\n%q\n%q", input, plain)
		}
		if kind != weigher.KindChat && kind != weigher.KindCompletions {
			return // llmguard strips only the chat and completions usage chunk
		}
		var want []byte
		var sc sse.Scanner
		ref := weigher.NewStream(kind)
		sc.Feed(input, func(raw []byte, ev sse.Event) {
			if ev.HasData && !ev.Truncated && ref.Event(ev.Type, ev.Data).UsageOnly {
				return
			}
			want = append(want, raw...)
		})
		want = append(want, sc.Buffered()...)
		stripped := runTap(&usageTap{stream: weigher.NewStream(kind), strip: true}, input, cuts)
		if !bytes.Equal(stripped, want) {
			t.Fatalf("strip:\n got %q\nwant %q", stripped, want)
		}
	})
}

// TestTapKeepsCopiesPastTheRead: the scanner hands an event's one data
// line in place, in the stream's read buffer, which the next read
// overwrites (see sse.Event.Data); what the tap keeps past a read — the
// streamed text held for counting, the usage, the bytes held back while it
// strips — are copies. The stream is fed through one buffer, scribbled over
// after each feed, in pieces of every size.
func TestTapKeepsCopiesPastTheRead(t *testing.T) {
	usageOnly := "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\n"
	for _, strip := range []bool{false, true} {
		for size := 1; size <= len(chatStream); size++ {
			tap := &usageTap{stream: weigher.NewStream(weigher.KindChat), strip: strip}
			var out []byte
			read := make([]byte, size)
			for off := 0; off < len(chatStream); off += size {
				n := copy(read, chatStream[off:])
				out = append(out, tap.feed(read[:n])...)
				for i := range read {
					read[i] = '#'
				}
			}
			out = append(out, tap.end()...)
			want := chatStream
			if strip {
				want = strings.Replace(chatStream, usageOnly, "", 1)
			}
			if string(out) != want {
				t.Fatalf("strip %v, reads of %d: client got %q", strip, size, out)
			}
			if string(tap.text.buf) != " Hello world" {
				t.Errorf("strip %v, reads of %d: held text %q, want %q", strip, size, tap.text.buf, " Hello world")
			}
			if u := tap.stream.Usage(); !u.Final || u.Usage != (weigher.Usage{InputTokens: 9, OutputTokens: 2}) {
				t.Errorf("strip %v, reads of %d: usage %+v", strip, size, u)
			}
		}
	}
}
