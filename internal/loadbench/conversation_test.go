package loadbench

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestConversationBodies: every body is valid JSON of the size the shape
// names (¾ to 1¼ Size, plus at most one turn and a tool call), a chat request with 2–4
// tools; warm bodies resend the previous messages byte for byte; cold
// bodies share no message with any earlier body.
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
			grown := 0
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
				grew := len(prev.Messages) > 0 && len(req.Messages) > len(prev.Messages)
				if warm && grew {
					grown++
					for j, m := range prev.Messages {
						if !bytes.Equal(m.Content, req.Messages[j].Content) {
							t.Fatalf("%+v body %d: message %d changed", shape, i, j)
						}
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
			if warm && grown < 20 {
				t.Errorf("%+v: %d of 40 bodies grew the last one", shape, grown)
			}
		}
	}
}
