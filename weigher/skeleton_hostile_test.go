package weigher

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The tests here are an adversary's cases against the skeleton fast paths
// (chunk_skeleton.go, delta_skeleton.go, response_skeleton.go): each
// stream opens with the event a skeleton is built from and follows it with
// events that differ from it in one hostile way (a same-length string
// whose escapes change its meaning, \u escapes and lone surrogates, bytes
// that are not UTF-8, a string turned number, null, array or object, a key
// respelled, escaped or named twice, content turned tool_calls in the same
// structure, space and CRLF around, an event name changed, usage or an
// error arriving and text after it, events at the size and string-count
// bounds). Each stream is read with the fast path and in full
// (skeletonRun, deltaRun, responseRun): every update, usage, flag and the
// settlement must agree.

// chatHostile are chat chunk streams; each line is one event.
var chatHostile = [][]string{
	// Same-length strings whose escapes change their meaning.
	{`{"choices":[{"delta":{"content":"ab"}}]}`, `{"choices":[{"delta":{"content":"\n"}}]}`, `{"choices":[{"delta":{"content":"\""}}]}`, `{"choices":[{"delta":{"content":"\\"}}]}`},
	{`{"choices":[{"delta":{"content":"abcdef"}}]}`, `{"choices":[{"delta":{"content":"\u0041"}}]}`, `{"choices":[{"delta":{"content":"\ud800"}}]}`, `{"choices":[{"delta":{"content":"\ud83d\ude00"}}]}`, `{"choices":[{"delta":{"content":"\ud800\u0041"}}]}`, `{"choices":[{"delta":{"content":"\u0000"}}]}`},
	// Bytes that are not UTF-8, a raw control byte, a bad escape.
	{`{"choices":[{"delta":{"content":"ab"}}]}`, "{\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}", "{\"choices\":[{\"delta\":{\"content\":\"\x01\"}}]}", `{"choices":[{"delta":{"content":"\x"}}]}`, `{"choices":[{"delta":{"content":"a\"}}]}`},
	// A string turned number, null, array, object, boolean.
	{`{"choices":[{"delta":{"content":"a"}}]}`, `{"choices":[{"delta":{"content":5}}]}`, `{"choices":[{"delta":{"content":null}}]}`, `{"choices":[{"delta":{"content":["a"]}}]}`, `{"choices":[{"delta":{"content":{"t":"a"}}}]}`, `{"choices":[{"delta":{"content":true}}]}`, `{"choices":[{"delta":{"content":"b"}}]}`},
	// Keys respelled, escaped, named twice; strings that close early.
	{`{"choices":[{"delta":{"content":"a"}}]}`, `{"choices":[{"delta":{"Content":"a"}}]}`, `{"choices":[{"delta":{"cont\u0065nt":"a"}}]}`, `{"choices":[{"delta":{"content":"a","content":"b"}}]}`, `{"choices":[{"delta":{"content":"a","b":"c"}}]}`, `{"choices":[{"delta":{"content":"a"}}],"choices":[]}`},
	// Content turned tool_calls, refusal, reasoning in the same structure.
	{`{"choices":[{"delta":{"content":"abc"}}]}`, `{"choices":[{"delta":{"refusal":"abc"}}]}`, `{"choices":[{"delta":{"reasoning":"abc"}}]}`, `{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"x"}}]}}]}`, `{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"yz"}}]}}]}`, `{"choices":[{"delta":{"tool_calls":[{"function":{"argument":"yz"}}]}}]}`},
	// A string the walk reads only for its emptiness (audio, an unknown member, obfuscation).
	{`{"choices":[{"delta":{"content":"a","audio":""}}],"obfuscation":""}`, `{"choices":[{"delta":{"content":"a","audio":"x"}}],"obfuscation":""}`, `{"choices":[{"delta":{"content":"a","audio":""}}],"obfuscation":"q"}`, `{"choices":[{"delta":{"content":"","audio":""}}],"obfuscation":""}`},
	{`{"choices":[{"delta":{"content":"a","x":"y"}}]}`, `{"choices":[{"delta":{"content":"b","x":""}}]}`, `{"choices":[{"delta":{"content":"c","x":"zz"}}]}`},
	// Space, CRLF, \v, NBSP around the chunk.
	{`{"choices":[{"delta":{"content":"a"}}]}`, " {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\r\n", "\v{\"choices\":[{\"delta\":{\"content\":\"c\"}}]}", "{\"choices\":[{\"delta\":{\"content\":\"d\"}}]}\xc2\xa0", `{"choices":[{"delta":{"content": "e"}}]}`, "{\"choices\":[{\"delta\":{\"content\":\"f\"}}]}\x00"},
	// Usage, an error, [DONE], then text after them (late).
	{`{"choices":[{"delta":{"content":"a"}}],"usage":null}`, `{"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`, `{"choices":[{"delta":{"content":"late"}}],"usage":null}`, `{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`, `{"choices":[{"delta":{"content":"later"}}],"usage":null}`},
	{`{"choices":[{"delta":{"content":"a"}}],"usage":{}}`, `{"choices":[{"delta":{"content":"b"}}],"usage":{}}`, `{"choices":[{"delta":{"content":"a"}}],"usage":{"x":"y"}}`, `{"choices":[{"delta":{"content":"a"}}],"us\u0061ge":{"prompt_tokens":1,"completion_tokens":2}}`, `{"choices":[{"delta":{"content":"c"}}],"usage":{}}`},
	{`{"choices":[{"delta":{"content":"a"}}],"error":null}`, `{"choices":[{"delta":{"content":"a"}}],"error":"boom"}`, `{"choices":[{"delta":{"content":"b"}}],"error":null}`, `[DONE]`, `{"choices":[{"delta":{"content":"c"}}],"error":null}`},
	// Unreadable chunks between matches.
	{`{"choices":[{"delta":{"content":"a"}}]}`, `{"choices":[{"delta":{"content":"a"}}]`, `not json`, `{"choices":[{"delta":{"content":"b"}}]}`},
}

