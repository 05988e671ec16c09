package app

// Adversarial tests of adv26 (2026-12-06). Each drives llmguard through
// loopback sockets to an upstream that answers in a lenient server's own
// way, and fails where llmguard charged less than the answer shows.

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	brotli "github.com/molecule-man/go-brrr"
)

// TestAdv26ChatAnswerReasoningIsCounted: a non-streamed chat answer's
// message.reasoning (vLLM's reasoning parsers since reasoning_content was
// renamed; OpenRouter's chat answer) is output the upstream generated
// and bills. The stream's delta.reasoning was counted, the JSON answer's
// was not: an answer without usage (or reporting 0 or 5 output tokens)
// that reasoned 3,000 words and answered "ok" was charged the 256-token
// default reservation (or 0, or 5), where its text floor should have
// charged the 3,000 words.
func TestAdv26ChatAnswerReasoningIsCounted(t *testing.T) {
	for _, tc := range []struct{ name, usage string }{
		{"no usage", ``},
		{"zero output", `,"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}`},
		{"small output", `,"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","reasoning":%q,"content":"ok"},"finish_reason":"stop"}]%s}`, words16, tc.usage)
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"think"}]}`)
			if got := settledOutput(t, h, resp, b); got < 3000 {
				t.Errorf("charged %v output tokens for an answer that reasoned 3,000 words", got)
			}
		})
	}
}

// TestAdv26CodedAnswerUsageIsRead: an upstream answer in Brotli, or in
// "deflate" sent as raw deflate data without its zlib wrapper (which
// urllib3, httpx and undici read, falling back from zlib), reached the
// client readable but was relayed unread: its usage of 6,000 output
// tokens was settled at the 256-token default reservation, JSON and
// streamed alike. An upstream compresses so whatever llmguard's
// Accept-Encoding: identity asked (a CDN in front, a server's own
// always-on setting). Both are now decoded, Brotli's window taken from
// the answer budget as zstd's is.
func TestAdv26CodedAnswerUsageIsRead(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	encode := map[string]func([]byte) []byte{
		"br": func(b []byte) []byte {
			var out bytes.Buffer
			w, err := brotli.NewWriter(&out, 5)
			if err != nil {
				panic(err)
			}
			w.Write(b)
			w.Close()
			return out.Bytes()
		},
		"deflate": func(b []byte) []byte { // raw: no zlib header
			var out bytes.Buffer
			w, _ := flate.NewWriter(&out, 5)
			w.Write(b)
			w.Close()
			return out.Bytes()
		},
	}
	for _, coding := range []string{"br", "deflate"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", coding, stream), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					raw, _ := io.ReadAll(r.Body)
					answer := `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":` + usage + `}`
					w.Header().Set("Content-Type", "application/json")
					if strings.Contains(string(raw), `"stream":true`) {
						w.Header().Set("Content-Type", "text/event-stream")
						answer = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"length\"}]}\n\n" +
							"data: {\"id\":\"x\",\"choices\":[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n"
					}
					w.Header().Set("Content-Encoding", coding)
					w.Write(encode[coding]([]byte(answer)))
				}))
				t.Cleanup(srv.Close)
				h := fresh16(t, srv.URL)
				body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}]}`
				if stream {
					body = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`
				}
				resp, b := h.do("/v1/chat/completions", body)
				// A JSON answer is relayed as sent (its copy decoded for the
				// tap), a stream decoded: the client reads either.
				switch resp.Header.Get("Content-Encoding") {
				case "br":
					d, _ := io.ReadAll(brotli.NewReader(strings.NewReader(b)))
					b = string(d)
				case "deflate":
					d, _ := io.ReadAll(flate.NewReader(strings.NewReader(b)))
					b = string(d)
				}
				if got := settledOutput(t, h, resp, b); got < 6000 {
					t.Errorf("charged %v output tokens for a usage of 6,000", got)
				}
			})
		}
	}
}

// TestAdv26StreamLabelledOddlyIsRead: a streamed answer (SSE) labelled
// otherwise than exactly text/event-stream (the media type in capitals,
// RFC 9110 §8.3.1: case-insensitive; or no Content-Type at all, as a
// hand-written server's StreamingResponse without a media type sends)
// reached its client, whose SDK reads the body of a stream request as SSE
// whatever its label, but llmguard took it for a JSON answer, found no
// usage in it and settled it at the 256-token default reservation: its
// usage of 6,000 output tokens was never read.
func TestAdv26StreamLabelledOddlyIsRead(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	for _, label := range []string{"TEXT/EVENT-STREAM", "Text/Event-Stream; charset=utf-8", ""} {
		t.Run(fmt.Sprintf("%q", label), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header()["Content-Type"] = nil // none unless set: net/http sniffs otherwise
				if label != "" {
					w.Header().Set("Content-Type", label)
				}
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"length\"}]}\n\n"+
					"data: {\"id\":\"x\",\"choices\":[],\"usage\":"+usage+"}\n\ndata: [DONE]\n\n")
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`)
			if got := settledOutput(t, h, resp, b); got < 6000 {
				t.Errorf("charged %v output tokens for a usage of 6,000", got)
			}
		})
	}
}

// TestAdv26StreamLabelledJSONIsRead: a stream request's SSE answer
// labelled application/json, which the SDKs read as SSE all the same, was
// taken for a JSON answer without usage and settled at the 256-token
// reservation (adv26's lead). Its held body is now read as a stream
// (proxy's settleHeldStream): its usage when it reports one, gzip-coded
// too; at least the reservation when it ends without its terminal event;
// and a JSON answer to a stream request (an upstream that ignores
// "stream") is still read as JSON.
func TestAdv26StreamLabelledJSONIsRead(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	const sse = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"length\"}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, sse)
	zw.Close()
	for _, c := range []struct {
		name, body, coding string
		min, max           float64 // output tokens charged
	}{
		{"usage reported", sse, "", 6000, 6000},
		{"usage reported, gzip", gz.String(), "gzip", 6000, 6000},
		{"cut before its end", "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n", "", 256, 256},
		{"a JSON answer", `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":` + usage + `}`, "", 6000, 6000},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if c.coding != "" {
					w.Header().Set("Content-Encoding", c.coding)
				}
				io.WriteString(w, c.body)
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`)
			if got := settledOutput(t, h, resp, b); got < c.min || got > c.max {
				t.Errorf("charged %v output tokens, want %v to %v", got, c.min, c.max)
			}
		})
	}
}

// settledOutput checks that an answer through llmguard (resp, its body b)
// is a 200 carrying "ok", waits for its settlement and returns the output
// tokens h's llmguard charged (llmguard_tokens_total{kind="output"}).
func settledOutput(t *testing.T, h *harness, resp *http.Response, b string) float64 {
	t.Helper()
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, `"ok"`) {
		t.Fatalf("%d %q: %.200q", resp.StatusCode, resp.Header.Get("Content-Encoding"), b)
	}
	return outputSettled(t, h)
}

// outputSettled returns the output tokens h's llmguard charged
// (llmguard_tokens_total{kind="output"}), once it has settled some.
func outputSettled(t *testing.T, h *harness) float64 {
	t.Helper()
	out := func() float64 { return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}) }
	if !waitFor(30*time.Second, func() bool { return out() > 0 }) {
		t.Fatal("not settled")
	}
	return out()
}
