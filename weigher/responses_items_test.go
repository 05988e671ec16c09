package weigher

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestResponsesItemTextCountedWithoutUsage walks Responses streams whose
// text comes at one level or several (deltas, content parts, output
// items, the terminal event's output), and checks what each counts: the
// text once, whatever levels repeat it, when no usage settles the stream;
// beside a usage, the text no delta showed given with the terminal event
// (the tap checks the usage against it: adv39); what no delta carries (a function call's name)
// counted once, never the streamed text again.
func TestResponsesItemTextCountedWithoutUsage(t *testing.T) {
	const text = "The quick brown fox jumps over the lazy dog."
	ev := func(typ, rest string) [2]string {
		return [2]string{typ, `{"type":"` + typ + `"` + rest + `}`}
	}
	msg := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}`
	call := `{"type":"function_call","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`
	delta := ev("response.output_text.delta", `,"delta":"`+text+`"`)
	textDone := ev("response.output_text.done", `,"text":"`+text+`"`)
	part := ev("response.content_part.done", `,"part":{"type":"output_text","text":"`+text+`"}`)
	item := ev("response.output_item.done", `,"item":`+msg)
	callArgs := ev("response.function_call_arguments.delta", `,"delta":"{\"city\":\"Paris\"}"`)
	callItem := ev("response.output_item.done", `,"item":`+call)
	completed := func(rest string) [2]string {
		return ev("response.completed", `,"response":{"status":"completed"`+rest+`}`)
	}
	usage := `,"usage":{"input_tokens":7,"output_tokens":11}`
	// The added events (items37): empty in an honest stream, holding the
	// text in a hostile one.
	addedItem := ev("response.output_item.added", `,"item":`+msg)
	addedPart := ev("response.content_part.added", `,"part":{"type":"output_text","text":"`+text+`"}`)
	emptyItem := ev("response.output_item.added", `,"item":{"type":"message","role":"assistant","content":[]}`)
	emptyPart := ev("response.content_part.added", `,"part":{"type":"output_text","text":""}`)
	addedCall := ev("response.output_item.added", `,"item":{"type":"function_call","name":"get_weather","arguments":""}`)
	big := strings.Repeat("word ", itemMemoMax/5+100)
	for _, tc := range []struct {
		name      string
		events    [][2]string
		want      string // the text counted, joined
		uncounted bool
		final     bool
	}{
		{name: "text only in an item", events: [][2]string{item, completed("")}, want: text},
		{name: "text only in an item, error", events: [][2]string{item, ev("error", `,"message":"x"`)}, want: text},
		{name: "text in a part and its item", events: [][2]string{part, item, completed("")}, want: text},
		{name: "text in a part alone", events: [][2]string{part, completed("")}, want: text},
		{name: "text done, part and item", events: [][2]string{textDone, part, item, completed("")}, want: text},
		{name: "deltas, part and item", events: [][2]string{delta, textDone, part, item, completed("")}, want: text},
		{name: "item and an empty output", events: [][2]string{item, completed(`,"output":[]`)}, want: text},
		{name: "item and the same output", events: [][2]string{item, completed(`,"output":[` + msg + `]`)}, want: text},
		{name: "a usage: the items' text given to check it", events: [][2]string{item, completed(usage)}, want: text, final: true},
		{name: "a usage, then an error", events: [][2]string{item, completed(usage), ev("error", `,"message":"x"`)}, want: text, final: true},
		{name: "a usage, then an item and an error", events: [][2]string{completed(usage), item, ev("error", `,"message":"x"`)}, final: true},
		{name: "an item after an error is matched afresh", events: [][2]string{delta, item, ev("error", `,"message":"x"`), item, completed("")}, want: text + text},
		{name: "function call: arguments streamed, name not", events: [][2]string{callArgs, callItem, completed("")}, want: `{"city":"Paris"}get_weather`},
		{name: "function call in the output: name counted once", events: [][2]string{callArgs, completed(`,"output":[` + call + `]`)}, want: `{"city":"Paris"}get_weather`},
		{name: "one item streamed, one only in the output", events: [][2]string{delta, completed(`,"output":[` + msg + `,` + strings.Replace(msg, "quick", "sleek", 1) + `]`)},
			want: text + strings.Replace(text, "quick", "sleek", 1)},
		{name: "one item streamed, one only in an item event", events: [][2]string{delta, item, ev("response.output_item.done", `,"item":`+strings.Replace(msg, "quick", "sleek", 1)), completed("")},
			want: text + strings.Replace(text, "quick", "sleek", 1)},
		{name: "text only in an added item", events: [][2]string{addedItem, completed("")}, want: text},
		{name: "text only in an added part", events: [][2]string{emptyItem, addedPart, completed("")}, want: text},
		{name: "text only in an added item, error", events: [][2]string{addedItem, ev("error", `,"message":"x"`)}, want: text},
		{name: "text in an added item and its done item", events: [][2]string{addedItem, item, completed("")}, want: text},
		{name: "text at every level", events: [][2]string{addedItem, addedPart, part, item, completed("")}, want: text},
		{name: "text in the added part and the done item", events: [][2]string{emptyItem, addedPart, emptyPart, item, completed("")}, want: text},
		{name: "honest added events, deltas, part and item", events: [][2]string{emptyItem, emptyPart, delta, textDone, part, item, completed("")}, want: text},
		{name: "added item, then another item only done", events: [][2]string{addedItem, item, ev("response.output_item.done", `,"item":`+strings.Replace(msg, "quick", "sleek", 1)), completed("")},
			want: text + strings.Replace(text, "quick", "sleek", 1)},
		{name: "added function call: name counted once", events: [][2]string{addedCall, callArgs, callItem, completed("")}, want: `{"city":"Paris"}get_weather`},
		{name: "added item and a usage: given to check it", events: [][2]string{addedItem, completed(usage)}, want: text, final: true},
		{name: "encrypted reasoning item", events: [][2]string{ev("response.output_item.done", `,"item":{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}`), completed("")}, uncounted: true},
		{name: "items past the cap", events: [][2]string{ev("response.output_item.done", `,"item":{"type":"message","content":[{"type":"output_text","text":"`+big+`"}]}`), completed("")},
			want: big[:itemMemoMax], uncounted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(KindResponses)
			var got strings.Builder
			uncounted := false
			for _, e := range tc.events {
				u := s.Event([]byte(e[0]), []byte(e[1]))
				got.WriteString(u.Text)
				uncounted = uncounted || u.Uncounted
			}
			if got.String() != tc.want {
				t.Errorf("counted %q (%d bytes), want %q (%d bytes)", abbrev(got.String()), got.Len(), abbrev(tc.want), len(tc.want))
			}
			if uncounted != tc.uncounted {
				t.Errorf("uncounted %v, want %v", uncounted, tc.uncounted)
			}
			if f := s.Usage().Final; f != tc.final {
				t.Errorf("final %v, want %v", f, tc.final)
			}
		})
	}
}

