package weigher

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// responseRun feeds events to a Responses Stream with its *.delta fast
// path and to a reference Stream whose skeleton is dropped before every
// event, and fails on the first update, usage or settlement that differs.
// It returns how many events the fast path read.
func responseRun(t testing.TB, maxDepth int, events []rawEvent) (fast int) {
	t.Helper()
	s := Stream{kind: KindResponses, maxDepth: maxDepth}
	ref := Stream{kind: KindResponses, maxDepth: maxDepth}
	for i, e := range events {
		if s.resp != nil {
			if _, ok := s.resp.match(e.data, maxDepth); ok {
				fast++
			}
		}
		got := s.Event(e.name, e.data)
		ref.resp = nil
		want := ref.Event(e.name, e.data)
		if got != want {
			t.Fatalf("event %d %q %q: fast path %+v, full read %+v", i, e.name, e.data, got, want)
		}
		if g, w := s.Usage(), ref.Usage(); g != w {
			t.Fatalf("event %d %q: usage %+v, full read %+v", i, e.data, g, w)
		}
		if s.Err() != ref.Err() || s.Done() != ref.Done() || s.deltaText != ref.deltaText || s.doneText != ref.doneText {
			t.Fatalf("event %d %q: Err/Done/deltaText/doneText differ", i, e.data)
		}
		if !sameItemMemo(s.items, ref.items) {
			t.Fatalf("event %d %q: items remembered %+v, full read %+v", i, e.data, s.items, ref.items)
		}
	}
	est := Estimate{InputTokens: 10, OutputTokens: 20}
	gu, gs := s.Settle(est, 7)
	wu, ws := ref.Settle(est, 7)
	if gu != wu || gs != ws {
		t.Fatalf("settle: %+v %v, full read %+v %v", gu, gs, wu, ws)
	}
	return fast
}

// sameItemMemo reports whether a and b remember the same.
func sameItemMemo(a, b itemMemo) bool {
	return string(a.text) == string(b.text) && a.n == b.n && a.hidden == b.hidden && slices.Equal(a.keys, b.keys)
}

