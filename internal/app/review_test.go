package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReviewStreamRequestJSONAnswerUnlabelled: an upstream that ignores a
// request's "stream" and answers JSON without a Content-Type (or as
// text/plain), in chunks, is read as a JSON answer: its usage settles it,
// not the 256-token reservation of a stream that carried no events.
// Between 39ca997 and streamedAnswer's narrowing such an answer was relayed
// as a stream, the tap found no SSE event in it and it settled at 256
// output tokens for a usage of 6,000.
func TestReviewStreamRequestJSONAnswerUnlabelled(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":6000,"total_tokens":6009}`
	const answer = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":` + usage + `}`
	for _, label := range []string{"", "text/plain"} {
		t.Run(fmt.Sprintf("%q", label), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header()["Content-Type"] = nil
				if label != "" {
					w.Header().Set("Content-Type", label)
				}
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, answer[:20])
				w.(http.Flusher).Flush()
				io.WriteString(w, answer[20:])
			}))
			t.Cleanup(srv.Close)
			h := fresh16(t, srv.URL)
			resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"write"}]}`)
			if got := settledOutput(t, h, resp, b); got < 6000 {
				t.Errorf("charged %v output tokens for a JSON usage of 6,000", got)
			}
		})
	}
}
