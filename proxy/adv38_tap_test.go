package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// TestTapUnreadTerminalKeepsReservedFees: a Responses terminal event too
// large to read (its output's web_search_call, file_search_call and
// image_generation_call items unread) settles at its usage, read as it
// passes, and at least the web searches, file searches and image tokens
// reserved; a stream read whole is charged the items it shows.
func TestTapUnreadTerminalKeepsReservedFees(t *testing.T) {
	items := `{"type":"web_search_call","id":"ws"},{"type":"file_search_call","id":"fs"},{"type":"image_generation_call","id":"ig","size":"1024x1024","quality":"low","result":"` + strings.Repeat("A", 4000) + `"}`
	stream := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[" + items +
		"],\"usage\":{\"input_tokens\":900,\"output_tokens\":500}}}\n\n"
	est := weigher.Estimate{InputTokens: 9, OutputTokens: 100, WebSearches: 3, FileSearches: 4, ImageTokens: 5000}
	for _, c := range []struct {
		name              string
		maxEvent          int
		wantWeb, wantFile int64
		wantImage         int32
		wantSource        weigher.Source
	}{
		{name: "unread", maxEvent: 3000, wantWeb: 3, wantFile: 4, wantImage: 5000, wantSource: weigher.SourceReported},
		{name: "read", maxEvent: 0, wantWeb: 1, wantFile: 1, wantImage: 272, wantSource: weigher.SourceReported},
	} {
		tap := newUsageTap(weigher.NewStream(weigher.KindResponses), false, true, func(s string) int64 { return int64(len(s)) / 5 })
		tap.sc.MaxEventBytes = c.maxEvent
		tap.feed([]byte(stream))
		if tap.unreadData != (c.maxEvent > 0) {
			t.Fatalf("%s: unreadData %v: not the case under test", c.name, tap.unreadData)
		}
		u, source := tap.settle(est)
		if u.WebSearches != c.wantWeb || u.FileSearches != c.wantFile || u.ImageTokens != c.wantImage || source != c.wantSource || u.OutputTokens != 500 {
			t.Errorf("%s: %v, %d web searches, %d file searches, %d image tokens, %d output; want %v, %d, %d, %d, 500",
				c.name, source, u.WebSearches, u.FileSearches, u.ImageTokens, u.OutputTokens, c.wantSource, c.wantWeb, c.wantFile, c.wantImage)
		}
	}
}
