package app

// Adversarial tests of adv45 (2026-12-07): an error-status answer relayed
// unread (over max_response_bytes) that carried output, and the request
// side (fields, model names, hidden context, encodings). Each drives
// llmguard through loopback sockets to an upstream the test sets.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// adv45StatusCost is what the bucket lost for a call whose upstream
// answers status with answer labelled contentType, under a config of
// twoFlavorConfig with extra appended (top-level YAML).
func adv45StatusCost(t *testing.T, extra string, status int, contentType, answer, path, body string, headers ...string) int64 {
	t.Helper()
	return adv45CodedCost(t, extra, status, contentType, "", answer, path, body, headers...)
}

// adv45CodedCost is adv45StatusCost of an answer sent in the content
// coding enc ("" or gzip), whatever the request asked.
func adv45CodedCost(t *testing.T, extra string, status int, contentType, enc, answer, path, body string, headers ...string) int64 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost { // the harness's probe of its bucket
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		if enc == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(status)
			z := gzip.NewWriter(w)
			io.WriteString(z, answer)
			z.Close()
			return
		}
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	cfg, err := config.Parse([]byte(twoFlavorConfig(srv.URL, "user-tpd", 100000) + extra))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	left := h.tokensLeft()
	resp, got := h.do(path, body, headers...)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, status)
	}
	if enc == "" && got != answer {
		t.Fatalf("the answer was not relayed whole: %d bytes of %d", len(got), len(answer))
	}
	return left - h.tokensLeft()
}

