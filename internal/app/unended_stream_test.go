package app

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

// rawStreamUpstream is an upstream that answers every request with the
// raw bytes (status line, fields and body) answers[its x-case field]
// names, then closes the connection: a close-delimited body ends there.
func rawStreamUpstream(t *testing.T, answers map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute)) // a stuck test fails, it does not hang
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, answers[req.Header.Get("x-case")])
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// chunked is body as one HTTP/1.1 chunk and the last chunk: a body the
// transport sees end properly.
func chunked(body string) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// A stream with no final usage that ends cleanly at the transport but
// without its flavor's terminal event ([DONE], message_stop,
// response.completed) was broken off by the upstream (its connection
// closed on a close-delimited answer, or a gateway ended a chunked one
// mid-answer): it is charged as a broken stream, input + at least the
// output reservation (100). Before, it was charged the output it had
// shown: nothing when cut before its first word. A stream that did end,
// or that reported its final usage, is charged as before.
func TestUnendedStreamKeepsTheOutputReservation(t *testing.T) {
	const (
		sse    = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
		closed = sse + "Connection: close\r\n\r\n" // close-delimited: no length, no chunks
		chunks = sse + "Transfer-Encoding: chunked\r\n\r\n"
		role   = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
		words  = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello there"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" my friend"},"finish_reason":null}]}` + "\n\n"
		finish  = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
		finish1 = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":1,"delta":{},"finish_reason":"length"}]}` + "\n\n"
		usage   = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":7,"total_tokens":15}}` + "\n\n"
		done    = "data: [DONE]\n\n"
		msgs    = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":8,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n"
		resps = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\"}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"i\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello there\"}\n\n"
	)
	up := rawStreamUpstream(t, map[string]string{
		"closed-before-words": closed + role,
		"closed-mid-text":     closed + role + words,
		"chunked-no-done":     chunks + chunked(role+words),
		"finish-no-done":      closed + role + words + finish,
		"n2-one-finish":       closed + role + words + finish,
		"n2-both-finish":      closed + role + words + finish + finish1,
		"messages-no-stop":    chunks + chunked(msgs),
		"responses-no-end":    chunks + chunked(resps),
		"closed-with-done":    closed + role + words + finish + done,
		"chunked-with-done":   chunks + chunked(role+words+finish+done),
		"usage-no-done":       chunks + chunked(role+words+finish+usage),
	})
	h := startConfig(t, nil, twoFlavorConfig(up, "user-tpm", 100000))
	const (
		chat   = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`
		chatN2 = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"n":2,"stream":true}`
		msg    = `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stream":true}`
		resp   = `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":100,"stream":true}`
	)
	tokens := func(kind string) float64 {
		return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": kind})
	}
	for i, tc := range []struct {
		name, path, body string
		// check says whether the output tokens charged are right; want
		// says what they should be.
		check func(out float64) bool
		want  string
	}{
		{"closed-before-words", "/v1/chat/completions", chat, func(o float64) bool { return o == 100 }, "the reservation, 100"},
		{"closed-mid-text", "/v1/chat/completions", chat, func(o float64) bool { return o == 100 }, "the reservation, 100"},
		{"chunked-no-done", "/v1/chat/completions", chat, func(o float64) bool { return o == 100 }, "the reservation, 100"},
		{"messages-no-stop", "/v1/messages", msg, func(o float64) bool { return o == 100 }, "the reservation, 100"},
		{"responses-no-end", "/v1/responses", resp, func(o float64) bool { return o == 100 }, "the reservation, 100"},
		// Ended: the text streamed, counted (a few tokens), as before.
		{"closed-with-done", "/v1/chat/completions", chat, func(o float64) bool { return o > 0 && o < 20 }, "the text counted"},
		{"chunked-with-done", "/v1/chat/completions", chat, func(o float64) bool { return o > 0 && o < 20 }, "the text counted"},
		// An OpenAI-compatible upstream that ends each choice with a
		// finish_reason and sends no [DONE] has ended; with n = 2, one
		// choice's end is not the stream's (reservation: 2 × 100).
		{"finish-no-done", "/v1/chat/completions", chat, func(o float64) bool { return o > 0 && o < 20 }, "the text counted"},
		{"n2-one-finish", "/v1/chat/completions", chatN2, func(o float64) bool { return o == 200 }, "the reservation, 200"},
		{"n2-both-finish", "/v1/chat/completions", chatN2, func(o float64) bool { return o > 0 && o < 20 }, "the text counted"},
		// A final usage decides, [DONE] or not.
		{"usage-no-done", "/v1/chat/completions", chat, func(o float64) bool { return o == 7 }, "the usage's 7"},
	} {
		in0, out0 := tokens("input"), tokens("output")
		r, body := h.do(tc.path, tc.body, "x-case", tc.name)
		if r.StatusCode != http.StatusOK || !strings.Contains(body, "data:") {
			t.Fatalf("step %d (%s): status %d %.200s, want the stream", i, tc.name, r.StatusCode, body)
		}
		// The bound only ends a failing run.
		if !waitFor(30*time.Second, func() bool { return tokens("input") > in0 }) {
			t.Fatalf("step %d (%s): not settled", i, tc.name)
		}
		if out := tokens("output") - out0; !tc.check(out) {
			t.Errorf("step %d (%s): charged %v output tokens, want %s", i, tc.name, out, tc.want)
		}
	}
}

// An upstream that answers a stream in HTTP/1.0 (no length, no chunks: the
// body ends when it closes) must not make llmguard answer its HTTP/1.1
// caller the same way on a connection it keeps open: the caller could not
// tell where the answer ends and waited for the server's idle timeout
// (about 120 s for Go's client). llmguard's answer is its own HTTP/1.1: a
// chunked body, or one it ends by closing the connection.
func TestHTTP10UpstreamStreamEndsForTheCaller(t *testing.T) {
	const stream = "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" +
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	up := rawStreamUpstream(t, map[string]string{"http10": stream})
	h := startConfig(t, nil, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: openai, flavor: openai, base_url: "%s", no_key: true}
keys:
  - {key: %s, user: alice, tenant: acme}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`, up, testKey))
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second)) // only ends a failing run
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nx-case: http10\r\nContent-Length: %d\r\n\r\n%s", testKey, len(body), body)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.ProtoMinor != 1 {
		t.Errorf("answered %s to an HTTP/1.1 caller, want HTTP/1.1", resp.Proto)
	}
	if !resp.Close && len(resp.TransferEncoding) == 0 && resp.ContentLength < 0 {
		t.Errorf("answer framed by nothing on a kept connection: %s, Connection %q, no length, no chunks", resp.Proto, resp.Header.Get("Connection"))
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the stream: %v (read %d bytes)", err, len(got))
	}
	if !strings.Contains(string(got), "[DONE]") {
		t.Errorf("stream %q, want it whole", got)
	}
}
