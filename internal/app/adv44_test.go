package app

// Adversarial tests of adv44 (2026-12-07): a Messages stream's documented
// members (message_start's id and model, a usage) carrying text beside a
// usage of 1 output token, and the rate-limit fields of an upstream's own
// 429. Each drives llmguard through loopback sockets to an upstream the
// test sets.

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// A message_start whose id or model, documented members that carry no
// output, held 2,000 words beside a usage of 1 output token was charged
// 9 tokens (8 input, 1 output): their strings were never read. So was a
// usage holding a 2,000-word string, in message_start or message_delta,
// and a message_delta's stop_details or container. Such a member, longer
// than any Anthropic sends (an id or model over 64 bytes of JSON, an
// object over 1 KiB), is now counted as text against the usage: 2,008;
// so is a stop_reason sent as an object or array.
// Honest events, and a long real model name, are charged as before.
func TestAdv44OversizedMessageStartMembersAreCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	w := fmt.Sprintf("%q", words)
	two := strings.Replace(adv43EndDelta, `"output_tokens":1`, `"output_tokens":2`, 1)
	for _, tc := range []struct {
		name   string
		stream string
		least  int64 // tokens the bucket must lose at least (and at most 10 more)
	}{
		{"text as the id", adv43Stream(strings.Replace(adv43Start, `"msg_01"`, w, 1), "", ""), 8 + 2000},
		{"text as the model", adv43Stream(strings.Replace(adv43Start, `"model":"claude-sonnet-4-5"`, `"model":`+w, 1), "", ""), 8 + 2000},
		{"text as the model, spaced", adv43Stream(strings.Replace(adv43Start, `"model":"claude-sonnet-4-5"`, `"model": `+w, 1), "", ""), 8 + 2000},
		{"text as the id, an array", adv43Stream(strings.Replace(adv43Start, `"msg_01"`, "["+w+"]", 1), "", ""), 8 + 2000},
		{"text as the role", adv43Stream(strings.Replace(adv43Start, `"assistant"`, w, 1), "", ""), 8 + 2000},
		{"text in message_start's usage", adv43Stream(strings.Replace(adv43Start, `"output_tokens":1}`, `"output_tokens":1,"service_tier":`+w+`}`, 1), "", ""), 8 + 2000},
		{"text in message_delta's usage", adv43Stream("", "", strings.Replace(adv43EndDelta, `"output_tokens":1}`, `"output_tokens":1,"service_tier":`+w+`}`, 1)), 8 + 2000},
		{"text in message_delta's stop_details", adv43Stream("", "", strings.Replace(adv43EndDelta, `"stop_sequence":null}`, `"stop_sequence":null,"stop_details":{"type":"refusal","explanation":`+w+`}}`, 1)), 8 + 2000},
		{"text in message_delta's stop_reason, an object", adv43Stream("", "", strings.Replace(adv43EndDelta, `"stop_reason":"end_turn"`, `"stop_reason":{"r":`+w+`}`, 1)), 8 + 2000},
		{"honest compact", adv43Stream("", "", two), 8 + 2},
		{"honest Bedrock model name", adv43Stream(strings.Replace(adv43Start, `"claude-sonnet-4-5"`, `"us.anthropic.claude-sonnet-4-5-20250929-v1:0"`, 1), "", two), 8 + 2},
		{"honest usage with every figure", adv43Stream(strings.Replace(adv43Start, `"output_tokens":1}`, `"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","inference_geo":"us"}`, 1), "", two), 8 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := adv43Cost(t, tc.stream)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.least+10 {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.least+10)
			}
		})
	}
}

