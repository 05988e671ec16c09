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
