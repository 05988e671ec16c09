package app

// Tests of mend28 (2026-12-06): charge gaps found by adv27's session, each
// driven through llmguard over loopback sockets to an upstream that
// answers in a lenient server's own way.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMend28EncryptedReasoningKeepsTheReservation: OpenRouter's
// reasoning.encrypted item is reasoning the upstream bills and llmguard
// cannot read. Beside a usage reporting 0 output tokens, or no more than
// the answer's visible text (50 words), the answer was charged that text
// (some 50 tokens) though the request reserved 2,000; it is now charged
// at least the reservation, as a stream carrying the same item already was
// (StreamUpdate.Uncounted). A usage that leaves room for the reasoning
// (3,000) is the bill, as before.
func TestMend28EncryptedReasoningKeepsTheReservation(t *testing.T) {
	text := strings.TrimSpace(strings.Repeat("word ", 50))
	data := strings.Repeat("QUJD", 500)
	for _, c := range []struct {
		name     string
		output   int
		min, max float64
	}{
		{"zero output", 0, 2000, 2000},
		{"output below the text", 5, 2000, 2000},
		{"plausible output", 3000, 3000, 3000},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", c.name, stream), func(t *testing.T) {
				usage := fmt.Sprintf(`{"prompt_tokens":9,"completion_tokens":%d,"total_tokens":%d}`, c.output, 9+c.output)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					if !stream {
						w.Header().Set("Content-Type", "application/json")
						fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":%q,"reasoning_details":[{"type":"reasoning.encrypted","data":%q,"format":"openai-responses-v1","index":0}]},"finish_reason":"stop"}],"usage":%s}`, text, data, usage)
						return
					}
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"reasoning_details\":[{\"type\":\"reasoning.encrypted\",\"data\":%q,\"index\":0}]}}]}\n\n", data)
					for range 50 {
						io.WriteString(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word \"}}]}\n\n")
					}
					fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"id\":\"x\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
				}))
				t.Cleanup(srv.Close)
				h := fresh16(t, srv.URL)
				resp, b := h.do("/v1/chat/completions", fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":2000,"stream":%v,"messages":[{"role":"user","content":"think"}]}`, stream))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %.200s", resp.StatusCode, b)
				}
				if got := outputSettled(t, h); got < c.min || got > c.max {
					t.Errorf("charged %v output tokens, want %v to %v", got, c.min, c.max)
				}
			})
		}
	}
}

// TestMend28StreamReasoningAliasCountedOnce: a stream whose deltas carry
// the same reasoning under reasoning and reasoning_content (vLLM before
// v0.16, mlx-vlm) and reports no usage was charged its reasoning twice
// (6,000 output tokens for 3,000 words); it is counted once, as the same
// JSON answer is. Different texts under the two names are both counted.
func TestMend28StreamReasoningAliasCountedOnce(t *testing.T) {
	piece := strings.Repeat("word ", 100)
	for _, c := range []struct {
		name     string
		other    string
		min, max float64
	}{
		{"same text", piece, 3000, 3100},
		{"different texts", strings.Repeat("dog ", 100), 6000, 6200},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				for range 30 {
					fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":%q,\"reasoning_content\":%q}}]}\n\n", piece, c.other)
				}
				io.WriteString(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"think"}]}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
			if got := outputSettled(t, h); got < c.min || got > c.max {
				t.Errorf("charged %v output tokens, want %v to %v", got, c.min, c.max)
			}
		})
	}
}

// TestMend28HeldStreamOpeningWithAnUnknownField: a stream request's SSE
// answer labelled application/json whose first line is a field the SSE
// format does not define (ignored by its parsing rules, WHATWG HTML
// §9.2.6) was not taken for a stream: read as JSON, without usage, it was
// settled at the 256-token reservation for a usage of 6,000. A plain-text
// body that only looks like a field line is still no stream.
func TestMend28HeldStreamOpeningWithAnUnknownField(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	const events = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"length\"}]}\n\n" +
		"data: {\"id\":\"x\",\"choices\":[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n"
	for _, c := range []struct {
		name, body string
		min, max   float64
	}{
		{"x-trace field first", "x-trace: 7f3a\n\n" + events, 6000, 6000},
		{"known field first", "id: 1\n" + events, 6000, 6000},
		{"plain text", "note: ok, upstream busy\n", 256, 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, c.body)
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
			if got := outputSettled(t, h); got < c.min || got > c.max {
				t.Errorf("charged %v output tokens, want %v to %v", got, c.min, c.max)
			}
		})
	}
}

