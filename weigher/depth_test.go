package weigher

import (
	"bytes"
	"strings"
	"testing"
)

// nest wraps inner in n arrays: depth n plus inner's own.
func nest(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

// withDepth is a request of kind k whose body nests exactly depth levels:
// the object itself, and an extra field of depth-1 arrays.
func withDepth(k Kind, depth int) []byte {
	extra := `,"metadata":` + nest(depth-1, "1")
	switch k {
	case KindChat:
		return []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]` + extra + `}`)
	case KindResponses:
		return []byte(`{"model":"gpt-4o","input":"hi"` + extra + `}`)
	case KindCompletions:
		return []byte(`{"model":"gpt-3.5-turbo-instruct","prompt":"hi"` + extra + `}`)
	case KindEmbeddings:
		return []byte(`{"model":"text-embedding-3-small","input":"hi"` + extra + `}`)
	case KindMessages:
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]` + extra + `}`)
	}
	panic("kind")
}

var weighedKinds = []Kind{KindChat, KindResponses, KindCompletions, KindEmbeddings, KindMessages}

func TestWeighDepthLimit(t *testing.T) {
	w := testWeigher(t)
	for _, k := range weighedKinds {
		at := w.Weigh(k, withDepth(k, DefaultMaxDepth))
		if at.TooDeep || !at.Parsed || at.InputTokens <= 0 {
			t.Errorf("%v at depth %d: %+v, want a parsed estimate", k, DefaultMaxDepth, at)
		}
		over := w.Weigh(k, withDepth(k, DefaultMaxDepth+1))
		if !over.TooDeep || over.Parsed || over.DuplicateKeys {
			t.Errorf("%v at depth %d: %+v, want TooDeep and not parsed", k, DefaultMaxDepth+1, over)
		}
	}
	// A configured limit.
	small := *w
	small.maxDepth = 4
	if e := small.Weigh(KindChat, withDepth(KindChat, 4)); e.TooDeep || !e.Parsed {
		t.Errorf("limit 4, depth 4: %+v", e)
	}
	if e := small.Weigh(KindChat, withDepth(KindChat, 5)); !e.TooDeep {
		t.Errorf("limit 4, depth 5: %+v, want TooDeep", e)
	}
	// Not too deep, just broken: the byte-based fallback without TooDeep.
	if e := w.Weigh(KindChat, []byte(`{"model":"gpt-4o","messages":[}`)); e.TooDeep || e.Parsed {
		t.Errorf("broken body: %+v", e)
	}
	// A repeated key is still reported, by the same pass.
	if e := w.Weigh(KindChat, []byte(`{"model":"gpt-4o","model":"gpt-4o-mini","messages":[]}`)); !e.DuplicateKeys || e.TooDeep {
		t.Errorf("duplicate key: %+v", e)
	}
}

// TestWeighBracketFlood: a body of 6 MB of '[' used to overflow the
// goroutine stack (fatal, not a panic: the whole process died) in the
// recursive validator. It is now refused at the limit's bracket.
func TestWeighBracketFlood(t *testing.T) {
	w := testWeigher(t)
	body := bytes.Repeat([]byte("["), 6<<20)
	for _, k := range weighedKinds {
		if e := w.Weigh(k, body); !e.TooDeep {
			t.Errorf("%v: %+v, want TooDeep", k, e)
		}
	}
	obj := []byte(strings.Repeat(`{"a":`, 1<<20))
	if e := w.Weigh(KindMessages, obj); !e.TooDeep {
		t.Errorf("object flood: %+v, want TooDeep", e)
	}
	if !DuplicateKeys(body) {
		t.Error("DuplicateKeys: a body deeper than the limit is ambiguous")
	}
	// The usage readers refuse it the same way, without recursing.
	for _, k := range weighedKinds {
		if _, ok := ParseUsage(k, body); ok {
			t.Errorf("ParseUsage(%v) read a bracket flood", k)
		}
	}
	s := NewStream(KindChat)
	if u := s.Event(nil, body); u != (StreamUpdate{Unread: true}) {
		t.Errorf("stream event: %+v", u)
	}
}

