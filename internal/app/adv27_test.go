package app

// Adversarial tests of adv27 (2026-12-06): three under-charge gaps adv26
// found and left. Each drives llmguard through loopback sockets to an
// upstream that answers in a lenient server's own way, and fails where
// llmguard charged less than the output the answer carried.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// adv27Usages are the ways a lenient upstream reports an answer's usage
// that leave its text to be counted: none, 0 output tokens, 5.
var adv27Usages = []struct{ name, chat, responses string }{
	{"no usage", ``, ``},
	{"zero output", `,"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}`,
		`,"usage":{"input_tokens":9,"output_tokens":0,"total_tokens":9}`},
	{"small output", `,"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}`,
		`,"usage":{"input_tokens":9,"output_tokens":5,"total_tokens":14}`},
}

// TestAdv27ChatReasoningDetailsAreCounted: OpenRouter's non-streamed chat
// answer carries the reasoning in message.reasoning_details (items of type
// reasoning.text and reasoning.summary holding 3,000 words) beside or in
// place of message.reasoning. Sent alone, they were not counted: an answer
// without usage, or reporting 0 or 5 output tokens, was charged 256 (the
// default reservation), 0 or 5. Sent beside the same text in "reasoning",
// it is counted once, not twice.
func TestAdv27ChatReasoningDetailsAreCounted(t *testing.T) {
	half := strings.Repeat("word ", 1500)
	details := fmt.Sprintf(`[{"type":"reasoning.text","text":%q,"format":"unknown","index":0},{"type":"reasoning.summary","summary":%q,"index":1}]`, half, half)
	for _, msg := range []struct {
		name, message string
		max           float64
	}{
		{"details alone", `"reasoning_details":` + details, 1 << 30},
		{"details and reasoning", fmt.Sprintf(`"reasoning":%q,"reasoning_details":%s`, half+half, details), 4000},
	} {
		for _, u := range adv27Usages {
			t.Run(msg.name+"/"+u.name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok",%s},"finish_reason":"stop"}]%s}`, msg.message, u.chat)
				}))
				t.Cleanup(srv.Close)
				h := fresh16(t, srv.URL)
				resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"think"}]}`)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %.200s", resp.StatusCode, b)
				}
				if got := outputSettled(t, h); got < 3000 || got > msg.max {
					t.Errorf("charged %v output tokens for an answer that reasoned 3,000 words, want 3,000 to %v", got, msg.max)
				}
			})
		}
	}
	// An encrypted item is reasoning llmguard cannot count: without usage
	// the answer keeps its output reservation (a max_tokens of 2,000).
	t.Run("encrypted, no usage", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok","reasoning_details":[{"type":"reasoning.encrypted","data":"`+strings.Repeat("QUJD", 500)+`"}]},"finish_reason":"stop"}]}`)
		}))
		t.Cleanup(srv.Close)
		h := fresh16(t, srv.URL)
		resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":2000,"messages":[{"role":"user","content":"think"}]}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %.200s", resp.StatusCode, b)
		}
		if got := outputSettled(t, h); got < 2000 {
			t.Errorf("charged %v output tokens, want at least the 2,000 reserved", got)
		}
	})
}

