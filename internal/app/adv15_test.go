package app

// Adversarial tests of the fifth review (2026-12-03, night): each drives
// llmguard through real loopback sockets to an upstream whose answer is
// set by the test, and checks what the bucket was charged.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// zeroOutputUpstream answers every chat call with a usage of prompt input
// tokens and completion_tokens 0 (an answer stopped at once, or by a
// content filter), carrying text as its output anyway (none when ""):
// as one JSON answer, or as an SSE stream (the text in one chunk, then the
// include_usage chunk) when the request streams.
func zeroOutputUpstream(t *testing.T, prompt int, text string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":0,"total_tokens":%d}`, prompt, prompt)
		if strings.Contains(string(raw), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			if text != "" {
				fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%q},\"finish_reason\":null}]}\n\n", text)
			}
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"content_filter\"}]}\n\n")
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"content_filter"}],"usage":%s}`, text, usage)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A chat usage reporting completion_tokens 0 was read as unreadable, so
// the call was charged its reservation (input estimate + max_tokens)
// instead: a reported prompt_tokens larger than the estimate (500 against
// the 8 "hi" weighs) was dropped, the upstream billing 500 while the bucket
// lost 8 + 100. Such a usage is now settled as reported, JSON or stream —
// but never below the output text llmguard saw: 200 words of text
// (200 tokens) under completion_tokens 0 are charged 200 output tokens.
func TestAdv15ZeroCompletionSettlesAsReported(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 200)) // 200 o200k tokens
	for _, tc := range []struct {
		name   string
		prompt int
		text   string
		stream bool
		want   int64 // tokens the bucket must lose
	}{
		{"json no text", 500, "", false, 500},
		{"json text", 10, words, false, 10 + 200},
		{"stream no text", 500, "", true, 500},
		{"stream text", 10, words, true, 10 + 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := zeroOutputUpstream(t, tc.prompt, tc.text)
			cfg, err := config.Parse([]byte(baseConfig(t, up, `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`)))
			if err != nil {
				t.Fatal(err)
			}
			frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
			left := h.tokensLeft()
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000`
			if tc.stream {
				body += `,"stream":true,"stream_options":{"include_usage":true}`
			}
			resp, b := h.do("/v1/chat/completions", body+`}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.300s", resp.StatusCode, b)
			}
			if got := left - h.tokensLeft(); got != tc.want {
				t.Errorf("the bucket lost %d tokens, want %d (prompt_tokens %d, completion_tokens 0, %d bytes of text)", got, tc.want, tc.prompt, len(tc.text))
			}
		})
	}
}
