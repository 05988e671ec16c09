package app

// Adversarial tests of the thirteenth round (2026-12-05): each drives
// llmguard through real loopback sockets.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A Responses, legacy completions or Messages body's top-level member
// its API does not define weighed nothing (chat's were weighed since
// TestAdv12UnknownTopLevelChatMembersAreWeighed), but LiteLLM passes
// such a member to the provider as one of its own parameters, where an
// Anthropic "system", a Cohere "chat_history" or a Gemini
// "system_instruction" is billed: 3,000 words there went seven times
// through a 20,000-token bucket. Each is now weighed by its key and
// value text.
func TestAdv13UnknownTopLevelMembersAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["input"], body["prompt"], body["messages"], body["system"], body["chat_history"],
			body["system_instruction"], body["preamble"]), 1
	})
	W := `"` + words16 + `"`
	for _, tc := range []struct{ name, path, body string }{
		{"responses system", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"system":` + W + `,"input":"hi"}`},
		{"responses chat_history after input", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[{"role":"user","content":"hi"}],"chat_history":[{"role":"USER","message":` + W + `}]}`},
		{"responses system_instruction", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"system_instruction":{"parts":[{"text":` + W + `}]},"input":"hi"}`},
		{"completions system", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"system":` + W + `,"prompt":"hi"}`},
		{"completions preamble after prompt", "/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi","preamble":` + W + `}`},
		{"messages chat_history", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"chat_history":[{"role":"USER","message":` + W + `}],"messages":[{"role":"user","content":"hi"}]}`},
		{"messages system_instruction after messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"system_instruction":{"parts":[{"text":` + W + `}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.path == "/v1/messages" {
				h = frozenClaude(t, up.url, "user-tpd", 20000)
			} else {
				h = fresh16(t, up.url)
			}
			if passed := up.callThrough(t, h, tc.path, tc.body, 10, 20000); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// lingeringUpstream answers every request with a whole stream, its
// terminal event included, chunked, and then neither ends the body (no
// last chunk) nor closes the connection until the test ends: a hostile or
// broken upstream. It serves the stream for the request's path.
func lingeringUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				var events string
				switch {
				case strings.HasSuffix(req.URL.Path, "/chat/completions"):
					events = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"hello world"},"finish_reason":null}]}` + "\n\n" +
						`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":11,"total_tokens":19}}` + "\n\n" +
						"data: [DONE]\n\n"
				case strings.HasSuffix(req.URL.Path, "/responses"):
					events = "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","delta":"hello world"}` + "\n\n" +
						"event: response.completed\n" + `data: {"type":"response.completed","response":{"id":"r","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello world"}]}],"usage":{"input_tokens":8,"output_tokens":11,"total_tokens":19}}}` + "\n\n"
				default: // messages
					events = "event: message_start\n" + `data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":8,"output_tokens":1}}}` + "\n\n" +
						"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
						"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello world"}}` + "\n\n" +
						"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
						"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":11}}` + "\n\n" +
						"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(events), events)
				<-stop // no last chunk, no close
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A stream whose upstream sent its terminal event ("[DONE]",
// response.completed, message_stop) but then neither ended its body nor
// closed its connection held the caller's answer open, and its
// settlement and ledger record back, until the upstream timeout (10
// minutes by default): a caller reading to the end of the body (curl, an
// SDK's raw stream) hung that long. The stream now ends for the caller,
// and is settled at the usage reported, once the upstream has been
// silent for streamEndGrace after its terminal event.
func TestAdv13StreamEndsAfterItsTerminalEventThoughTheUpstreamLingers(t *testing.T) {
	url := lingeringUpstream(t)
	for _, tc := range []struct{ name, path, body, last string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]\n\n"},
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","stream":true,"max_output_tokens":100,"input":"hi"}`, "\"status\":\"completed\""},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "message_stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.path == "/v1/messages" {
				h = frozenClaude(t, url, "user-tpd", 20000)
			} else {
				h = fresh16(t, url)
			}
			// The client's bound only ends a failing run: the upstream
			// timeout is 10 minutes, the grace a few seconds.
			client := &http.Client{Timeout: 45 * time.Second}
			req, _ := http.NewRequest(http.MethodPost, h.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("x-api-key", testKey)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("the stream did not end for its caller: %v (%d bytes read)", err, len(b))
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), tc.last) {
				t.Fatalf("%d %q", resp.StatusCode, b)
			}
			out := func() float64 { return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}) }
			if !waitFor(30*time.Second, func() bool { return out() > 0 }) {
				t.Fatal("not settled")
			}
			if got := out(); got != 11 {
				t.Errorf("charged %v output tokens, want the 11 the usage reported", got)
			}
		})
	}
}

// unreadUpstream streams a chat answer whose text comes in one event
// llmguard relays without reading it — shape "huge" an event past the
// SSE scanner's 16 MiB, shape "deep" an event nested past the stream's
// depth limit (a client's JSON decoder reads it) — and then a usage
// chunk reporting 1 output token and [DONE].
func unreadUpstream(t *testing.T, shape string) string {
	t.Helper()
	var text string
	switch shape {
	case "huge":
		text = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("word ", 17<<20/5) + `"},"finish_reason":null}]}` + "\n\n"
	case "deep":
		text = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + words16 + `"},"finish_reason":null}],"pad":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "}\n\n"
	}
	events := text + `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}` + "\n\n" +
		"data: [DONE]\n\n"
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// A stream whose final usage reported less output than reserved beside an
// event llmguard relayed without reading it (too large for its SSE
// scanner, or nested too deep) was settled at the usage alone: 17 MiB of
// text, or 3,000 words a client's decoder reads, reported as 1 output
// token, was charged 1, where the same text in events llmguard reads is
// charged at least its count (TestAdv12SmallOutputBesideMuchTextChargedTheText)
// and a stream with unread output and no usage at least its output
// reservation. Such a stream is now charged at least its output
// reservation.
func TestAdv13UsageBesideUnreadOutputKeepsTheReservation(t *testing.T) {
	for _, shape := range []string{"huge", "deep"} {
		t.Run(shape, func(t *testing.T) {
			h := fresh16(t, unreadUpstream(t, shape))
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != http.StatusOK || !strings.Contains(b, "[DONE]") {
				t.Fatalf("%d %.200q", resp.StatusCode, b)
			}
			out := func() float64 { return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}) }
			if !waitFor(30*time.Second, func() bool { return out() > 0 }) {
				t.Fatal("not settled")
			}
			if got := out(); got < 100 {
				t.Errorf("charged %v output tokens beside unread output, want at least the reservation, 100", got)
			}
		})
	}
}
