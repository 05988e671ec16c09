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
			if string(tap.text) != " Hello world" {
				t.Errorf("%s (pieces of %d): counted text %q", tc.name, size, tap.text)
			}
		}
	}
}

// FuzzUsageTap: for any upstream bytes cut anywhere, the tap never panics,
// passes every byte through unchanged when not stripping, and when
// stripping removes exactly the usage-only events a one-shot parse finds.
func FuzzUsageTap(f *testing.F) {
	f.Add([]byte(chatStream), uint16(3), uint16(40))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\r\rdata: x\r"), uint16(1), uint16(2))
	f.Add([]byte("\xef\xbb\xbfdata: [DONE]\n\ndata"), uint16(5), uint16(0))
	f.Fuzz(func(t *testing.T, input []byte, a, b uint16) {
		cuts := []int{int(a) % (len(input) + 1), int(b) % (len(input) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		plain := runTap(&usageTap{stream: weigher.NewStream(weigher.KindChat)}, input, cuts)
		if !bytes.Equal(plain, input) {
			t.Fatalf("pass-through changed the bytes:\n%q\n%q", input, plain)
		}
		var want []byte
		var sc sse.Scanner
		sc.Feed(input, func(raw []byte, ev sse.Event) {
			if ev.HasData && !ev.Truncated && weigher.ParseChatChunk(ev.Data).UsageOnly {
				return
			}
			want = append(want, raw...)
		})
		want = append(want, sc.Buffered()...)
		stripped := runTap(&usageTap{stream: weigher.NewStream(weigher.KindChat), strip: true}, input, cuts)
		if !bytes.Equal(stripped, want) {
			t.Fatalf("strip:\n got %q\nwant %q", stripped, want)
		}
	})
}
