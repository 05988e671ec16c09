package loadbench

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestConversationBodies: every body is valid JSON of the size the shape
// names (¾ to 1¼ Size, plus at most one turn and a tool call), a chat request with 2–4
// tools; each warm body resends the previous one's messages byte for byte
// (from some exchange on, when trimmed) plus one turn; cold bodies share no
// message with any earlier body.
func TestConversationBodies(t *testing.T) {
	pool := newTextPool(1)
	type msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	type chat struct {
		Model    string            `json:"model"`
		Messages []msg             `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
		Stream   bool              `json:"stream"`
	}
	for _, size := range []int{1 << 10, 16 << 10, 128 << 10} {
		for _, warm := range []bool{false, true} {
			shape := Shape{Size: size, Stream: warm, Warm: warm}
			c := newConversation(pool, shape, 7)
			seen := map[string]bool{}
			var prev chat
			trimmed := 0
			for i := range 40 {
				body := c.next()
				var req chat
				if err := json.Unmarshal(body, &req); err != nil {
					t.Fatalf("%+v body %d: %v\n%s", shape, i, err, body)
				}
				if len(body) < size*3/4 || len(body) > size*5/4+c.turn()+512 {
					t.Errorf("%+v body %d: %d bytes", shape, i, len(body))
				}
				if req.Model != benchModel || req.Stream != shape.Stream || len(req.Tools) < 2 || len(req.Tools) > 4 || req.Messages[0].Role != "system" || req.Messages[len(req.Messages)-1].Role != "user" {
					t.Errorf("%+v body %d: model %q, stream %v, %d tools, %d messages", shape, i, req.Model, req.Stream, len(req.Tools), len(req.Messages))
				}
				if warm && i > 0 {
					if d, ok := continues(prev.Messages, req.Messages, func(a, b msg) bool {
						return a.Role == b.Role && bytes.Equal(a.Content, b.Content)
					}); !ok {
						t.Fatalf("%+v body %d: not the last body's messages (from some exchange on) plus one turn", shape, i)
					} else if d > 0 {
						trimmed++
					}
					if req.Messages[1].Role != "user" {
						t.Errorf("%+v body %d: the first message after the system prompt is %q", shape, i, req.Messages[1].Role)
					}
				}
				if !warm {
					for _, m := range req.Messages {
						if string(m.Content) == "null" { // an assistant's tool call
							continue
						}
						if seen[string(m.Content)] {
							t.Fatalf("%+v body %d: a message was sent before: %s", shape, i, m.Content)
						}
						seen[string(m.Content)] = true
					}
				}
				prev = req
			}
			if warm && trimmed == 0 {
				t.Errorf("%+v: 40 bodies and the conversation was never trimmed", shape)
			}
		}
	}
}

// continues reports whether next is prev with its first d messages after
// the system prompt dropped and one turn (2 or 4 messages: an optional tool
// call and its result, the answer, the next user message) appended, the
// kept ones equal by eq; it returns d.
func continues[M any](prev, next []M, eq func(a, b M) bool) (d int, ok bool) {
	if len(prev) == 0 || len(next) == 0 || !eq(prev[0], next[0]) {
		return 0, false
	}
	for d = 0; d < len(prev)-1; d++ {
		kept := prev[1+d:]
		added := len(next) - 1 - len(kept)
		if added != 2 && added != 4 {
			continue
		}
		same := true
		for j := range kept {
			if !eq(kept[j], next[1+j]) {
				same = false
				break
			}
		}
		if same {
			return d, true
		}
	}
	return 0, false
}