// Left by adv44 (a): an answer under an error status that carried output
// (2,000 words in a chat choice or a Messages text block) is charged as a
// 2xx answer is when it is held (TestAdv44ErrorStatusAnswerWithTextIsCharged),
// but one over max_response_bytes, relayed unread, was refunded whole:
// the same answer, 4 KiB past the limit, cost nothing. An error-status
// answer relayed unread is now counted as it passes, as a 2xx one is:
// settled as a 2xx answer when it holds a usage or an element of its
// kind's output array (chat's choices, Messages' content, Responses'
// output), refunded otherwise (an error body, however long).
func TestAdv45UnreadErrorStatusAnswerWithOutputIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens, 10 KB
	chat := fmt.Sprintf(`{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, words)
	chatUsage := strings.Replace(chat, `]}`, `],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`, 1)
	chatErr := fmt.Sprintf(`{"error":{"message":%q,"type":"server_error","param":null,"code":null}}`, words)
	chatEmpty := fmt.Sprintf(`{"error":{"message":%q},"choices":[ ]}`, words)
	msgs := fmt.Sprintf(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null}`, words)
	msgsErr := fmt.Sprintf(`{"type":"error","error":{"type":"overloaded_error","message":%q},"request_id":"req_01"}`, words)
	sse := fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":"stop"}]}`, words) + "\n\ndata: [DONE]\n\n"
	resp := fmt.Sprintf(`{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":%q}]}]}`, words)
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	const streamBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}`
	const respBody = `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":1000}`
	const msgsBody = `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	for _, tc := range []struct {
		name        string
		path, body  string
		status      int
		answer      string
		least, most int64 // tokens the bucket must lose
	}{
		{"chat text under 500", "/v1/chat/completions", chatBody, 500, chat, 8 + 2000, 8 + 2060},
		{"chat text under 400", "/v1/chat/completions", chatBody, 400, chat, 8 + 2000, 8 + 2060},
		{"chat text and usage under 500", "/v1/chat/completions", chatBody, 500, chatUsage, 8 + 2000, 8 + 2060},
		// A stream request's answer, an SSE stream labelled JSON (the
		// SDKs read it as SSE whatever its label): held, its text is
		// charged (settleHeldStream); unread, it was refunded.
		{"chat stream labelled JSON under 500", "/v1/chat/completions", streamBody, 500, sse, 8 + 2000, 8 + 2060},
		{"responses text under 502", "/v1/responses", respBody, 502, resp, 2000, 2100},
		{"messages text under 529", "/v1/messages", msgsBody, 529, msgs, 8 + 2000, 8 + 2460},
		// Error bodies, however long, are refunded as before.
		{"chat error under 500", "/v1/chat/completions", chatBody, 500, chatErr, 0, 0},
		{"chat error and empty choices under 500", "/v1/chat/completions", chatBody, 500, chatEmpty, 0, 0},
		{"messages overloaded under 529", "/v1/messages", msgsBody, 529, msgsErr, 0, 0},
		{"chat error to a stream request under 500", "/v1/chat/completions", streamBody, 500, chatErr, 0, 0},
		{"HTML error page under 502", "/v1/chat/completions", streamBody, 502, "<html><body>" + words + "</body></html>", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.path == "/v1/messages" {
				headers = []string{"anthropic-version", "2023-06-01"}
			}
			got := adv45StatusCost(t, "max_response_bytes: 4096\n", tc.status, "application/json", tc.answer, tc.path, tc.body, headers...)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}

// An error-status answer over max_response_bytes in a content coding
// llmguard does not count as it passes (gzip) was refunded; no provider's
// error body comes near that size, so it keeps its reservation (the input
// and the 1,000 output tokens asked), as a 2xx one does. A short one stays
// refunded (held and read: an error body).
func TestAdv45UnreadCodedErrorStatusAnswerKeepsItsReservation(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 45))
	noise := make([]byte, 12000) // letters that gzip cannot bring under 4 KiB
	for i := range noise {
		noise[i] = byte('a' + r.IntN(26))
	}
	chat := fmt.Sprintf(`{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, noise)
	short := `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	for _, tc := range []struct {
		name        string
		answer      string
		least, most int64
	}{
		{"12 KB of output under 500", chat, 8 + 1000, 8 + 1000},
		{"a short error under 500", short, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv45CodedCost(t, "max_response_bytes: 4096\n", 500, "application/json", "gzip", tc.answer, "/v1/chat/completions", chatBody)
			if got < tc.least || got > tc.most {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}

// TestAdv45NoRoomErrorStatusAnswerWithOutputIsCharged: with the answers
// held filling max_inflight_response_bytes (an answer whose rest never
// comes, as in TestUnread32AnswerWithoutRoomChargesItsText), an answer
// under 500 carrying 3,000 words in a chat choice was relayed unread and
// refunded; it is now charged its text. An error body relayed so is still
// refunded.
func TestAdv45NoRoomErrorStatusAnswerWithOutputIsCharged(t *testing.T) {
	words := strings.Join(strings.Fields(words30)[:3000], " ")
	answer := func(body string) string {
		return fmt.Sprintf("HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	chat := `{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"` + words + `"},"finish_reason":"stop"}]}`
	errBody := `{"error":{"message":"` + words + `","type":"server_error","param":null,"code":null}}`
	for _, tc := range []struct {
		name   string
		answer string
		charge bool // charged its text; else refunded
	}{
		{"chat text under 500", chat, true},
		{"error body under 500", errBody, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := heldUpstream32(t, map[string]string{"big": answer(tc.answer)})
			cfg, err := config.Parse([]byte(baseConfig(t, url, `  gpt-4o: {encoding: o200k_base, default_max_output_tokens: 256}
limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
max_inflight_response_bytes: 65536
`)))
			if err != nil {
				t.Fatal(err)
			}
			_, w, err := compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			text := w.CountText("gpt-4o-mini", words)
			h := frozenHarness(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { // the answer that holds the memory: never ends before the test
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions",
					strings.NewReader(`{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hold"}]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+testKey)
				req.Header.Set("x-case", "hold")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					<-ctx.Done()
					resp.Body.Close()
				}
			}()
			held := func() float64 { return h.scrape()["llmguard_response_body_bytes_in_flight"].sum(nil) }
			if !waitFor(30*time.Second, func() bool { return held() >= 32<<10 }) {
				t.Fatalf("the first answer holds %v bytes, want 32 KiB or more", held())
			}
			unread := func() float64 {
				return h.scrape()["llmguard_responses_unread_total"].sum(map[string]string{"reason": "budget"})
			}
			before, left := unread(), h.tokensLeft()
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"talk"}]}`, "x-case", "big")
			if resp.StatusCode != 500 || b != tc.answer {
				t.Fatalf("status %d, body %.200s…, want 500 and the whole answer", resp.StatusCode, b)
			}
			if n := unread() - before; n != 1 {
				t.Fatalf("%v answers relayed unread for want of room, want 1", n)
			}
			// Settled once the answer has passed; the deadline only turns a
			// hang into a failure.
			settled := func() bool { return left-h.tokensLeft() >= text }
			if !tc.charge {
				settled = func() bool { return h.tokensLeft() == left }
			}
			ok := waitFor(30*time.Second, settled)
			got := left - h.tokensLeft()
			t.Logf("charged %d tokens (text %d)", got, text)
			if !ok || tc.charge && got > text+200 {
				t.Errorf("the bucket lost %d tokens, want %s", got, map[bool]string{true: fmt.Sprintf("%d to %d", text, text+200), false: "0"}[tc.charge])
			}
		})
	}
}

// TestAdv45RequestSideHostileInputs guards what adv45 checked on the
// request side and found safe, through sockets to the mock upstream (which
// bills input as a provider would): a body read differently by different
// parsers, or one llmguard cannot weigh, is refused before it is
// forwarded; text hidden in escapes, codings or odd fields is reserved at
// least what the upstream bills; context the body only points to is
// reserved as the model's largest input (here more than the bucket, so
// refused as too large, never admitted as cheap).
func TestAdv45RequestSideHostileInputs(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	chat := func(members string) string {
		return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100` + members + `}`
	}
	textChat := fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":%q}],"max_tokens":100}`, words)
	var gz, gz2 bytes.Buffer
	z := gzip.NewWriter(&gz)
	io.WriteString(z, textChat)
	z.Close()
	z = gzip.NewWriter(&gz2)
	z.Write(gz.Bytes())
	z.Close()
	var bomb bytes.Buffer
	z = gzip.NewWriter(&bomb)
	io.WriteString(z, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`)
	io.WriteString(z, strings.Repeat("a", 20<<20))
	io.WriteString(z, `"}]}`)
	z.Close()
	for _, tc := range []struct {
		name    string
		path    string
		body    string
		headers []string
		status  int
		least   int64 // tokens reserved at least, for a 200
	}{
		{name: "messages twice", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"messages":[{"role":"user","content":"` + words + `"}]}`, status: 400},
		{name: "model twice", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","model":"gpt-4o",` + chat("")[1:], status: 400},
		{name: "max_tokens twice", path: "/v1/chat/completions", body: chat(`,"max_tokens":3000`), status: 400},
		{name: "nested 100,000 deep", path: "/v1/chat/completions", body: chat(`,"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000)), status: 400},
		{name: "byte order mark", path: "/v1/chat/completions", body: "\xef\xbb\xbf" + textChat, status: 400},
		{name: "data after the value", path: "/v1/chat/completions", body: textChat + "\x00{}", status: 400},
		{name: "escaped key", path: "/v1/chat/completions", body: strings.Replace(textChat, `"messages"`, `"mess\u0061ges"`, 1), status: 200, least: 2000},
		{name: "surrogate pairs", path: "/v1/chat/completions", body: strings.Replace(textChat, words, strings.Repeat(`\ud83d\ude00`, 2000), 1), status: 200, least: 2000},
		{name: "escaped NULs", path: "/v1/chat/completions", body: strings.Replace(textChat, words, strings.Repeat(`\u0000`, 2000), 1), status: 200, least: 1000},
		{name: "max_tokens 1e400", path: "/v1/chat/completions", body: strings.Replace(chat(""), `"max_tokens":100`, `"max_tokens":1e400`, 1), status: 429},
		{name: "n of a billion", path: "/v1/chat/completions", body: chat(`,"n":1000000000`), status: 429},
		{name: "prediction", path: "/v1/chat/completions", body: chat(fmt.Sprintf(`,"prediction":{"type":"content","content":%q}`, words)), status: 200, least: 2000},
		{name: "tool description", path: "/v1/chat/completions", body: chat(fmt.Sprintf(`,"tools":[{"type":"function","function":{"name":"f","description":%q,"parameters":{"type":"object"}}}]`, words)), status: 200, least: 2000},
		{name: "json_schema", path: "/v1/chat/completions", body: chat(fmt.Sprintf(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","description":%q}}}`, words)), status: 200, least: 2000},
		{name: "member no API defines", path: "/v1/chat/completions", body: chat(fmt.Sprintf(`,"extra_text":%q`, words)), status: 200, least: 2000},
		{name: "model query parameter", path: "/v1/chat/completions?model=gpt-4o", body: chat(""), status: 400},
		{name: "previous_response_id", path: "/v1/responses", body: `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":100,"previous_response_id":"resp_1"}`, status: 429},
		{name: "conversation", path: "/v1/responses", body: `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":100,"conversation":"conv_1"}`, status: 429},
		{name: "stored file", path: "/v1/chat/completions", body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}],"max_tokens":100}`, status: 429},
		{name: "Messages stored file", path: "/v1/messages", body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_1"}}]}],"max_tokens":100}`, status: 429},
		{name: "batches", path: "/v1/batches", body: `{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h"}`, status: 403},
		{name: "Messages batches", path: "/v1/messages/batches", body: `{"requests":[]}`, status: 403},
		{name: "assistants run", path: "/v1/threads/thread_1/runs", body: `{"assistant_id":"asst_1"}`, status: 403},
		{name: "gzip", path: "/v1/chat/completions", body: gz.String(), headers: []string{"Content-Encoding", "gzip"}, status: 200, least: 2000},
		{name: "gzip twice", path: "/v1/chat/completions", body: gz2.String(), headers: []string{"Content-Encoding", "gzip, gzip"}, status: 200, least: 2000},
		{name: "gzip named, plain sent", path: "/v1/chat/completions", body: textChat, headers: []string{"Content-Encoding", "gzip"}, status: 400},
		{name: "br named, plain sent", path: "/v1/chat/completions", body: textChat, headers: []string{"Content-Encoding", "br"}, status: 400},
		{name: "unknown coding", path: "/v1/chat/completions", body: textChat, headers: []string{"Content-Encoding", "compress"}, status: 415},
		{name: "gzip bomb", path: "/v1/chat/completions", body: bomb.String(), headers: []string{"Content-Encoding", "gzip"}, status: 413},
		{name: "UTF-16 charset", path: "/v1/chat/completions", body: textChat, headers: []string{"Content-Type", "application/json; charset=utf-16"}, status: 415},
		{name: "text/plain label", path: "/v1/chat/completions", body: textChat, headers: []string{"Content-Type", "text/plain"}, status: 200, least: 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := startMock(t)
			cfg, err := config.Parse([]byte(twoFlavorConfig(mock.URL, "user-tpd", 100000) + "max_body_bytes: 8388608\n"))
			if err != nil {
				t.Fatal(err)
			}
			frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
			left := h.tokensLeft()
			resp, body := h.send(tc.path, []byte(tc.body), tc.headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%.300s), want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status != 200 {
				return
			}
			remaining := resp.Header.Get("x-ratelimit-remaining-tokens")
			if remaining == "" {
				remaining = resp.Header.Get("anthropic-ratelimit-tokens-remaining")
			}
			r, err := strconv.ParseInt(remaining, 10, 64)
			if err != nil {
				t.Fatalf("remaining tokens %q: %v", remaining, err)
			}
			if reserved := left - r; reserved < tc.least {
				t.Errorf("reserved %d tokens, want at least %d", reserved, tc.least)
			}
		})
	}
}