// TestMend28GeminiReasoningEffortIsReserved: Gemini's OpenAI-compatible
// endpoint turns reasoning_effort into a thinking budget billed as output
// beside the answer's maximum (1,024 tokens for "low", 8,192 for
// "medium", 24,576 for "high": https://ai.google.dev/gemini-api/docs/openai,
// "Thinking"). It reserved nothing: an answer without usage was settled at
// max_tokens (100). It now reserves the budget on top, for a Gemini model
// only; "none" and another model's reasoning_effort reserve none.
func TestMend28GeminiReasoningEffortIsReserved(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		model, effort string
		want          float64
	}{
		{"gemini-2.5-flash", "low", 100 + 1024},
		{"gemini-2.5-flash", "medium", 100 + 8192},
		{"gemini-2.5-flash", "none", 100},
		{"gpt-4o-mini", "medium", 100},
	} {
		t.Run(c.model+"/"+c.effort, func(t *testing.T) {
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_tokens":100,"reasoning_effort":%q,"messages":[{"role":"user","content":"think"}]}`, c.model, c.effort))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
			if got := outputSettled(t, h); got != c.want {
				t.Errorf("charged %v output tokens, want %v", got, c.want)
			}
		})
	}
}

// TestMend28WebSearchPreviewPriced: OpenAI bills its Responses
// web_search_preview tool $25 per 1,000 calls on a model that does not
// reason (gpt-4o, gpt-4.1), its search content tokens free, against $10
// for the web_search tool and for reasoning models
// (https://platform.openai.com/docs/pricing, built-in tools). Five preview
// calls on gpt-4o were charged 50,000 µUSD of searches instead of
// 125,000; web_search and o4-mini's preview calls stay at $10.
func TestMend28WebSearchPreviewPriced(t *testing.T) {
	for _, c := range []struct {
		model, tool string
		perCall     int64 // µUSD
	}{
		{"gpt-4o", "web_search_preview", 25_000},
		{"gpt-4o", "web_search_preview_2025_03_11", 25_000},
		{"gpt-4o", "web_search", 10_000},
		{"o4-mini", "web_search_preview", 10_000},
	} {
		for _, stream := range []string{``, `"stream":true,`} {
			t.Run(c.model+"/"+c.tool+"/"+stream, func(t *testing.T) {
				h, file := startSearchRig(t, "openai", "", `{gpt-4o: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, max_input_tokens: 1000}, o4-mini: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10, max_input_tokens: 1000}}`, "10")
				resp, b := h.do("/v1/responses", `{"model":"`+c.model+`",`+stream+`"max_output_tokens":50,"max_tool_calls":5,`+
					`"tools":[{"type":"`+c.tool+`"}],"input":"news today?"}`,
					"x-mock-completion-tokens", "40", "x-mock-web-searches", "5")
				if resp.StatusCode != 200 {
					t.Fatalf("%d %.200s", resp.StatusCode, b)
				}
				recs := flushedRecords(t, h, file)
				if len(recs) != 1 {
					t.Fatalf("ledger %+v", recs)
				}
				if r := recs[0]; r.CostMicroUSD != (r.InputTokens*5+1)/2+r.OutputTokens*10+5*c.perCall {
					t.Errorf("input %d output %d cost %d µUSD, want the tokens and five calls at %d µUSD", r.InputTokens, r.OutputTokens, r.CostMicroUSD, c.perCall)
				}
			})
		}
	}
}

// TestMend28ContentEncodingLinesAreJoined: an answer whose codings came as
// several Content-Encoding lines (a CDN adding "br" after its server's
// "gzip", or "gzip" twice) was read by its last line alone (fasthttp's
// parser keeps the last): undecodable, its usage of 6,000 output tokens
// was settled at the 256-token reservation. The lines are one list
// (RFC 9110 §5.3), undone last coding first; past three codings, or with
// one llmguard does not know, the answer stays unread, as a single line's
// would (the reservation).
func TestMend28ContentEncodingLinesAreJoined(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	for _, c := range []struct {
		name  string
		lines []string
		want  float64
	}{
		{"gzip twice", []string{"gzip", "gzip"}, 6000},
		{"gzip then a list", []string{"gzip", "gzip, gzip"}, 6000},
		{"four lines", []string{"gzip", "gzip", "gzip", "gzip"}, 256},
		{"an unknown coding", []string{"gzip", "x-unknown"}, 256},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", c.name, stream), func(t *testing.T) {
				answer, ct := usageAnswer(stream, usage)
				sent := []byte(answer)
				for _, line := range c.lines {
					for _, name := range strings.Split(line, ",") {
						if strings.TrimSpace(name) == "gzip" {
							sent = gzipped(t, sent)
						} else {
							sent = append([]byte("?"), sent...)
						}
					}
				}
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", ct)
					w.Header()["Content-Encoding"] = c.lines // one line each
					w.Write(sent)
				}))
				t.Cleanup(srv.Close)
				h := fresh16(t, srv.URL)
				resp, b := h.do("/v1/chat/completions", fmt.Sprintf(`{"model":"gpt-4o-mini","stream":%v,"messages":[{"role":"user","content":"write"}]}`, stream), "Accept-Encoding", "identity")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d: %.200q", resp.StatusCode, b)
				}
				if got := outputSettled(t, h); got != c.want {
					t.Errorf("charged %v output tokens, want %v", got, c.want)
				}
			})
		}
	}
}
