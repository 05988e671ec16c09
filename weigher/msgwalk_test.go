package weigher

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// messageTokensGJSON is messageTokens as it read a message's content parts
// and tool calls before partTally, eachValue and callTally: with gjson's
// ForEach and Get. Kept as the reference the raw reader must equal.
func messageTokensGJSON(enc counter, model string, m gjson.Result) tally {
	if !m.IsObject() {
		return tally{}
	}
	n := int64(tokensPerMessage)
	hidden, audio := false, false
	rawMembers(m.Raw, func(k string, v gjson.Result) bool {
		switch k {
		case "role", "refusal":
			n += countText(enc, rawString(v))
		case "name":
			n += countText(enc, rawString(v)) + tokensPerName
		case "content":
			if v.IsArray() {
				v.ForEach(func(_, p gjson.Result) bool {
					n += partTokens(enc, model, p)
					hidden = hidden || partHidden(p)
					audio = audio || partAudio(p)
					return true
				})
			} else {
				n += countText(enc, rawString(v))
			}
		case "tool_calls":
			v.ForEach(func(_, c gjson.Result) bool {
				n += callTokensGJSON(enc, c.Get("function"))
				return true
			})
		case "function_call":
			n += callTokensGJSON(enc, v)
		case "audio":
			if v.Type != gjson.Null {
				hidden, audio = true, true
			}
		}
		return true
	})
	return tally{text: n, hidden: hidden, audio: audio}
}

// callTokensGJSON is callTally as gjson's Get read it.
func callTokensGJSON(enc counter, fn gjson.Result) int64 {
	if !fn.IsObject() {
		return 0
	}
	return tokensPerToolCall + countText(enc, stringOf(fn.Get("name"))) + countText(enc, stringOf(fn.Get("arguments")))
}

// messageWalkCases are chat messages of every shape messageTokens reads:
// content as a string, parts of each type (escaped types and texts,
// members in either order, bare strings, numbers), tool calls as an
// array, an object, a string or null, function_call, audio.
var messageWalkCases = []string{
	`{"role":"user","content":"hello there, how are you?"}`,
	`{"role":"user","content":[{"type":"text","text":"hi"},{"text":"first","type":"text"},"bare \u00e9 string",42,null,{"type":"refusal","refusal":"no"}]}`,
	`{"role":"user","content":[{"type":"te\u0078t","text":"esc\naped \ud83d\ude00"},{"type":"text"},{"type":"text","text":7},{"type":5,"text":"x"},{"type":"text","refusal":"r"}]}`,
	`{"role":"user","content":[{"type":"refusal","text":"t"},{"type":"text","text":"a","input_audio":null},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"input_audio":1}]}`,
	`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"high"}},{"type":"image_url","image_url":"https://x/y.png"}]}`,
	`{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}},{"type":"other","x":[1,2]},{}]}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"rates\"}"}},{"function":{"arguments":"{}","name":"f"}},{"function":"x"},"s",3,{"function":{"name":1}}]}`,
	`{"role":"assistant","tool_calls":{"a":{"function":{"name":"f","arguments":"1"}},"b":2}}`,
	`{"role":"assistant","tool_calls":"not a list"}`,
	`{"role":"assistant","tool_calls":null,"function_call":{"name":"g","arguments":"{\"a\":1}"}}`,
	`{"role":"assistant","tool_calls":[[{"function":{"name":"f"}}]],"function_call":"x"}`,
	`{"role":"assistant","content":"","audio":{"id":"audio_1"},"name":"bob","refusal":"sorry"}`,
	`{"role":"assistant","audio":null,"tool_calls":[]}`,
	`{"role":"user","content":[]}`,
	`{"role":"user","content":[{"type":"text","text":"only this part","input_audio":{}}]}`,
	`{"role":"user","content":[{"type":"refusal","refusal":"only a refusal"}]}`,
	`{}`,
	`[1,2]`,
	`"a string message"`,
}

// TestMessageTokensSameAsGJSON: the raw reader of a message's parts and
// tool calls counts every shape as the gjson reader did.
func TestMessageTokensSameAsGJSON(t *testing.T) {
	w := testWeigher(t)
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		for _, m := range messageWalkCases {
			if !sameMessageTokens(t, w.encoders[enc], "gpt-4o", []byte(m)) {
				t.Fatalf("%s does not pass the strict scan", m)
			}
		}
	}
}

// sameMessageTokens checks messageTokens against messageTokensGJSON on m
// when m passes the weigher's strict scan (as every message weighed has),
// and returns whether it did.
func sameMessageTokens(t *testing.T, enc counter, model string, m []byte) bool {
	t.Helper()
	if jsonscan.Check(m, jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
		return false
	}
	raw := string(bytes.TrimSpace(m))
	v := rawValue(raw)
	if got, want := messageTokens(enc, model, v), messageTokensGJSON(enc, model, v); got != want {
		t.Fatalf("%s: %+v, gjson reader %+v", raw, got, want)
	}
	return true
}

// FuzzMessageTokensSameAsGJSON: on any message that passes the strict
// scan, the raw reader counts what the gjson reader counted.
func FuzzMessageTokensSameAsGJSON(f *testing.F) {
	for _, m := range messageWalkCases {
		f.Add([]byte(m))
	}
	f.Add([]byte(strings.Repeat(`{"role":"user","content":[`, 1) + `{"type":"text","text":"` + strings.Repeat("word ", 40) + `"}]}`))
	w := testWeigher(f)
	enc := w.encoders[EncodingO200k]
	f.Fuzz(func(t *testing.T, m []byte) {
		sameMessageTokens(t, enc, "gpt-4o", m)
	})
}
