package weigher

import (
	"strings"
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
		{`{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 2}}`, ""},
		{`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"output_tokens":2}}`, "END"},
		{`{"type":"message_delta","delta":{"stop_reason":"word_word","stop_sequence":null},"usage":{"output_tokens":2}}`, "word_word"},
		{`{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","explanation":"declined"},"container":{"id":"container_1","expires_at":"2026-12-07T00:00:00Z"}},"context_management":{"applied_edits":[{"type":"clear_tool_uses_20250919"}]},"usage":{"output_tokens":2}}`, ""},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"text":"a"},"usage":{"output_tokens":2}}`, "a"},
		{`{"type":"message_delta","x":["b"],"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`, "b"},
		{`{"type":"message_delta","delta":{"stop_reason":["c"],"stop_sequence":null},"usage":{"output_tokens":2}}`, "c"},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2,"x":"` + strings.Repeat("v", 1024) + `"}}`, strings.Repeat("v", 1024)},
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
		strayStrings(lastGet(root, "delta"), &j, "stop_reason", "stop_details", "container")
		j.add(undocumentedStopReason(lastGet(root, "delta", "stop_reason")))
		oversizedStrings(root, &j, "type", "usage", "context_management")
		oversizedStrings(lastGet(root, "delta"), &j, "stop_details", "container")
		addStructured(lastGet(root, "delta", "stop_reason"), &j)
		if j.n > 0 || lastGet(root, "type").Str != "message_delta" {
			t.Fatalf("compactMessageDelta(%q) = true, but it holds %q", data, j.String())
		}
	})
}

// TestStartEventsText checks what a message_start and a
// content_block_start yield: nothing in the shapes Anthropic sends
// (compact or with documented members), every string of a member they do
// not document, and Uncounted for a thinking block started with a
// signature.
func TestStartEventsText(t *testing.T) {
	for _, tc := range []struct {
		typ, data, text string
		uncounted       bool
	}{
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":1}}}`, "", false},
		{"message_start", `{"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-opus-4-6", "stop_reason": null, "stop_sequence": null, "container": {"id": "c", "expires_at": "2026"}, "stop_details": {"type": "refusal", "explanation": "declined"}, "usage": {"input_tokens": 8, "output_tokens": 1, "service_tier": "standard"}}}`, "", false},
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"text":"a","usage":{"input_tokens":8}}}`, "a", false},
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8},"text":"a"}}`, "a", false},
		{"message_start", `{"type":"message_start","x":{"y":["b"]},"message":{"id":"msg_01","usage":{"input_tokens":8}}}`, "b", false},
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","stop_reason":"c","stop_sequence":"d","usage":{"input_tokens":8}}}`, "dc", false},
		{"message_start", `{"type":"message_start","message":{"id":"` + strings.Repeat("i", 63) + `","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8}}}`, strings.Repeat("i", 63), false},
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"` + strings.Repeat("m", 62) + `","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8}}}`, "", false},
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"x":"` + strings.Repeat("u", 1024) + `"}}}`, strings.Repeat("u", 1024), false},
		{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"m","stop_reason":{"r":["s"]},"stop_sequence":null,"usage":{"input_tokens":8}}}`, "s", false},
		{"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`, "", false},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","citations":[{"cited_text":"q"}]}}`, "", false},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`, "", false},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":"Eq"}}`, "", true},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"e","x":"f"}}`, "ef", false},
		{"content_block_start", `{"type":"content_block_start","index":0,"g":"h","content_block":{"type":"text","text":""}}`, "h", false},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":"","i":"j"}}`, "j", false},
		{"content_block_start", `{"type":"content_block_start","index":0,"k":"l","content_block":{"type":"redacted_thinking","data":"zz"}}`, "l", true},
	} {
		_, text, ups := feed(KindMessages, []sseEvent{{tc.typ, tc.data}})
		if text != tc.text || ups[0].Uncounted != tc.uncounted {
			t.Errorf("%s: text %q, Uncounted %v; want %q, %v", tc.data, text, ups[0].Uncounted, tc.text, tc.uncounted)
		}
	}
}

// FuzzCompactStartNeverHidesText checks that a message_start
// compactMessageStart calls compact, and a content_block_start
// compactBlockStart calls compact, hold no string the walk would count:
// the shortcuts never drop text.
func FuzzCompactStartNeverHidesText(f *testing.F) {
	f.Add([]byte(`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":8,"output_tokens":1}}}`))
	f.Add([]byte(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"x":"w"},"text":"w"}}`))
	f.Add([]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	f.Add([]byte(`{"type":"content_block_start","index":10,"content_block":{"type":"thinking","thinking":"","signature":""}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		root, ok := parseObject(data, 64)
		if !ok {
			return
		}
		var j textJoiner
		if compactMessageStart(data, lastGet(root, "message", "usage")) {
			msg := lastGet(root, "message")
			strayStrings(root, &j, "type", "message")
			strayStrings(msg, &j, messageMembers...)
			j.add(undocumentedStopReason(lastGet(msg, "stop_reason")))
			oversizedStrings(root, &j, "type")
			oversizedStrings(msg, &j, messageFramingMembers...)
			addStructured(lastGet(msg, "stop_reason"), &j)
			if t := lastGet(msg, "content"); mayHoldOutput(t) {
				j.add(t)
			}
			if j.n > 0 || lastGet(root, "type").Str != "message_start" {
				t.Fatalf("compactMessageStart(%q) = true, but it holds %q", data, j.String())
			}
		}
		b := lastGet(root, "content_block")
		if btype := lastGet(b, "type").String(); compactBlockStart(data, btype) {
			strayStrings(root, &j, "type", "index", "content_block")
			strayStrings(b, &j, "type")
			if j.n > 0 || lastGet(root, "type").Str != "content_block_start" || mayHoldOutput(lastGet(b, "signature")) {
				t.Fatalf("compactBlockStart(%q, %q) = true, but it holds %q", data, btype, j.String())
			}
		}
	})
}