// adv44Headers is what a caller gets when the upstream answers a chat (or
// Messages) call with status and the given header fields: the answer's
// header.
func adv44Headers(t *testing.T, anthropic bool, status int, fields ...string) http.Header {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		for i := 0; i+1 < len(fields); i += 2 {
			w.Header().Add(fields[i], fields[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if anthropic {
			io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
		} else {
			io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini on tokens per min (TPM)","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	cfg, err := config.Parse([]byte(twoFlavorConfig(srv.URL, "user-tpd", 100000)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	var resp *http.Response
	if anthropic {
		resp, _ = h.do("/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, "anthropic-version", "2023-06-01")
	} else {
		resp, _ = h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, status)
	}
	return resp.Header
}

// An upstream's own 429 came to its caller with llmguard's rate-limit
// fields in place of the upstream's: x-ratelimit-remaining-tokens 99,9xx
// and a reset of a few ms where the upstream said 0 and 20s, so a client
// that paces itself by those fields (rather than Retry-After, which the
// OpenAI and Anthropic SDKs read, and which passed) sent again at once
// into the provider's limit. The upstream's fields of the flavor's
// families now pass as sent on its 429; llmguard's IETF RateLimit fields
// and its own headers are still written; any other status (a 200 here)
// still carries llmguard's fields in place of the upstream's.
func TestAdv44UpstreamRateLimitFieldsPassOnIts429(t *testing.T) {
	t.Run("openai 429", func(t *testing.T) {
		h := adv44Headers(t, false, http.StatusTooManyRequests,
			"x-ratelimit-limit-tokens", "200000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "20s",
			"X-Ratelimit-Remaining-Requests", "4999", "retry-after", "20", "retry-after-ms", "20000")
		for k, want := range map[string]string{"x-ratelimit-limit-tokens": "200000", "x-ratelimit-remaining-tokens": "0",
			"x-ratelimit-reset-tokens": "20s", "x-ratelimit-remaining-requests": "4999", "retry-after": "20", "retry-after-ms": "20000"} {
			if got := h.Values(k); len(got) != 1 || got[0] != want {
				t.Errorf("%s: %q, want the upstream's %q alone", k, got, want)
			}
		}
		if h.Get("RateLimit") == "" || h.Get("x-llmguard-request-id") == "" {
			t.Errorf("llmguard's own fields missing: RateLimit %q, x-llmguard-request-id %q", h.Get("RateLimit"), h.Get("x-llmguard-request-id"))
		}
	})
	t.Run("anthropic 429", func(t *testing.T) {
		h := adv44Headers(t, true, http.StatusTooManyRequests,
			"anthropic-ratelimit-tokens-limit", "80000", "anthropic-ratelimit-tokens-remaining", "0",
			"anthropic-ratelimit-tokens-reset", "2026-12-01T12:00:20Z", "retry-after", "20")
		for k, want := range map[string]string{"anthropic-ratelimit-tokens-limit": "80000", "anthropic-ratelimit-tokens-remaining": "0",
			"anthropic-ratelimit-tokens-reset": "2026-12-01T12:00:20Z", "retry-after": "20"} {
			if got := h.Values(k); len(got) != 1 || got[0] != want {
				t.Errorf("%s: %q, want the upstream's %q alone", k, got, want)
			}
		}
	})
	t.Run("openai 200", func(t *testing.T) {
		// A success is llmguard's to describe: its fields replace the
		// upstream's (DESIGN.md §6), as before.
		srvHeaders := adv44Headers(t, false, http.StatusOK, "x-ratelimit-remaining-tokens", "7")
		if got := srvHeaders.Values("x-ratelimit-remaining-tokens"); len(got) != 1 || got[0] == "7" {
			t.Errorf("x-ratelimit-remaining-tokens %q on a 200, want llmguard's alone", got)
		}
	})
}

// adv44StatusCost is what the bucket lost for a call whose upstream
// answers status with answer labelled contentType (answerCost, any
// status).
func adv44StatusCost(t *testing.T, anthropic bool, status int, contentType, answer, path, body string, headers ...string) int64 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost { // the harness's probe of its bucket
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	cfg, err := config.Parse([]byte(twoFlavorConfig(srv.URL, "user-tpd", 100000)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	left := h.tokensLeft()
	resp, _ := h.do(path, body, headers...)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, status)
	}
	return left - h.tokensLeft()
}

// A non-streamed answer under an error status that carried a whole answer
// (2,000 words in a chat choice's content, or a Messages text block) and
// no usage was refunded, as an error is: a gateway relaying a provider's
// answer under its own status, or a lenient upstream, had it generated
// and billed for nothing. It is now settled as a 2xx answer without usage
// is: the input estimated and the larger of the output reserved (1,000)
// and its text (2,000). An error body, whatever its message says, is
// refunded as before; with a usage, the usage (checked against the text)
// as before. A stream under such a status was already settled so (the
// text after an error event counted: TestAdv43ErrorTextIsCharged's
// neighbours).
func TestAdv44ErrorStatusAnswerWithTextIsCharged(t *testing.T) {
	words := strings.TrimSpace(strings.Repeat("word ", 2000)) // 2,000 o200k tokens
	chat := fmt.Sprintf(`{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, words)
	chatUsage := strings.Replace(chat, `]}`, `],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`, 1)
	chatErr := fmt.Sprintf(`{"error":{"message":%q,"type":"server_error","param":null,"code":null}}`, words)
	msgs := fmt.Sprintf(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null}`, words)
	msgsErr := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	errFirstChat := `data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n" +
		fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":"stop"}]}`, words) + "\n\ndata: [DONE]\n\n"
	errFirstMsgs := adv43Event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`) +
		adv43Event("message_start", adv43Start) + adv43Event("content_block_start", adv43Block) +
		adv43Event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, words)) +
		adv43Event("content_block_stop", adv43Stop) + adv43Event("message_delta", adv43EndDelta) + adv43Event("message_stop", `{"type":"message_stop"}`)
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	const msgsBody = `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	for _, tc := range []struct {
		name        string
		anthropic   bool
		status      int
		answer      string
		least, most int64 // tokens the bucket must lose
	}{
		{"chat text under 500", false, 500, chat, 8 + 2000, 8 + 2010},
		{"chat text under 400", false, 400, chat, 8 + 2000, 8 + 2010},
		{"chat text under 429", false, 429, chat, 8 + 2000, 8 + 2010},
		{"chat text under 503", false, 503, chat, 8 + 2000, 8 + 2010},
		{"chat text and usage under 500", false, 500, chatUsage, 8 + 2000, 8 + 2010},
		{"messages text under 529", true, 529, msgs, 8 + 2000, 8 + 2410}, // Claude's factor 1.2 on the input estimate
		{"chat error under 500", false, 500, chatErr, 0, 0},
		// Streams (known item 1: a stream whose first event is an error,
		// then text): the text after the error is counted, under any
		// status, as it was before adv44 (a guard, not a fix).
		{"chat stream, error first, under 200", false, 200, errFirstChat, 8 + 2000, 8 + 2010},
		{"chat stream, error first, under 500", false, 500, errFirstChat, 8 + 2000, 8 + 2010},
		{"messages stream, error first, under 529", true, 529, errFirstMsgs, 8 + 2000, 8 + 2410},
		{"messages overloaded under 529", true, 529, msgsErr, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, body := "/v1/chat/completions", chatBody
			var headers []string
			if tc.anthropic {
				path, body, headers = "/v1/messages", msgsBody, []string{"anthropic-version", "2023-06-01"}
			}
			ct := "application/json"
			if strings.HasPrefix(tc.answer, "data:") || strings.HasPrefix(tc.answer, "event:") {
				ct = "text/event-stream"
			}
			got := adv44StatusCost(t, tc.anthropic, tc.status, ct, tc.answer, path, body, headers...)
			t.Logf("charged %d tokens", got)
			if got < tc.least || got > tc.most {
				t.Errorf("the bucket lost %d tokens, want %d to %d", got, tc.least, tc.most)
			}
		})
	}
}

// Known item 3 (kept, not a hole): fasthttp answers "Expect:
// 100-continue" before llmguard sees the request, so a caller without a
// key is told to send its body. It then costs what any keyless caller
// costs (TestUnauthenticatedHugeBodiesCostNothing): llmguard answers 401
// after the first 8 KiB it has read, never waiting for the rest of an
// 8 MiB body, and closes the connection. A multipart/form-data body,
// which fasthttp would otherwise read whole (to temporary files past
// 16 MiB) before any handler ran, is not pre-parsed
// (DisablePreParseMultipartForm): it gets its 401 alike. The 30 s
// deadline only turns a hang into a failure.
func TestAdv44KeylessContinueAndMultipartBodiesAreNotRead(t *testing.T) {
	mock := startMock(t)
	h := startTransport(t, mock, transportYAML(mock.URL, "max_body_bytes: 16777216", "", slowTPM), nil)
	addr := strings.TrimPrefix(h.url, "http://")
	for _, tc := range []struct {
		name, contentType string
		expect            bool
	}{
		{"json, 100-continue", "application/json", true},
		{"multipart", "multipart/form-data; boundary=x", false},
		{"multipart, 100-continue", "multipart/form-data; boundary=x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			head := "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nContent-Type: " + tc.contentType + "\r\nContent-Length: 8388608\r\n"
			if tc.expect {
				head += "Expect: 100-continue\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if tc.expect {
				line, err := br.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
					t.Fatalf("first line %q (%v), want fasthttp's 100 Continue", line, err)
				}
				if _, err := br.ReadString('\n'); err != nil { // the blank line after it
					t.Fatal(err)
				}
			}
			part := "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n" + strings.Repeat(" ", 16<<10)
			if _, err := io.WriteString(c, part); err != nil {
				t.Fatal(err)
			}
			r := readAnswer(br)
			if r.err != nil || r.status != http.StatusUnauthorized || r.errCode != "invalid_api_key" {
				t.Fatalf("status %d code %q err %v after 16 KiB of an 8 MiB body, want 401 invalid_api_key", r.status, r.errCode, r.err)
			}
		})
	}
	if n := mock.Requests.Load(); n != 0 {
		t.Errorf("%d keyless requests reached the upstream", n)
	}
}
