package weigher

import (
	"fmt"
	"testing"
)

// TestEndedCountsDistinctChoices walks streams with no "[DONE]" through
// Stream.Ended: a stream has ended when each choice index in [0, n)
// reported a finish_reason, whatever else was repeated. An upstream that
// repeated choice 0's finish_reason n times was taken to have ended all n.
func TestEndedCountsDistinctChoices(t *testing.T) {
	fin := func(idx string) string {
		if idx == "" {
			return `{"choices":[{"delta":{},"finish_reason":"stop"}]}`
		}
		return fmt.Sprintf(`{"choices":[{"index":%s,"delta":{},"finish_reason":"stop"}]}`, idx)
	}
	for i, step := range []struct {
		name   string
		n      int64
		chunks []string
		ended  bool
	}{
		{name: "n1 finish", n: 1, chunks: []string{fin("0")}, ended: true},
		{name: "n1 finish without index", n: 1, chunks: []string{fin("")}, ended: true},
		{name: "n0 reads as 1", n: 0, chunks: []string{fin("0")}, ended: true},
		{name: "n1 nothing", n: 1, chunks: []string{`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`}},
		{name: "n2 choice 0 twice", n: 2, chunks: []string{fin("0"), fin("0")}},
		{name: "n3 choice 0 three times", n: 3, chunks: []string{fin("0"), fin("0"), fin("0")}},
		{name: "n2 no index twice", n: 2, chunks: []string{fin(""), fin("")}},
		{name: "n2 both", n: 2, chunks: []string{fin("1"), fin("0")}, ended: true},
		{name: "n2 both in one chunk", n: 2, chunks: []string{`{"choices":[{"index":0,"finish_reason":"stop"},{"index":1,"finish_reason":"length"}]}`}, ended: true},
		{name: "n2 choice 0 twice in one chunk", n: 2, chunks: []string{`{"choices":[{"index":0,"finish_reason":"stop"},{"index":0,"finish_reason":"length"}]}`}},
		{name: "n2 index out of range", n: 2, chunks: []string{fin("0"), fin("2")}},
		{name: "n2 index negative", n: 2, chunks: []string{fin("0"), fin("-1")}},
		{name: "n2 index as string", n: 2, chunks: []string{fin("0"), fin(`"1"`)}},
		{name: "n2 index as float", n: 2, chunks: []string{fin("0"), fin("1.5")}},
		{name: "n2 index 1.0", n: 2, chunks: []string{fin("0"), fin("1.0")}},
		{name: "n2 index leading zero", n: 2, chunks: []string{fin("0"), fin("01")}},
		{name: "n2 index huge", n: 2, chunks: []string{fin("0"), fin("18446744073709551617")}},
		{name: "n2 finish null", n: 2, chunks: []string{fin("0"), `{"choices":[{"index":1,"delta":{},"finish_reason":null}]}`}},
		{name: "n1024 all", n: MaxEndedChoices, chunks: finishAll(MaxEndedChoices), ended: true},
		{name: "n1024 all but the last", n: MaxEndedChoices, chunks: finishAll(MaxEndedChoices - 1)},
		{name: "n1025 ends only at [DONE]", n: MaxEndedChoices + 1, chunks: finishAll(MaxEndedChoices + 1)},
		{name: "n1025 [DONE]", n: MaxEndedChoices + 1, chunks: []string{"[DONE]"}, ended: true},
		{name: "n65 all", n: 65, chunks: finishAll(65), ended: true},
		{name: "n65 all but 64", n: 65, chunks: finishAll(64)},
	} {
		for _, k := range []Kind{KindChat, KindCompletions} {
			s := NewStream(k)
			for _, c := range step.chunks {
				s.Event(nil, []byte(c))
			}
			if got := s.Ended(step.n); got != step.ended {
				t.Errorf("step %d (%s, %v): Ended(%d) = %v, want %v", i, step.name, k, step.n, got, step.ended)
			}
		}
	}
}

// finishAll are chunks that end choices 0 to n-1, one each.
func finishAll(n int) []string {
	c := make([]string, n)
	for i := range c {
		c[i] = fmt.Sprintf(`{"choices":[{"index":%d,"delta":{},"finish_reason":"stop"}]}`, i)
	}
	return c
}

// TestEndedThroughSharedSkeletons reads finish chunks on the skeleton
// fast path, which tolerates any number where the skeleton holds one: a
// match reads each finished choice's index again, so choice 1's finish
// chunk matched against choice 0's is choice 1's, and a repeated choice 0
// is not choice 1.
func TestEndedThroughSharedSkeletons(t *testing.T) {
	w := testWeigher(t)
	chunk := func(idx int, finish string) string {
		return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":%d,"delta":{},"finish_reason":%s}]}`, idx, finish)
	}
	a := w.NewStream(KindChat)
	for _, c := range []string{chunk(0, "null"), chunk(0, `"stop"`), chunk(1, `"stop"`)} {
		a.Event(nil, []byte(c))
	}
	if !a.Ended(2) {
		t.Fatalf("stream a: both choices finished, not ended")
	}
	b := w.NewStream(KindChat)
	for _, c := range []string{chunk(0, "null"), chunk(0, `"stop"`), chunk(0, `"stop"`)} {
		b.Event(nil, []byte(c))
	}
	if b.Ended(2) {
		t.Errorf("stream b: choice 0 finished twice, choice 1 never, ended")
	}
}

// TestCompletionsChoices: a legacy completions request reserves and
// expects max(n, best_of) choices per prompt.
func TestCompletionsChoices(t *testing.T) {
	w := testWeigher(t)
	for i, step := range []struct {
		body    string
		choices int64
		output  int64
	}{
		{`{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens":10}`, 1, 10},
		{`{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens":10,"n":3}`, 3, 30},
		{`{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens":10,"n":2,"best_of":5}`, 5, 50},
		{`{"model":"gpt-3.5-turbo-instruct","prompt":["a","b"],"max_tokens":10,"n":2}`, 4, 40},
	} {
		e := w.Completions([]byte(step.body))
		if e.Choices != step.choices || e.OutputTokens != step.output {
			t.Errorf("step %d %s: Choices %d, OutputTokens %d; want %d, %d", i, step.body, e.Choices, e.OutputTokens, step.choices, step.output)
		}
	}
}
