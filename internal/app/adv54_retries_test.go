package app

// adv54 (2026-12-07): a gateway's retries asked in a request field.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// LiteLLM's proxy reads x-litellm-num-retries ahead of a body's
// num_retries ("Precedence, highest first: request header
// x-litellm-num-retries, body num_retries…"; docs, request headers): with
// x-litellm-timeout short, every attempt runs and is billed upstream
// while llmguard reserves and settles one. The body's member was refused
// (TestGatewayRetriesAreRefused), the field went through. Now a count
// above 0, or a value that is no count, is refused (400 gateway_retries),
// in any case or behind LiteLLM's x-pass- prefix; 0 passes; and one in a
// chunked body's trailer, after the fields were judged, is not forwarded.
// So is Cloudflare AI Gateway's cf-aig-max-attempts above 1 (its
// cf-aig-request-timeout retries a slow call).
func TestAdv54GatewayRetryFieldRefused(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the retry fields each forwarded call carried
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		var got []string
		for k, v := range r.Header {
			if strings.Contains(strings.ToLower(k), "num-retries") {
				got = append(got, k+"="+strings.Join(v, ","))
			}
		}
		for k, v := range r.Trailer {
			if strings.Contains(strings.ToLower(k), "num-retries") {
				got = append(got, "trailer "+k+"="+strings.Join(v, ","))
			}
		}
		mu.Lock()
		seen = append(seen, strings.Join(got, ";"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h := fresh16(t, "http://"+ln.Addr().String())
	calls := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	last := func() string { mu.Lock(); defer mu.Unlock(); return seen[len(seen)-1] }
	body := `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	for _, headers := range [][]string{
		{"x-litellm-timeout", "0.1", "x-litellm-num-retries", "50"},
		{"X-LiteLLM-Num-Retries", "2"},
		{"x-pass-x-litellm-num-retries", "3"},
		{"x-litellm-num-retries", " 1.5 "},
		{"x-litellm-num-retries", "many"},
		{"cf-aig-request-timeout", "100", "cf-aig-max-attempts", "5"},
		{"CF-AIG-MAX-ATTEMPTS", "2"},
	} {
		before := calls()
		resp, b := h.do("/v1/chat/completions", body, headers...)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"gateway_retries"`) || calls() != before {
			t.Errorf("%q: %d %.160s, forwarded %v; want 400 gateway_retries, nothing forwarded", headers, resp.StatusCode, b, calls() != before)
		}
	}
	for _, ok := range [][]string{{"x-litellm-num-retries", "0"}, {"cf-aig-max-attempts", "1"}} {
		if resp, b := h.do("/v1/chat/completions", body, ok...); resp.StatusCode != http.StatusOK {
			t.Errorf("%q: %d %.160s, want 200", ok, resp.StatusCode, b)
		}
	}
	// A chunked body's trailer, read after the fields were judged.
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\nx-litellm-num-retries: 50\r\n\r\n", testKey, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && last() != "" {
		t.Errorf("a trailer's x-litellm-num-retries reached the upstream: %q", last())
	}
}