// responsesStream is a varied Responses stream: created, output items of
// text, reasoning and function calls whose deltas carry varied pieces
// (bad ones included) with counting sequence numbers and obfuscation
// strings, odd events (audio, a non-string delta, an unknown field, a
// number that is not JSON, a type that changes), done events, completion.
func responsesStream(g chunkGen) []rawEvent {
	seq := 0
	ev := func(typ, rest string) rawEvent {
		seq++
		return rawEvent{[]byte(typ), []byte(`{"type":"` + typ + `","sequence_number":` + strconv.Itoa(seq) + rest + `}`)}
	}
	out := []rawEvent{ev("response.created", `,"response":{"id":"resp_1","status":"in_progress"}`)}
	for item := range 1 + g.r.IntN(3) {
		kind := g.r.IntN(3)
		typ := [...]string{"response.output_text.delta", "response.reasoning_summary_text.delta", "response.function_call_arguments.delta"}[kind]
		ids := `,"item_id":"it_` + strconv.Itoa(item) + `","output_index":` + strconv.Itoa(item)
		// The item's added event, and its part's: empty as an honest
		// stream sends them, or holding text (items37).
		added := ""
		if g.r.IntN(3) == 0 {
			added = g.piece()
		}
		switch kind {
		case 0:
			out = append(out, ev("response.output_item.added", `,"output_index":`+strconv.Itoa(item)+`,"item":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"`+added+`"}]}`))
			out = append(out, ev("response.content_part.added", ids+`,"content_index":0,"part":{"type":"output_text","text":"`+added+`","annotations":[]}`))
		case 1:
			out = append(out, ev("response.output_item.added", `,"output_index":`+strconv.Itoa(item)+`,"item":{"type":"reasoning","summary":[{"type":"summary_text","text":"`+added+`"}]}`))
			out = append(out, ev("response.reasoning_summary_part.added", ids+`,"summary_index":0,"part":{"type":"summary_text","text":"`+added+`"}`))
		default:
			out = append(out, ev("response.output_item.added", `,"output_index":`+strconv.Itoa(item)+`,"item":{"type":"function_call","name":"`+g.obf()+`","arguments":"`+added+`"}`))
		}
		if kind != 2 {
			ids += `,"content_index":0`
		}
		for range 3 + g.r.IntN(20) {
			e := ev(typ, ids+`,"delta":"`+g.piece()+`","logprobs":[],"obfuscation":"`+g.obf()+`"`)
			switch g.r.IntN(30) {
			case 0:
				e = ev("response.audio.delta", `,"delta":"`+g.piece()+`"`)
			case 1:
				e = ev(typ, ids+`,"delta":["`+g.piece()+`"]`)
			case 2:
				e = ev(typ, ids+`,"delta":"a","delta":"b"`)
			case 3:
				e.data = append(e.data, '\v')
			case 4:
				e.data = []byte(`{"type":"` + typ + `","sequence_number":0` + strconv.Itoa(seq) + ids + `,"delta":"x","logprobs":[],"obfuscation":"y"}`)
			case 5:
				e.data = []byte(`{"type":"` + typ + `","sequence_number":-` + strconv.Itoa(seq) + `.5e3` + ids + `,"delta":"x","logprobs":[],"obfuscation":"y"}`)
			case 6:
				e = ev("response.output_text.delta.x", ids+`,"delta":"`+g.piece()+`","logprobs":[],"obfuscation":"`+g.obf()+`"`)
			case 7:
				e.data = append([]byte(" \r\n"), e.data...)
			case 8:
				e = ev(typ, ids+`,"delta":"`+g.piece()+`","logprobs":[],"obfuscation":null`)
			}
			out = append(out, e)
		}
		out = append(out, ev(typ[:len(typ)-len("delta")]+"done", ids+`,"text":"`+g.piece()+`"`))
		// The part and the item that repeat the text (or hold text no
		// delta streamed): a message's output_text part, a reasoning
		// item's summary, a function call's name and arguments.
		switch kind {
		case 0:
			out = append(out, ev("response.content_part.done", ids+`,"part":{"type":"output_text","text":"`+g.piece()+`","annotations":[]}`))
			out = append(out, ev("response.output_item.done", `,"output_index":`+strconv.Itoa(item)+`,"item":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"`+g.piece()+g.piece()+`"}]}`))
		case 1:
			out = append(out, ev("response.reasoning_summary_part.done", ids+`,"part":{"type":"summary_text","text":"`+g.piece()+`"}`))
			out = append(out, ev("response.output_item.done", `,"output_index":`+strconv.Itoa(item)+`,"item":{"type":"reasoning","summary":[{"type":"summary_text","text":"`+g.piece()+`"}],"encrypted_content":"`+g.obf()+`"}`))
		default:
			out = append(out, ev("response.output_item.done", `,"output_index":`+strconv.Itoa(item)+`,"item":{"type":"function_call","name":"`+g.obf()+`","arguments":"`+g.piece()+`"}`))
		}
	}
	if g.r.IntN(5) == 0 {
		out = append(out, ev("error", `,"message":"`+g.piece()+`"`))
	}
	if g.r.IntN(3) == 0 {
		// No usage: what the items held is counted.
		return append(out, ev("response.completed", `,"response":{"id":"resp_1","status":"completed"}`))
	}
	return append(out, ev("response.completed", `,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":`+strconv.Itoa(g.r.IntN(99))+`,"output_tokens":`+strconv.Itoa(g.r.IntN(99))+`,"total_tokens":9}}`))
}

// TestResponseSkeletonSameAsFullRead holds the Responses *.delta fast
// path to the full read over varied streams, and checks that it is taken
// for most deltas.
func TestResponseSkeletonSameAsFullRead(t *testing.T) {
	g := chunkGen{r: rand.New(rand.NewPCG(5, 6))}
	events, fast := 0, 0
	for i := range 500 {
		st := responsesStream(g)
		events += len(st)
		maxDepth := 0
		if i%5 == 0 {
			maxDepth = 2 // the events nest 2 deep (logprobs): at the limit
		}
		fast += responseRun(t, maxDepth, st)
	}
	t.Logf("%d of %d events on the fast path", fast, events)
	if fast < events/3 {
		t.Fatalf("only %d of %d events took the fast path", fast, events)
	}
}