// TestAdv27ResponsesCallTextIsCounted: a non-streamed Responses answer
// whose output holds a code_interpreter_call's code, a local_shell_call's
// or shell_call's commands, or an apply_patch_call's diff (3,000 words
// each) had none of it counted, though its stream's *.delta events are:
// without usage, or reporting 0 or 5 output tokens, it was charged the
// reservation, 0 or 5.
func TestAdv27ResponsesCallTextIsCounted(t *testing.T) {
	half := strings.Repeat("word ", 1500)
	items := map[string]string{
		"code_interpreter_call": fmt.Sprintf(`{"type":"code_interpreter_call","id":"ci_1","status":"completed","container_id":"c","code":%q,"outputs":[]}`, words16),
		"local_shell_call":      fmt.Sprintf(`{"type":"local_shell_call","id":"ls_1","call_id":"c1","status":"completed","action":{"type":"exec","command":[%q,%q],"env":{}}}`, half, half),
		"shell_call":            fmt.Sprintf(`{"type":"shell_call","id":"sh_1","call_id":"c1","status":"completed","action":{"commands":[%q,%q],"timeout_ms":1000}}`, half, half),
		"apply_patch_call":      fmt.Sprintf(`{"type":"apply_patch_call","id":"ap_1","call_id":"c1","status":"completed","operation":{"type":"update_file","path":"a.go","diff":%q}}`, words16),
	}
	for _, name := range []string{"code_interpreter_call", "local_shell_call", "shell_call", "apply_patch_call"} {
		for _, u := range adv27Usages {
			t.Run(name+"/"+u.name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"x","output":[%s,{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]}]%s}`, items[name], u.responses)
				}))
				t.Cleanup(srv.Close)
				h := fresh16(t, srv.URL)
				resp, b := h.do("/v1/responses", `{"model":"gpt-4o-mini","input":"run it"}`)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %.200s", resp.StatusCode, b)
				}
				if got := outputSettled(t, h); got < 3000 {
					t.Errorf("charged %v output tokens for an answer whose %s carried 3,000 words", got, name)
				}
			})
		}
	}
}

// TestAdv27StackedCodingsAreRead: an answer in two or three stacked
// content codings (a CDN compressing what its server compressed:
// "gzip, br", "deflate, gzip") was relayed unread, its usage of 6,000
// output tokens settled at the 256-token default reservation, JSON and
// streamed alike. The stack is undone last coding first (RFC 9110 §8.4);
// four codings, or one llmguard does not know, stay unread (the
// reservation) and reach the client as sent.
func TestAdv27StackedCodingsAreRead(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	code := map[string]func([]byte) []byte{
		"gzip":      func(b []byte) []byte { return gzipped(t, b) },
		"deflate":   func(b []byte) []byte { return deflated(t, b) },
		"br":        func(b []byte) []byte { return brotlied(t, b) },
		"x-unknown": func(b []byte) []byte { return append([]byte("?"), b...) },
	}
	for _, c := range []struct {
		coding string
		min    float64
		max    float64
	}{
		{"gzip, br", 6000, 6000},
		{"deflate, gzip", 6000, 6000},
		{"br,gzip ,deflate", 6000, 6000},
		{"gzip, identity, br", 6000, 6000},
		{"gzip, gzip, gzip, gzip", 256, 256},
		{"gzip, x-unknown", 256, 256},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", c.coding, stream), func(t *testing.T) {
				answer, ct := usageAnswer(stream, usage)
				sent := []byte(answer)
				for _, name := range strings.Split(c.coding, ",") {
					if f := code[strings.TrimSpace(name)]; f != nil {
						sent = f(sent)
					}
				}
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", ct)
					w.Header().Set("Content-Encoding", c.coding)
					w.Write(sent)
				}))
				t.Cleanup(srv.Close)
				h := fresh16(t, srv.URL)
				body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}]}`
				if stream {
					body = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`
				}
				resp, b := h.do("/v1/chat/completions", body, "Accept-Encoding", "identity")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d: %.200q", resp.StatusCode, b)
				}
				// A JSON answer reaches its client as sent; a stream decoded
				// when llmguard read it, else as sent with its coding.
				if ce := resp.Header.Get("Content-Encoding"); ce != "" {
					if ce != c.coding || b != string(sent) {
						t.Errorf("relayed with Content-Encoding %q and %d bytes, not as sent (%q, %d bytes)", ce, len(b), c.coding, len(sent))
					}
				} else if !strings.Contains(b, `"ok"`) {
					t.Errorf("relayed decoded but not whole: %.200q", b)
				}
				if got := outputSettled(t, h); got < c.min || got > c.max {
					t.Errorf("charged %v output tokens, want %v to %v (a usage of 6,000)", got, c.min, c.max)
				}
			})
		}
	}
}

// usageAnswer is a chat answer "ok" reporting usage (a usage object's
// JSON), as a JSON answer or, when stream, as SSE chunks with the usage in
// its own chunk, and its Content-Type.
func usageAnswer(stream bool, usage string) (answer, contentType string) {
	if stream {
		return "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"length\"}]}\n\n" +
			"data: {\"id\":\"x\",\"choices\":[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n", "text/event-stream"
	}
	return `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":` + usage + `}`, "application/json"
}
