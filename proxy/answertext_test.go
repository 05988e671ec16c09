package proxy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// passedText is what an answerText for kind passes of body fed in pieces
// of size bytes.
func passedText(k weigher.Kind, body string, size int) string {
	a := newAnswerText(k.AnswerNotOutput(), k.AnswerOutputRoots())
	var out strings.Builder
	for b := []byte(body); len(b) > 0; {
		n := min(size, len(b))
		a.feed(b[:n], func(run []byte) { out.Write(run) })
		b = b[n:]
	}
	return out.String()
}

// outputIn reports whether an answerText for kind fed body in pieces of
// size bytes saw an element of an output root (answerText.output).
func outputIn(k weigher.Kind, body string, size int) bool {
	a := newAnswerText(k.AnswerNotOutput(), k.AnswerOutputRoots())
	for b := []byte(body); len(b) > 0; {
		n := min(size, len(b))
		a.feed(b[:n], func([]byte) {})
		b = b[n:]
	}
	return a.output
}

// TestAnswerTextSeesOutputRoots (adv45): an answer holds output when a
// top-level member its kind's API defines as the output array (chat's
// choices, Messages' content, Responses' output, embeddings' data) holds
// an element, its key read decoded and case-folded as encoding/json
// reads it; error bodies, empty roots, and the same names deeper do not.
func TestAnswerTextSeesOutputRoots(t *testing.T) {
	for _, c := range []struct {
		name string
		kind weigher.Kind
		body string
		want bool
	}{
		{"chat choice", weigher.KindChat, `{"id":"x","choices":[{"index":0}]}`, true},
		{"chat choice after whitespace", weigher.KindChat, "{ \"choices\" :\n [ \n{}]}", true},
		{"chat escaped key", weigher.KindChat, `{"cho\u0069ces":[{}]}`, true},
		{"chat key in capitals", weigher.KindChat, `{"Choices":[{}]}`, true},
		{"chat key with a long s", weigher.KindChat, `{"choice\u017f":[{}]}`, true},
		{"chat choices string", weigher.KindChat, `{"choices":"text"}`, true},
		{"chat empty choices", weigher.KindChat, `{"error":{"message":"m"},"choices":[ ]}`, false},
		{"chat empty string", weigher.KindChat, `{"choices":""}`, false},
		{"chat null", weigher.KindChat, `{"choices":null}`, false},
		{"chat error", weigher.KindChat, `{"error":{"message":"choices","choices":[1]}}`, false},
		{"chat choices in a string", weigher.KindChat, `{"error":"\"choices\":[1]"}`, false},
		{"messages content", weigher.KindMessages, `{"type":"message","content":[{"type":"text","text":"t"}]}`, true},
		{"messages error", weigher.KindMessages, `{"type":"error","error":{"type":"overloaded_error","message":"content"},"request_id":"r"}`, false},
		{"responses output", weigher.KindResponses, `{"instructions":"x","output":[{"type":"message"}]}`, true},
		{"responses error", weigher.KindResponses, `{"error":{"code":"server_error","message":"m"}}`, false},
		{"embeddings data", weigher.KindEmbeddings, `{"object":"list","data":[{"embedding":[0.1]}]}`, true},
		{"not JSON", weigher.KindChat, `data: {"choices":[1]}`, false},
	} {
		for _, size := range []int{1, 2, 3, 7, len(c.body)} {
			if got := outputIn(c.kind, c.body, size); got != c.want {
				t.Errorf("%s, pieces of %d: output %v, want %v", c.name, size, got, c.want)
			}
		}
	}
}

