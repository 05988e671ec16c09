package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// TestTapTruncatedEventUsage: a Responses stream whose response.completed
// is too large to read whole (it repeats a long output; the event limit
// or the answer budget passes it on in Truncated pieces) is settled at the
// usage that event reports, at least the output reservation: a lenient
// upstream reporting 50,000 output tokens (reasoning, unseen) was charged
// the 100-token reservation. The usage is found wherever the pieces cut
// it, on one data line or spread over several, and its figures are the
// dearer of two.
func TestTapTruncatedEventUsage(t *testing.T) {
	text := strings.Repeat("word ", 400)
	head := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"
	output := "{\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"" + text + text + "\"}]}],"
	for _, c := range []struct {
		name, stream string
		wantIn       int64
		wantOut      int64
	}{
		{name: "one line", stream: head + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + output +
			"\"usage\":{\"input_tokens\":900,\"output_tokens\":50000,\"total_tokens\":50900}}}\n\n", wantIn: 900, wantOut: 50000},
		{name: "type in the event field, lines split", stream: head + "event: response.completed\ndata: {\"response\":" + output +
			"\ndata: \"usage\":{\"input_tokens\":900,\n" + "data: \"output_tokens\":50000}}}\n\n", wantIn: 900, wantOut: 50000},
		{name: "usage named twice", stream: head + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + output +
			"\"usage\":{\"input_tokens\":900,\"output_tokens\":10},\"usage\":{\"input_tokens\":10,\"output_tokens\":50000}}}\n\n", wantIn: 900, wantOut: 50000},
		{name: "usage below the reservation", stream: head + "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + output +
			"\"usage\":{\"input_tokens\":900,\"output_tokens\":3}}}\n\n", wantIn: 900, wantOut: 100},
	} {
		for _, size := range []int{1, 7, 100, 4096, len(c.stream)} {
			tap := newUsageTap(weigher.NewStream(weigher.KindResponses), false, true, func(s string) int64 { return int64(len(s)) / 5 })
			tap.sc.MaxEventBytes = 3000 // the deltas fit, response.completed does not
			for b := []byte(c.stream); len(b) > 0; {
				n := min(size, len(b))
				tap.feed(b[:n])
				b = b[n:]
			}
			if !tap.unreadData {
				t.Fatalf("%s, pieces of %d: response.completed was read: not the case under test", c.name, size)
			}
			u, _ := tap.settle(weigher.Estimate{InputTokens: 9, OutputTokens: 100})
			if u.InputTokens != c.wantIn || u.OutputTokens != c.wantOut {
				t.Errorf("%s, pieces of %d: settled %d input, %d output; want %d, %d (the unread event's usage, at least the reservation)",
					c.name, size, u.InputTokens, u.OutputTokens, c.wantIn, c.wantOut)
			}
		}
	}
}