func TestNewMaxDepth(t *testing.T) {
	for _, d := range []int{-1, MaxMaxDepth + 1} {
		if _, err := New(Options{MaxDepth: d}); err == nil || !strings.HasPrefix(err.Error(), "weigher: ") {
			t.Errorf("MaxDepth %d: err %v", d, err)
		}
	}
}

// TestUsageDepthLimit: an upstream answer or event nested past the limit is
// not read (the proxy relays it untouched and keeps the reservation, or
// counts the streamed text), while one within it is.
func TestUsageDepthLimit(t *testing.T) {
	w := testWeigher(t)
	answer := func(depth int) []byte {
		return []byte(`{"id":"x","extra":` + nest(depth-1, "0") + `,"usage":{"prompt_tokens":11,"completion_tokens":7}}`)
	}
	if u, ok := w.ParseUsage(KindChat, answer(DefaultMaxDepth), &Estimate{}); !ok || u.InputTokens != 11 || u.OutputTokens != 7 {
		t.Errorf("at the limit: %+v %v", u, ok)
	}
	if u, ok := w.ParseUsage(KindChat, answer(DefaultMaxDepth+1), &Estimate{}); ok {
		t.Errorf("over the limit: read %+v", u)
	}
	if _, ok := ParseUsage(KindChat, answer(DefaultMaxDepth+1)); ok {
		t.Error("package ParseUsage read an answer over the default limit")
	}
	// A weigher configured deeper reads deeper answers.
	deep := *w
	deep.maxDepth = 300
	if _, ok := deep.ParseUsage(KindChat, answer(DefaultMaxDepth+1), &Estimate{}); !ok {
		t.Error("limit 300: answer of depth 129 not read")
	}
	for k, body := range map[Kind][]byte{
		KindResponses:  []byte(`{"x":` + nest(DefaultMaxDepth, "0") + `,"usage":{"input_tokens":3,"output_tokens":4}}`),
		KindMessages:   []byte(`{"x":` + nest(DefaultMaxDepth, "0") + `,"usage":{"input_tokens":3,"output_tokens":4}}`),
		KindEmbeddings: []byte(`{"x":` + nest(DefaultMaxDepth, "0") + `,"usage":{"prompt_tokens":3}}`),
	} {
		if u, ok := w.ParseUsage(k, body, &Estimate{}); ok {
			t.Errorf("%v over the limit: read %+v", k, u)
		}
	}

	// A stream whose usage chunk nests too deep settles on the estimate
	// and the counted text, not on the (unread) report.
	s := w.NewStream(KindChat)
	s.Event(nil, []byte(`{"choices":[{"delta":{"content":"hello"}}]}`))
	u := s.Event(nil, []byte(`{"choices":[],"x":`+nest(DefaultMaxDepth, "0")+`,"usage":{"prompt_tokens":999,"completion_tokens":999}}`))
	if u.HasUsage {
		t.Errorf("deep usage chunk read: %+v", u)
	}
	s.Event(nil, []byte("[DONE]"))
	got, src := s.Settle(Estimate{InputTokens: 50}, 2)
	if src != SourceCounted || got.InputTokens != 50 || got.OutputTokens != 2 {
		t.Errorf("settled %+v from %v, want the estimate's input and the counted output", got, src)
	}
	// The same chunk within the limit is read.
	s = w.NewStream(KindChat)
	if u := s.Event(nil, []byte(`{"choices":[],"x":`+nest(DefaultMaxDepth-2, "0")+`,"usage":{"prompt_tokens":9,"completion_tokens":8}}`)); !u.HasUsage {
		t.Errorf("usage chunk within the limit not read: %+v", u)
	}
	for _, k := range []Kind{KindResponses, KindMessages} {
		s := w.NewStream(k)
		ev := []byte(`{"type":"response.completed","x":` + nest(DefaultMaxDepth, "0") + `,"response":{"usage":{"input_tokens":1,"output_tokens":1}}}`)
		if k == KindMessages {
			ev = []byte(`{"type":"message_delta","x":` + nest(DefaultMaxDepth, "0") + `,"usage":{"output_tokens":5}}`)
		}
		if u := s.Event(nil, ev); u.HasUsage || s.Usage().Output {
			t.Errorf("%v: deep event read: %+v", k, u)
		}
	}
}