// TestAnswerTextLeavesOutWhatHoldsNoOutput: the values of the members a
// kind's API defines to hold no output are left out, wherever the pieces
// cut the answer; a member's key in other capitals, one the table does
// not name, one at another place, and an answer that is not a JSON object
// pass whole; an escaped key is read decoded.
func TestAnswerTextLeavesOutWhatHoldsNoOutput(t *testing.T) {
	for _, c := range []struct {
		name string
		kind weigher.Kind
		body string
		want string
	}{
		{name: "chat logprobs", kind: weigher.KindChat,
			body: `{"id":"x","choices":[{"index":0,"message":{"content":"Hi \"there\""},"logprobs":{"content":[{"token":"Hi","top_logprobs":[{"token":"}"}]}]},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}`,
			want: `{"id":,"choices":[{"index":,"message":{"content":"Hi \"there\""},"logprobs":,"finish_reason":}],"usage":}`},
		{name: "escaped key", kind: weigher.KindChat,
			body: `{"choices":[{"log\u0070robs":{"a":"b"},"text":"t"}]}`,
			want: `{"choices":[{"log\u0070robs":,"text":"t"}]}`},
		{name: "capitals pass", kind: weigher.KindChat,
			body: `{"choices":[{"Logprobs":{"a":"b"},"text":"t"}]}`,
			want: `{"choices":[{"Logprobs":{"a":"b"},"text":"t"}]}`},
		{name: "logprobs elsewhere pass", kind: weigher.KindChat,
			body: `{"logprobs":"x","choices":[{"message":{"logprobs":"y"}}]}`,
			want: `{"logprobs":"x","choices":[{"message":{"logprobs":"y"}}]}`},
		{name: "responses echo", kind: weigher.KindResponses,
			body: `{"instructions":"be {brief}","tools":[{"name":"f","description":"d"}],"text":{"format":{"type":"text"}},"output":[{"type":"message","content":[{"type":"output_text","text":"out","logprobs":[{"token":"o"}]}]}]}`,
			want: `{"instructions":,"tools":,"text":,"output":[{"type":"message","content":[{"type":"output_text","text":"out","logprobs":}]}]}`},
		{name: "responses text deeper is output", kind: weigher.KindResponses,
			body: `{"output":[{"text":"a","content":[{"text":"b"}]}]}`,
			want: `{"output":[{"text":"a","content":[{"text":"b"}]}]}`},
		{name: "not JSON", kind: weigher.KindChat,
			body: "data: {\"id\":\"x\",\"choices\":[]}\n\n",
			want: "data: {\"id\":\"x\",\"choices\":[]}\n\n"},
		{name: "two values", kind: weigher.KindMessages,
			body: `{"id":"a","content":[{"text":"x"}]} {"id":"b","model":"m","stop_sequence":"s"}`,
			want: `{"id":,"content":[{"text":"x"}]} {"id":,"model":,"stop_sequence":"s"}`},
		{name: "embeddings pass", kind: weigher.KindEmbeddings,
			body: `{"id":"a","data":[1]}`, want: `{"id":"a","data":[1]}`},
	} {
		for _, size := range []int{1, 2, 3, 7, len(c.body)} {
			if got := passedText(c.kind, c.body, size); got != c.want {
				t.Errorf("%s, pieces of %d:\n got %s\nwant %s", c.name, size, got, c.want)
			}
		}
	}
}

// FuzzAnswerText: whatever the bytes and wherever they are cut, the filter
// never panics, passes the same bytes as when fed whole, and passes a
// subsequence of them (never a byte the answer did not hold).
func FuzzAnswerText(f *testing.F) {
	f.Add(`{"choices":[{"logprobs":{"a":"b"},"message":{"content":"hi"}}]}`, 5, uint8(1))
	f.Add(`{"instructions":"x\"}","output":[{"content":[{"logprobs":[1],"text":"t"}]}]}`, 9, uint8(2))
	f.Add(`{"log\u0070robs":1,"id":"\ud83d\ude00"}`, 3, uint8(5))
	f.Fuzz(func(t *testing.T, body string, cut int, kind uint8) {
		k := weigher.Kind(kind % 8)
		whole := passedText(k, body, len(body)+1)
		cut = max(cut, 1)
		if got := passedText(k, body, cut); got != whole {
			t.Fatalf("pieces of %d pass %q, whole %q", cut, got, whole)
		}
		if got, want := outputIn(k, body, cut), outputIn(k, body, len(body)+1); got != want {
			t.Fatalf("pieces of %d see output %v, whole %v", cut, got, want)
		}
		i := 0
		for j := 0; j < len(whole); j++ {
			for i < len(body) && body[i] != whole[j] {
				i++
			}
			if i == len(body) {
				t.Fatalf("passed %q: not a subsequence of %q", whole, body)
			}
			i++
		}
	})
}
