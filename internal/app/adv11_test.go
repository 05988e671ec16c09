package app

// Adversarial tests of the eleventh red-team round (2026-12-04): each
// drives llmguard through real loopback sockets to an upstream that bills
// every string of the body it reads (a lenient OpenAI- or
// Anthropic-compatible server whose prompt template writes out members
// it does not know), and fails where the upstream billed more than the
// bucket held.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// unknown11 is a member no API defines, holding 3,000 words: a lenient
// upstream that writes a message, part or tool out as its JSON bills
// them.
var unknown11 = `"note":"` + words16 + `"`

// Members llmguard did not know inside the messages, parts, calls and
// tools it weighs (a text part's "note" beside its "text") weighed
// nothing: 3,000 words there went seven times through a 20,000-token
// bucket, billed 21,0xx by an upstream that writes them into the prompt.
// Each is now weighed by its text, as input.
func TestAdv11UnknownMembersAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["input"], body["system"], body["tools"], body["tool_choice"]), 1
	})
	u := unknown11
	call := `{"role":"assistant","tool_calls":[%s]},{"role":"tool","tool_call_id":"c","content":"ok"}`
	chat := func(msgs string) string {
		return `{"model":"gpt-4o-mini","max_tokens":1,"messages":[` + msgs + `]}`
	}
	// gpt-4o weighs a low-detail image 85 tokens (gpt-4o-mini: 2,833,
	// which would hide the 3,000 words from the bucket's count).
	chat4o := func(msgs string) string {
		return `{"model":"gpt-4o","max_tokens":1,"messages":[` + msgs + `]}`
	}
	responses := func(input string) string {
		return `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[` + input + `]}`
	}
	claude := func(rest string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":1,` + rest + `}`
	}
	claudeMsgs := func(msgs string) string { return claude(`"messages":[` + msgs + `]`) }
	tool := `{"name":"f","description":"d","input_schema":{"type":"object"}}`
	for _, tc := range []struct{ name, path, body string }{
		{"chat message", "/v1/chat/completions", chat(`{"role":"user","content":"hi",` + u + `}`)},
		{"chat text part", "/v1/chat/completions", chat(`{"role":"user","content":[{"type":"text","text":"hi",` + u + `}]}`)},
		{"chat image part", "/v1/chat/completions", chat4o(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"},` + u + `}]}`)},
		{"chat image_url", "/v1/chat/completions", chat4o(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low",` + u + `}}]}`)},
		{"chat tool call", "/v1/chat/completions", chat(`{"role":"user","content":"hi"},` + fmt.Sprintf(call, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},`+u+`}`))},
		{"chat call function", "/v1/chat/completions", chat(`{"role":"user","content":"hi"},` + fmt.Sprintf(call, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}",`+u+`}}`))},
		{"responses message", "/v1/responses", responses(`{"type":"message","role":"user","content":"hi",` + u + `}`)},
		{"responses part", "/v1/responses", responses(`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi",` + u + `}]}`)},
		{"responses call", "/v1/responses", responses(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}",` + u + `}`)},
		{"responses call output", "/v1/responses", responses(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok",` + u + `}`)},
		{"responses reasoning summary part", "/v1/responses", responses(`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"hi",` + u + `}],"encrypted_content":"abc"}`)},
		{"responses reasoning summary string", "/v1/responses", responses(`{"type":"reasoning","id":"rs_1","summary":["` + words16 + `"],"encrypted_content":"abc"}`)},
		{"responses reasoning summary as text", "/v1/responses", responses(`{"type":"reasoning","id":"rs_1","summary":"` + words16 + `","encrypted_content":"abc"}`)},
		{"responses reasoning encrypted object", "/v1/responses", responses(`{"type":"reasoning","summary":[],"encrypted_content":{"c":"` + words16 + `"}}`)},
		{"messages message", "/v1/messages", claudeMsgs(`{"role":"user","content":"hi",` + u + `}`)},
		{"messages text block", "/v1/messages", claudeMsgs(`{"role":"user","content":[{"type":"text","text":"hi",` + u + `}]}`)},
		{"messages system block", "/v1/messages", claude(`"system":[{"type":"text","text":"be brief",` + u + `}],"messages":[{"role":"user","content":"hi"}]`)},
		{"messages tool_use", "/v1/messages", claudeMsgs(`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{},` + u + `}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}`)},
		{"messages tool_result", "/v1/messages", claudeMsgs(`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok",` + u + `}]}`)},
		{"messages image source", "/v1/messages", claudeMsgs(`{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png",` + u + `}},{"type":"text","text":"what is it?"}]}`)},
		{"messages document source", "/v1/messages", claudeMsgs(`{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"a short note",` + u + `}},{"type":"text","text":"summarise"}]}`)},
		{"messages tool", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"},` + u + `}]`)},
		{"messages defined tool", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"bash_20250124","name":"bash",` + u + `}]`)},
		{"messages tool_choice", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":"auto",` + u + `}`)},
		{"messages tool_choice flag", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":"auto","disable_parallel_tool_use":"` + words16 + `"}`)},
		{"messages tool_choice type", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":{"t":"` + words16 + `"}}`)},
		{"messages tool_choice without tools", "/v1/messages", claude(`"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"auto",` + u + `}`)},
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

// A success answer without usage was charged its reservation whatever
// text it carried: a request naming no maximum (256 tokens reserved by
// default) answered with 3,000 words and no usage (a lenient upstream
// that reports none, a gateway that drops it) settled 256 output tokens,
// and one whose max_completion_tokens the upstream ignores (Ollama's
// chat reads only max_tokens) 10. It is now charged the text, counted,
// as a stream without usage is.
func TestAdv11AnswerWithoutUsageChargedItsText(t *testing.T) {
	text := `"` + words16 + `"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			fmt.Fprint(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":`+text+`}],"stop_reason":"end_turn"}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":`+text+`,"annotations":[]}]}]}`)
		default:
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":`+text+`},"finish_reason":"stop"}]}`)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ name, path, body string }{
		{"chat default", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}]}`},
		{"chat ignored maximum", "/v1/chat/completions", `{"model":"gpt-4o-mini","max_completion_tokens":10,"messages":[{"role":"user","content":"write"}]}`},
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","input":"write"}`},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"write"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.path == "/v1/messages" {
				h = frozenClaude(t, srv.URL, "user-tpd", 20000)
			} else {
				h = fresh16(t, srv.URL)
			}
			resp, b := h.do(tc.path, tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.200s", resp.StatusCode, b)
			}
			out := func() float64 { return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}) }
			if !waitFor(30*time.Second, func() bool { return out() > 0 }) {
				t.Fatal("not settled")
			}
			if got := out(); got < 3000 {
				t.Errorf("charged %v output tokens for an answer of 3,000 words without usage", got)
			}
		})
	}
}