// TestChatSkeletonHostile reads chatHostile, and chunks at the size and
// string-count bounds, with the fast path and in full.
func TestChatSkeletonHostile(t *testing.T) {
	for i, c := range chatHostile {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ev := make([][]byte, len(c))
			for j, e := range c {
				ev[j] = []byte(e)
			}
			skeletonRun(t, KindChat, 0, ev)
			skeletonRun(t, KindChat, 4, ev)
			skeletonRun(t, KindCompletions, 0, ev)
		})
	}
	// At and past the bounds: maxSkeletonBytes bytes, maxSkeletonStrings strings.
	sized := func(n int, fill string) []byte {
		head := `{"choices":[{"delta":{"content":"`
		tail := `"}}]}`
		return []byte(head + strings.Repeat(fill, n-len(head)-len(tail)) + tail)
	}
	strs := func(n int, text string) []byte {
		var b strings.Builder
		b.WriteString(`{"choices":[{"delta":{"content":"` + text + `"}}]`)
		for i := range n - 1 {
			fmt.Fprintf(&b, `,"s%d":"v"`, i)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	for _, n := range []int{maxSkeletonBytes - 1, maxSkeletonBytes, maxSkeletonBytes + 1} {
		skeletonRun(t, KindChat, 0, [][]byte{sized(n, "a"), sized(n, "b"), sized(n, "\n"[:1]), sized(maxSkeletonBytes, "c"), sized(n, "d")})
	}
	for _, n := range []int{maxSkeletonStrings - 1, maxSkeletonStrings, maxSkeletonStrings + 1} {
		if fast := skeletonRun(t, KindChat, 0, [][]byte{strs(n, "a"), strs(n, "b"), strs(n, `\"`), strs(n, "")}); n > maxSkeletonStrings && fast != 0 {
			t.Errorf("%d strings: %d chunks read on the fast path, want none", n, fast)
		}
	}
}

// TestMessagesDeltaHostile reads hostile Messages deltas with the fast
// path and in full.
func TestMessagesDeltaHostile(t *testing.T) {
	const d = "content_block_delta"
	ev := func(name, data string) rawEvent { return rawEvent{[]byte(name), []byte(data)} }
	streams := [][]rawEvent{
		{ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ab"}}`), ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\n"}}`),
			ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud800"}}`), ev(d, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\"}}"),
			ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}`), ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}  `)},
		// The string closing early, the suffix repeated inside it.
		{ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`), ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}},"x":{"y":""}}`),
			ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"}}"}}`), ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}`)},
		// Event names changed, missing, spaced; the type moved into the name.
		{ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`), ev("", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}`),
			ev(" "+d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"c"}}`), ev(d, `{"index":0,"delta":{"type":"text_delta","text":"d"}}`), ev("ping", `{"index":0,"delta":{"type":"text_delta","text":"e"}}`), ev(d, `{"index":0,"delta":{"type":"text_delta","text":"f"}}`)},
		// Usage, stop, then text after them (late).
		{ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`), ev("message_delta", `{"type":"message_delta","usage":{"output_tokens":1}}`),
			ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"late"}}`), ev("message_stop", `{"type":"message_stop"}`), ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"later"}}`)},
		// Unreadable events between matches.
		{ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`), ev(d, `{"type":"content_block_delta"`), ev(d, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}`)},
	}
	for i, s := range streams {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			deltaRun(t, 0, s)
			deltaRun(t, 3, s)
		})
	}
}

