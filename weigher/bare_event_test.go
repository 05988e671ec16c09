package weigher

import (
	"testing"

	"github.com/tidwall/gjson"
)

// bareEventCases are events bareEvent is asked about, with whether it
// must call them bare (true) or may not (false).
var bareEventCases = []struct {
	data string
	bare bool
}{
	{`{"type":"message_stop"}`, true},
	{`{"type":"content_block_stop","index":12}`, true},
	{`{"type": "ping"}`, true},
	{`{ "index" : 0 , "type" : "content_block_stop" }`, true},
	{`{"type":"ping","n":1,"ok":true,"z":null}`, true},
	{`{"type":"ping","text":"word word"}`, false},
	{`{"text":"word"}`, false},
	{`{"type":"content_block_stop","index":0,"delta":{"text":"w"}}`, false},
	{`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":8}}`, false},
	{`{"type":"ping\",\"text\":\"word","index":0}`, false},
	{`{"type":"content_block_stop","index":0,"x":"w"}`, false},
	{`{"type":"ping","x":["w"]}`, false},
}

// TestBareEvent checks bareEvent on the shapes an honest stream sends and
// on events carrying a string beside their type, which must be walked.
func TestBareEvent(t *testing.T) {
	for _, tc := range bareEventCases {
		if got := bareEvent([]byte(tc.data)); got != tc.bare {
			t.Errorf("bareEvent(%s) = %v, want %v", tc.data, got, tc.bare)
		}
	}
}

// FuzzBareEventNeverHidesText checks that an event bareEvent calls bare
// holds no string deltaStrings would count: the shortcut never drops text.
func FuzzBareEventNeverHidesText(f *testing.F) {
	for _, tc := range bareEventCases {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root, ok := parseObject(data, 64)
		if !ok {
			return
		}
		if bareEvent(data) {
			if s := deltaStrings(root); s != "" {
				t.Fatalf("bareEvent(%q) = true, but it holds the text %q", data, s)
			}
			if !root.IsObject() || root.Get("type").Type == gjson.JSON {
				t.Fatalf("bareEvent(%q) = true for a value not a flat object", data)
			}
		}
	})
}

// FuzzCompactDeltaNeverHidesText checks that a content_block_delta
// compactDelta calls compact holds no string but its type, its delta's
// type and its text (strayStrings finds none): the shortcut never drops
// text.
func FuzzCompactDeltaNeverHidesText(f *testing.F) {
	f.Add([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`))
	f.Add([]byte(`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"q\""}}`))
	f.Add([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi","x":"w"}}`))
	f.Add([]byte(`{"type":"content_block_delta","x":"w","delta":{"type":"thinking_delta","thinking":"t"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		root, ok := parseObject(data, 64)
		if !ok {
			return
		}
		d := root.Get("delta")
		for _, m := range [][2]string{{"text_delta", "text"}, {"input_json_delta", "partial_json"}, {"thinking_delta", "thinking"}} {
			if !compactDelta(data, m[0], m[1], lastGet(d, m[1])) {
				continue
			}
			var j textJoiner
			strayStrings(root, &j, "type", "index", "delta")
			strayStrings(d, &j, "type", m[1])
			if j.n > 0 || lastGet(d, "type").Str != m[0] || lastGet(root, "type").Str != "content_block_delta" {
				t.Fatalf("compactDelta(%q, %s) = true, but it holds %q beside its text", data, m[0], j.String())
			}
		}
	})
}

// TestMessageDeltaDocumentedMembersAreNotText checks that a message_delta
// holding only the members the API documents (stop_details, container,
// context_management) yields no text, compact or not, and one with a
// member it does not document yields that member's strings.
func TestMessageDeltaDocumentedMembersAreNotText(t *testing.T) {
	for _, tc := range []struct{ data, text string }{
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`, ""},
		{`{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": "END"}, "usage": {"output_tokens": 2}}`, ""},
		{`{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","explanation":"declined"},"container":{"id":"container_1","expires_at":"2026-12-07T00:00:00Z"}},"context_management":{"applied_edits":[{"type":"clear_tool_uses_20250919"}]},"usage":{"output_tokens":2}}`, ""},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"text":"a"},"usage":{"output_tokens":2}}`, "a"},
		{`{"type":"message_delta","x":["b"],"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`, "b"},
	} {
		_, text, _ := feed(KindMessages, []sseEvent{{"message_delta", tc.data}})
		if text != tc.text {
			t.Errorf("%s: text %q, want %q", tc.data, text, tc.text)
		}
	}
}

// FuzzCompactMessageDeltaNeverHidesText checks that a message_delta
// compactMessageDelta calls compact holds no string strayStrings would
// count: the shortcut never drops text.
func FuzzCompactMessageDeltaNeverHidesText(f *testing.F) {
	f.Add([]byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":18}}`))
	f.Add([]byte(`{"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":null},"usage":{"output_tokens":1,"x":"w"}}`))
	f.Add([]byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"text":"w"},"usage":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		root, ok := parseObject(data, 64)
		if !ok || !compactMessageDelta(data, lastGet(root, "usage")) {
			return
		}
		var j textJoiner
		strayStrings(root, &j, "type", "delta", "usage", "context_management")
		strayStrings(lastGet(root, "delta"), &j, "stop_reason", "stop_sequence", "stop_details", "container")
		if j.n > 0 || lastGet(root, "type").Str != "message_delta" {
			t.Fatalf("compactMessageDelta(%q) = true, but it holds %q", data, j.String())
		}
	})
}