// abbrev is s, cut to 80 bytes.
func abbrev(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// FuzzResponsesItemTextCounted checks, over Responses streams the fuzzer
// writes (events as splitEvents reads them), that what a stream without a
// usage counts never holds fewer bytes than any one level of its text: at
// each terminal or "error" event, the bytes of Text counted so far are at
// least those of the output_item.done items' text (responsesItemText), of
// the content parts' text and refusals seen so far, and of the
// output_item.added items' and content_part.added parts' (items37), unless an update
// was Uncounted (the output reservation is kept) or Unread, or a usage
// came (it settles the stream).
func FuzzResponsesItemTextCounted(f *testing.F) {
	g := chunkGen{r: rand.New(rand.NewPCG(35, 7))}
	for range 8 {
		f.Add(joinEvents(responsesStream(g)))
	}
	msg := `{"type":"message","content":[{"type":"output_text","text":"Hello there"}]}`
	f.Add(joinEvents([]rawEvent{
		{nil, []byte(`{"type":"response.output_text.delta","delta":"Hello"}`)},
		{nil, []byte(`{"type":"response.content_part.done","part":{"type":"output_text","text":"Hello there"}}`)},
		{nil, []byte(`{"type":"response.output_item.done","item":` + msg + `}`)},
		{nil, []byte(`{"type":"error"}`)},
		{nil, []byte(`{"type":"response.output_item.done","item":{"type":"function_call","name":"f","arguments":"{}"}}`)},
		{nil, []byte(`{"type":"response.completed","response":{"output":[` + msg + `]}}`)},
	}))
	f.Add(joinEvents([]rawEvent{
		{nil, []byte(`{"type":"response.output_text.delta","delta":"Hello there"}`)},
		{nil, []byte(`{"type":"response.output_item.done","item":` + msg + `}`)},
		{nil, []byte(`{"type":"error"}`)},
		{nil, []byte(`{"type":"response.output_item.done","item":` + msg + `}`)},
		{nil, []byte(`{"type":"response.completed","response":{}}`)},
	}))
	f.Add(joinEvents([]rawEvent{
		{nil, []byte(`{"type":"response.output_item.added","item":` + msg + `}`)},
		{nil, []byte(`{"type":"response.content_part.added","part":{"type":"output_text","text":"Hello"}}`)},
		{nil, []byte(`{"type":"response.output_item.added","item":{"type":"function_call","name":"f","arguments":"{}"}}`)},
		{nil, []byte(`{"type":"response.output_item.done","item":{"type":"function_call","name":"f","arguments":"{}"}}`)},
		{nil, []byte(`{"type":"error"}`)},
		{nil, []byte(`{"type":"response.output_item.added","item":` + msg + `}`)},
		{nil, []byte(`{"type":"response.completed","response":{}}`)},
	}))
	f.Fuzz(func(t *testing.T, stream []byte) {
		ev := splitEvents(stream)
		if len(ev) > 64 {
			return
		}
		s := NewStream(KindResponses)
		counted, items, parts, addedItems, addedParts := 0, 0, 0, 0, 0
		for i, e := range ev {
			u := s.Event(e.name, e.data)
			if u.Unread || u.Uncounted || u.HasUsage {
				return
			}
			counted += len(u.Text)
			root, ok := parseObject(e.data, 0)
			if !ok {
				continue
			}
			switch eventTypeOf(root, e.name) {
			case "response.output_item.done":
				responsesItemText(lastGet(root, "item"), func(r gjson.Result) { items += stringBytes(r) })
			case "response.output_item.added":
				responsesItemText(lastGet(root, "item"), func(r gjson.Result) { addedItems += stringBytes(r) })
			case "response.content_part.done", "response.reasoning_summary_part.done":
				if p := lastGet(root, "part"); p.IsObject() {
					parts += stringBytes(p.Get("text")) + stringBytes(p.Get("refusal"))
				}
			case "response.content_part.added", "response.reasoning_summary_part.added":
				if p := lastGet(root, "part"); p.IsObject() {
					addedParts += stringBytes(p.Get("text")) + stringBytes(p.Get("refusal"))
				}
			case "response.completed", "response.incomplete", "response.failed", "error":
				if counted < items || counted < parts || counted < addedItems || counted < addedParts {
					t.Fatalf("event %d %q: counted %d bytes, the items held %d, the parts %d, the added items %d, the added parts %d",
						i, e.data, counted, items, parts, addedItems, addedParts)
				}
			}
		}
	})
}

// BenchmarkStreamResponsesItems reads responsesStreamEvents with the
// content_part.done and output_item.done events OpenAI sends before
// response.completed: "read" as they are, "unread" with their type
// renamed to another *.done type (response.output_item_x.done), which
// responsesEvent reads as before this memory (their top-level text
// only), so the ratio of the two is what remembering the items costs an
// honest stream.
func BenchmarkStreamResponsesItems(b *testing.B) {
	names, data := responsesStreamEvents()
	const text = `"The quick brown fox jumps over the lazy dog. It\u2019s a pangram: \"every\" letter!"`
	last := len(data) - 1
	extra := []string{
		`{"type":"response.content_part.done","sequence_number":22,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"part":{"type":"output_text","text":` + text + `,"annotations":[]}}`,
		`{"type":"response.output_item.done","sequence_number":23,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + text + `,"annotations":[]}]}}`,
	}
	for _, mode := range []string{"read", "unread"} {
		b.Run(mode, func(b *testing.B) {
			n := append([][]byte{}, names[:last]...)
			d := append([][]byte{}, data[:last]...)
			for _, e := range extra {
				if mode == "unread" {
					e = strings.Replace(e, `.done"`, `_x.done"`, 1)
				}
				n = append(n, nil)
				d = append(d, []byte(e))
			}
			benchStream(b, KindResponses, append(n, names[last]), append(d, data[last]))
		})
	}
}

// responsesItemTextGet is responsesItemText as it read an item before it
// walked it once: each field found with gjson's Get (the reference
// FuzzResponsesItemFieldsSameAsGet holds it to).
func responsesItemTextGet(it gjson.Result, add func(gjson.Result)) (hidden bool) {
	if !it.IsObject() {
		return false
	}
	if it.Get("type").Str == "reasoning" && nonEmptyString(it.Get("encrypted_content")) {
		hidden = true
	}
	add(it.Get("name"))
	add(it.Get("arguments"))
	add(it.Get("input"))
	for _, path := range [...]string{"code", "action.command", "action.commands", "operation.diff", "operation.path"} {
		if v := it.Get(path); v.IsArray() {
			v.ForEach(func(_, c gjson.Result) bool {
				add(c)
				return true
			})
		} else {
			add(v)
		}
	}
	for _, parts := range [...]gjson.Result{it.Get("content"), it.Get("summary")} {
		parts.ForEach(func(_, p gjson.Result) bool {
			add(p.Get("text"))
			add(p.Get("refusal"))
			return true
		})
	}
	return hidden
}

// FuzzResponsesItemFieldsSameAsGet: the one walk of an output item
// (responsesOutputFields) reads the strings the Get-based reference read,
// in its order, and the same hidden output, for valid JSON items.
func FuzzResponsesItemFieldsSameAsGet(f *testing.F) {
	f.Add(`{"type":"message","content":[{"type":"output_text","text":"hi"},{"type":"refusal","refusal":"no"}]}`)
	f.Add(`{"type":"function_call","name":"f","arguments":"{}","input":"x","name":"g"}`)
	f.Add(`{"type":"reasoning","summary":[{"text":"s","text":"t"}],"encrypted_content":"gAAA"}`)
	f.Add(`{"type":"code_interpreter_call","code":["a","b"],"action":{"command":["ls","-l"],"commands":"x"},"operation":{"path":"p","diff":"d"}}`)
	f.Add(`{"na\u006de":"f","content":[1,{"text":2}],"summary":{"text":"o"}}`)
	f.Fuzz(func(t *testing.T, item string) {
		if !gjson.Valid(item) {
			return
		}
		it := gjson.Parse(item)
		var got, want []string
		gh := responsesItemText(it, func(r gjson.Result) {
			if r.Type == gjson.String && r.Str != "" {
				got = append(got, r.Str)
			}
		})
		wh := responsesItemTextGet(it, func(r gjson.Result) {
			if r.Type == gjson.String && r.Str != "" {
				want = append(want, r.Str)
			}
		})
		if gh != wh || strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("%s: read %q hidden %v, the reference %q hidden %v", item, got, gh, want, wh)
		}
	})
}

// BenchmarkStreamResponsesFullOutput reads BenchmarkStreamResponsesItems'
// "read" stream with the terminal event carrying its output, as OpenAI's
// response.completed does (the message item again): what checking the
// items' text beside a usage (adv39) costs an honest stream.
func BenchmarkStreamResponsesFullOutput(b *testing.B) {
	names, data := responsesStreamEvents()
	const text = `"The quick brown fox jumps over the lazy dog. It\u2019s a pangram: \"every\" letter!"`
	const msg = `{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + text + `,"annotations":[]}]}`
	last := len(data) - 1
	n := append([][]byte{}, names[:last]...)
	d := append([][]byte{}, data[:last]...)
	for _, e := range []string{
		`{"type":"response.content_part.done","sequence_number":22,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b","output_index":0,"content_index":0,"part":{"type":"output_text","text":` + text + `,"annotations":[]}}`,
		`{"type":"response.output_item.done","sequence_number":23,"output_index":0,"item":` + msg + `}`,
	} {
		n = append(n, nil)
		d = append(d, []byte(e))
	}
	final := strings.Replace(string(data[last]), `"output":[]`, `"output":[`+msg+`]`, 1)
	benchStream(b, KindResponses, append(n, names[last]), append(d, []byte(final)))
}
