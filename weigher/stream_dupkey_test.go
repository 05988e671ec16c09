package weigher

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// FuzzStreamDupKeyEvent: an event naming a key twice never panics, and
// the stream it leaves settles at least as high, figure by figure, and
// yields at least as much text, as a stream fed either of its readings
// (first member wins, last member wins) alone; the stream's fast-path
// skeletons are what they were.
func FuzzStreamDupKeyEvent(f *testing.F) {
	for _, e := range []sseEvent{
		{"message_delta", `{"type":"message_delta","usage":{"output_tokens":1},"usage":{"output_tokens":5000}}`},
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":9,"input_tokens":3000,"output_tokens":1}}}`},
		{"message_delta", `{"type":"ping","type":"message_delta","usage":{"output_tokens":5000}}`},
		{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":1}},"response":{"usage":{"input_tokens":10,"output_tokens":5000}}}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"a","delta":"longer"}`},
		{"", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5000,"completion_tokens":1}}`},
		{"", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5000},"usage":null}`},
		{"", `{"choices":[{"delta":{"content":"a","content":"a much longer text"}}]}`},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"x","text":"yy"}}`},
	} {
		for k := range 4 { // an index into the kinds below
			f.Add(uint8(k), []byte(e.typ), []byte(e.data))
		}
	}
	est := Estimate{InputTokens: 5, OutputTokens: 7}
	f.Fuzz(func(t *testing.T, kind uint8, typ, data []byte) {
		k := []Kind{KindChat, KindCompletions, KindResponses, KindMessages}[int(kind)%4]
		s := NewStream(k)
		u := s.Event(typ, data)
		if jsonscan.ReasonOf(jsonscan.Check(data, jsonscan.Options{DuplicateKeys: true})) != jsonscan.DuplicateKey ||
			jsonscan.Check(data, jsonscan.Options{}) != nil {
			return
		}
		if s.skel != nil && s.skel.shape != nil || s.delta != nil || s.resp != nil {
			t.Fatalf("a duplicate-key event left skeletons: %q", data)
		}
		got, _ := s.Settle(est, 0)
		root := gjson.ParseBytes(data)
		for _, last := range []bool{false, true} {
			r := NewStream(k)
			ru := r.Event(typ, dedupeKeys(nil, root, last))
			want, _ := r.Settle(est, 0)
			if want.InputTokens > got.InputTokens || want.OutputTokens > got.OutputTokens || want.CacheWriteTokens > got.CacheWriteTokens ||
				want.WebSearches > got.WebSearches {
				t.Fatalf("kind %v %q: reading (last %v) settles %+v, above the event's %+v", k, data, last, want, got)
			}
			if len(ru.Text) > len(u.Text) || ru.Uncounted && !u.Uncounted || ru.Err && !u.Err || ru.Done && !u.Done {
				t.Fatalf("kind %v %q: reading (last %v) says %+v, more than the event's %+v", k, data, last, ru, u)
			}
		}
	})
}