// TestResponseSkeletonSteps walks named cases of one skeleton.
func TestResponseSkeletonSteps(t *testing.T) {
	base := `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"x1"}`
	steps := []struct {
		name, in string
		fast     bool
		text     string
	}{
		{name: "text, number and obfuscation change", in: `{"type":"response.output_text.delta","sequence_number":125,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Yo \u00e9","logprobs":[],"obfuscation":"abcdef"}`, fast: true, text: "Yo é"},
		{name: "item id changes", in: `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_2","output_index":0,"content_index":0,"delta":"a","logprobs":[],"obfuscation":""}`, fast: true, text: "a"},
		{name: "type changes", in: `{"type":"response.refusal.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a","logprobs":[],"obfuscation":"x"}`},
		{name: "audio type", in: `{"type":"response.audio.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a","logprobs":[],"obfuscation":"x"}`},
		{name: "leading zero", in: `{"type":"response.output_text.delta","sequence_number":05,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a","logprobs":[],"obfuscation":"x"}`},
		{name: "string for a number", in: `{"type":"response.output_text.delta","sequence_number":"5","item_id":"msg_1","output_index":0,"content_index":0,"delta":"a","logprobs":[],"obfuscation":"x"}`},
		{name: "number for a string", in: `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":5,"logprobs":[],"obfuscation":"x"}`},
		{name: "bad escape", in: `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"\q","logprobs":[],"obfuscation":"x"}`},
		{name: "trailing", in: base + `}`},
		{name: "vertical tab", in: base + "\v"},
	}
	for i, st := range steps {
		s := NewStream(KindResponses)
		if u := s.Event(nil, []byte(base)); u.Text != "Hi" || s.resp == nil || !s.resp.ok {
			t.Fatalf("step %d (%s): base not kept (%+v)", i, st.name, u)
		}
		text, ok := s.resp.match([]byte(st.in), 0)
		if ok != st.fast {
			t.Fatalf("step %d (%s): fast path %v, want %v", i, st.name, ok, st.fast)
		}
		ref := NewStream(KindResponses)
		if full := ref.Event(nil, []byte(st.in)); ok && (text != full.Text || text != st.text || full != (StreamUpdate{Text: text})) {
			t.Fatalf("step %d (%s): fast %q, full %+v, want text %q", i, st.name, text, full, st.text)
		}
	}
}

// swapNumbers returns doc with each run of digits replaced by the next
// piece of fill (split at '|'), for the fuzz test to vary numbers.
func swapNumbers(doc, fill []byte) []byte {
	var out []byte
	n := 0
	parts := [][]byte{fill}
	for i, start := 0, -1; i <= len(doc); i++ {
		digit := i < len(doc) && doc[i] >= '0' && doc[i] <= '9'
		if digit && start < 0 {
			start = i
		}
		if !digit && start >= 0 {
			out = append(out, parts[n%len(parts)]...)
			n++
			start = -1
		}
		if !digit && i < len(doc) {
			out = append(out, doc[i])
		}
	}
	return out
}

// FuzzResponseSkeleton is the differential fuzz test of the Responses
// *.delta fast path: prev, next, and each with its strings and numbers
// swapped for pieces of fill, read with the fast path and in full.
func FuzzResponseSkeleton(f *testing.F) {
	d := `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"x1"}`
	f.Add([]byte(d), []byte(d), []byte(`x|\n|é`), []byte("17"))
	f.Add([]byte(d), []byte(d+"\v"), []byte(`"|\`), []byte("-1.5e3"))
	f.Add([]byte(d), []byte(d), []byte("\x01"), []byte("01"))
	f.Fuzz(func(t *testing.T, prev, next, fill, num []byte) {
		ev := []rawEvent{{nil, prev}, {nil, next}, {nil, swapStrings(prev, fill)}, {nil, swapNumbers(prev, num)},
			{nil, swapNumbers(swapStrings(next, fill), num)}, {nil, next}, {nil, swapStrings(prev, next)}}
		responseRun(t, 0, ev)
		responseRun(t, 1, ev)
	})
}