// TestResponsesDeltaHostile reads hostile Responses deltas with the fast
// path and in full.
func TestResponsesDeltaHostile(t *testing.T) {
	ev := func(data string) rawEvent { return rawEvent{nil, []byte(data)} }
	base := `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"x1"}`
	r := func(old, new string) rawEvent { return ev(strings.Replace(base, old, new, 1)) }
	streams := [][]rawEvent{
		{ev(base), r(`4`, `"4"`), r(`4`, `-0`), r(`4`, `1e999`), r(`4`, `04`), r(`4`, `4.`), r(`4`, `4 `), r(`:4`, `:44444444444444444444444`)},
		{ev(base), r(`"Hi"`, `5`), r(`"Hi"`, `null`), r(`"Hi"`, `"\ud800"`), r(`"Hi"`, "\"\xff\""), r(`"Hi"`, `"\""`), r(`"Hi"`, `""`)},
		{ev(base), r(`output_text`, `audio`), r(`output_text`, `refusal`), r(`output_text.delta`, `output_text.done`), r(`"type"`, `"Type"`), r(`"delta"`, `"d\u0065lta"`)},
		{ev(base), r(`[]`, `[1]`), r(`"x1"`, `""`), r(`"msg_1"`, `"a\"b"`), r(`"obfuscation":"x1"`, `"obfuscation":"x1","delta":"z"`)},
		{ev(base), ev(`{"type":"response.completed","response":{"usage":{"input_tokens":1,"output_tokens":1}}}`), r(`"Hi"`, `"late"`)},
	}
	for i, s := range streams {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			responseRun(t, 0, s)
			responseRun(t, 1, s)
		})
	}
}

// splitEvents splits a fuzz input into events: events are separated by
// NUL bytes, and an event's SSE name, if any, precedes its data and a 0x01
// byte.
func splitEvents(stream []byte) []rawEvent {
	var out []rawEvent
	for _, e := range bytes.Split(stream, []byte{0}) {
		var name []byte
		if j := bytes.IndexByte(e, 1); j >= 0 {
			name, e = e[:j], e[j+1:]
		}
		out = append(out, rawEvent{name, e})
	}
	return out
}

// joinEvents is splitEvents' inverse.
func joinEvents(ev []rawEvent) []byte {
	var out []byte
	for i, e := range ev {
		if i > 0 {
			out = append(out, 0)
		}
		if len(e.name) > 0 {
			out = append(append(out, e.name...), 1)
		}
		out = append(out, e.data...)
	}
	return out
}

// FuzzStreamSkeletons is a differential fuzz test of the three skeleton
// fast paths over whole streams the fuzzer writes (FuzzChunkSkeleton and
// its siblings derive their streams from two events): each stream is read
// as chat, completions, Messages and Responses, with the fast paths and in
// full, at two nesting limits, and must say the same at every event and
// when settled.
func FuzzStreamSkeletons(f *testing.F) {
	g := chunkGen{r: rand.New(rand.NewPCG(5, 11))}
	for i := range 8 {
		f.Add(joinEvents(messagesStream(g)))
		f.Add(joinEvents(responsesStream(g)))
		var ev []rawEvent
		for j := range 10 {
			ev = append(ev, rawEvent{nil, []byte(g.chunk((i+j/4)%12, j%3 == 0, j%2 == 0))})
		}
		f.Add(joinEvents(ev))
	}
	for _, c := range chatHostile {
		var ev []rawEvent
		for _, e := range c {
			ev = append(ev, rawEvent{nil, []byte(e)})
		}
		f.Add(joinEvents(ev))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		ev := splitEvents(stream)
		if len(ev) > 64 {
			return
		}
		data := make([][]byte, len(ev))
		for i, e := range ev {
			data[i] = e.data
		}
		for _, depth := range []int{0, 3} {
			skeletonRun(t, KindChat, depth, data)
			skeletonRun(t, KindCompletions, depth, data)
			deltaRun(t, depth, ev)
			responseRun(t, depth, ev)
		}
	})
}
