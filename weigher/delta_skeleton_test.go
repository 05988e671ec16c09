package weigher

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// rawEvent is one SSE event: its "event" field and its data.
type rawEvent struct{ name, data []byte }

// deltaRun feeds events to a Messages Stream with its delta fast path and
// to a reference Stream whose skeleton is dropped before every event, and
// fails on the first update, usage or settlement that differs. It returns
// how many events the fast path read.
func deltaRun(t testing.TB, maxDepth int, events []rawEvent) (fast int) {
	t.Helper()
	s := Stream{kind: KindMessages, maxDepth: maxDepth}
	ref := Stream{kind: KindMessages, maxDepth: maxDepth}
	for i, e := range events {
		if s.delta != nil {
			if _, ok := s.delta.match(e.name, e.data, maxDepth); ok {
				fast++
			}
		}
		got := s.Event(e.name, e.data)
		ref.delta = nil
		want := ref.Event(e.name, e.data)
		if got != want {
			t.Fatalf("event %d %q %q: fast path %+v, full read %+v", i, e.name, e.data, got, want)
		}
		if g, w := s.Usage(), ref.Usage(); g != w {
			t.Fatalf("event %d %q: usage %+v, full read %+v", i, e.data, g, w)
		}
		if s.Err() != ref.Err() || s.Done() != ref.Done() {
			t.Fatalf("event %d %q: Err/Done differ", i, e.data)
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

// messagesStream is a varied Messages stream: message_start, content
// blocks of text, thinking and tool use whose deltas carry varied pieces
// (chunkGen's, bad ones included), odd deltas, pings, message_delta,
// message_stop; event names sometimes missing or wrong, spaces around.
func messagesStream(g chunkGen) []rawEvent {
	ev := func(name, data string) rawEvent { return rawEvent{[]byte(name), []byte(data)} }
	out := []rawEvent{ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":25,"output_tokens":1}}}`)}
	blocks := 1 + g.r.IntN(3)
	for b := range blocks {
		idx := strconv.Itoa(b)
		kind := g.r.IntN(3)
		start := []string{`{"type":"text","text":""}`, `{"type":"thinking","thinking":""}`, `{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}`}[kind]
		out = append(out, ev("content_block_start", `{"type":"content_block_start","index":`+idx+`,"content_block":`+start+`}`))
		for range 3 + g.r.IntN(20) {
			var d string
			switch x := g.r.IntN(30); {
			case x == 0:
				d = `{"type":"signature_delta","signature":"` + g.obf() + `"}`
			case x == 1:
				d = `{"type":"citations_delta","citation":{"cited_text":"` + g.piece() + `"}}`
			case x == 2:
				d = `{"type":"future_delta","data":"` + g.piece() + `"}`
			case x == 3:
				d = `{"type":"text_delta","text":"a","text":"b"}`
			case x == 4:
				d = `{"type":"text_delta","text":["` + g.piece() + `"]}`
			case x == 5:
				d = `{"type":"text_delta"}`
			default:
				d = [...]string{`{"type":"text_delta","text":"`, `{"type":"thinking_delta","thinking":"`, `{"type":"input_json_delta","partial_json":"`}[kind] + g.piece() + `"}`
			}
			e := ev("content_block_delta", `{"type":"content_block_delta","index":`+idx+`,"delta":`+d+`}`)
			switch g.r.IntN(25) {
			case 0:
				e.name = nil
			case 1:
				e.name = []byte("content_block_stop")
			case 2:
				e.data = append([]byte(" \n"), e.data...)
			case 3:
				e.data = append(e.data, '\v')
			case 4:
				e.data = append(e.data, "\r\n"...)
			case 5:
				out = append(out, ev("ping", `{"type": "ping"}`))
			}
			out = append(out, e)
		}
		out = append(out, ev("content_block_stop", `{"type":"content_block_stop","index":`+idx+`}`))
	}
	out = append(out, ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":`+strconv.Itoa(g.r.IntN(99))+`}}`))
	if g.r.IntN(4) == 0 {
		out = append(out, ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"late"}}`))
	}
	return append(out, ev("message_stop", `{"type":"message_stop"}`))
}

// TestDeltaSkeletonSameAsFullRead holds the Messages delta fast path to
// the full read over varied streams, and checks that it is taken for most
// deltas.
func TestDeltaSkeletonSameAsFullRead(t *testing.T) {
	g := chunkGen{r: rand.New(rand.NewPCG(3, 4))}
	events, fast := 0, 0
	for i := range 500 {
		st := messagesStream(g)
		events += len(st)
		maxDepth := 0
		if i%5 == 0 {
			maxDepth = 3
		}
		fast += deltaRun(t, maxDepth, st)
	}
	t.Logf("%d of %d events on the fast path", fast, events)
	if fast < events/3 {
		t.Fatalf("only %d of %d events took the fast path", fast, events)
	}
}

// TestDeltaSkeletonSteps walks named cases of one skeleton.
func TestDeltaSkeletonSteps(t *testing.T) {
	name := []byte("content_block_delta")
	base := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`
	steps := []struct {
		name, in string
		event    []byte
		fast     bool
		text     string
	}{
		{name: "text changes", in: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Yo \u00e9\n"}}`, event: name, fast: true, text: "Yo é\n"},
		{name: "text empty", in: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, event: name, fast: true},
		{name: "other event name", in: base, event: []byte("x")},
		{name: "no event name", in: base},
		{name: "index changes", in: `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a"}}`, event: name},
		{name: "delta type changes", in: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","text":"a"}}`, event: name},
		{name: "bad escape", in: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\q"}}`, event: name},
		{name: "quote swallows", in: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}},"x":{"y":"b"}}`, event: name},
		{name: "suffix differs", in: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"]}`, event: name},
		{name: "vertical tab after", in: base + "\v", event: name},
		{name: "spaces around", in: "\n " + base + " \r\n", event: name, fast: true, text: "Hi"},
	}
	for i, st := range steps {
		s := NewStream(KindMessages)
		if u := s.Event(name, []byte(base)); u.Text != "Hi" || s.delta == nil || !s.delta.ok {
			t.Fatalf("step %d (%s): base not kept (%+v)", i, st.name, u)
		}
		u, ok := s.delta.match(st.event, []byte(st.in), 0)
		if ok != st.fast {
			t.Fatalf("step %d (%s): fast path %v, want %v", i, st.name, ok, st.fast)
		}
		ref := NewStream(KindMessages)
		if full := ref.Event(st.event, []byte(st.in)); ok && (u != full || u.Text != st.text) {
			t.Fatalf("step %d (%s): fast %+v, full %+v, want text %q", i, st.name, u, full, st.text)
		}
	}
}

// FuzzDeltaSkeleton is the differential fuzz test of the Messages delta
// fast path: prev, next, and each with its strings swapped for pieces of
// fill, under one event name, read with the fast path and in full.
func FuzzDeltaSkeleton(f *testing.F) {
	d := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`
	j := `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`
	f.Add([]byte(d), []byte(d), []byte(`x|\n|é`), []byte("content_block_delta"))
	f.Add([]byte(j), []byte(d), []byte(`"|\`), []byte(""))
	f.Add([]byte(d), []byte(d+"\v"), []byte("\x01"), []byte("content_block_delta"))
	f.Fuzz(func(t *testing.T, prev, next, fill, name []byte) {
		ev := []rawEvent{{name, prev}, {name, next}, {name, swapStrings(prev, fill)}, {name, swapStrings(next, fill)},
			{name, next}, {name, swapStrings(prev, next)}, {nil, swapStrings(prev, fill)}}
		deltaRun(t, 0, ev)
		deltaRun(t, 2, ev)
	})
}
