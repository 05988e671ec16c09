package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// suffixUpstream is an OpenAI-compatible upstream that routes as LiteLLM
// and its Azure-compatible mocks do (FastAPI/Starlette
// "/openai/deployments/{model:path}/chat/completions": matched against the
// path decoded once, {model:path} taking any characters, '/' and '?'
// included): a chat completion with a large usage for any path ending in
// /chat/completions. It records each path it served.
func suffixUpstream(t *testing.T) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var served []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") { // r.URL.Path: decoded once
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		served = append(served, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50000,"completion_tokens":50000,"total_tokens":100000}}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), served...) }
}

// litellmUpstream serves chat completions choosing the model as LiteLLM's
// proxy does (proxy_server.py / common_request_processing.py:
// data["model"] = completion_model or user_model or model or data["model"],
// where model is the {model:path} of /openai/deployments/{model:path}/chat/completions
// and, on /v1/chat/completions, a query parameter of the same name), and
// records the model it billed.
func litellmUpstream(t *testing.T) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var billed []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			Model string `json:"model"`
		}
		json.Unmarshal(b, &body)
		model := r.URL.Query().Get("model")
		if rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/"); ok {
			model = strings.TrimSuffix(rest, "/chat/completions")
		}
		if model == "" {
			model = body.Model
		}
		mu.Lock()
		billed = append(billed, model)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1000,"total_tokens":1008}}`, model)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), billed...) }
}

// An escaped '?' or '#' in the path is refused (400 invalid_path): the
// decoded path llmguard classifies ends there, while an upstream that
// decodes once and routes by suffix (LiteLLM's Azure-compatible routes)
// serves a chat completion, so the call would pass as a free one. A raw
// '#' in the request line never reaches the upstream. (Found by the
// adversarial pass of 2026-12-03.)
func TestEscapedQueryMarkInPathRefused(t *testing.T) {
	up, served := suffixUpstream(t)
	h := startWith(t, nil, up, `
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000}
`)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	if resp, b := h.do("/v1/chat/completions", body); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("control: %d %s, want 429", resp.StatusCode, b)
	}
	for _, p := range []string{
		"/openai/deployments/x/moderations%3F/chat/completions",
		"/openai/deployments/x/moderations%23/chat/completions",
		"/openai/deployments/x/models%3f/chat/completions",
		"/v1/moderations%3F/chat/completions",
		"/openai/deployments/x/chat/completions/y%3F/chat/completions",
	} {
		if resp, b := h.do(p, body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"invalid_path"`) {
			t.Errorf("POST %s: %d %.160s, want 400 invalid_path", p, resp.StatusCode, b)
		}
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /openai/deployments/x/moderations#/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", testKey, len(body), body)
	io.ReadAll(c)
	if got := served(); len(got) > 0 {
		t.Errorf("upstream served %d chat completions (%q) llmguard did not weigh as such", len(got), got)
	}
}

// A request that names a model outside its body — a model query
// parameter (in any case or escaping), or a deployments path to an
// upstream that is not Azure — is refused (400 model_outside_body): an
// OpenAI-compatible upstream such as LiteLLM's proxy bills that model, and
// llmguard prices the body's. Reads pass.
func TestModelOutsideBodyRefused(t *testing.T) {
	up, billed := litellmUpstream(t)
	h := startWith(t, nil, up, `
limits:
  - {name: spend, scope: user, unit: usd, rate: 0.01, per: 24h, burst: 0.01}
`)
	body := func(m string) string {
		return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}],"max_tokens":1000}`
	}
	if resp, b := h.do("/v1/chat/completions", body("o1-pro")); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("control: o1-pro in the body: %d %.200s, want 429", resp.StatusCode, b)
	}
	for _, p := range []string{
		"/v1/chat/completions?model=o1-pro",
		"/v1/chat/completions?x=1&Model=o1-pro",
		"/v1/chat/completions?mod%65l=o1-pro",
		"/openai/deployments/o1-pro/chat/completions?api-version=2024-10-21",
		"/v1/Deployments/o1-pro/chat/completions",
	} {
		if resp, b := h.do(p, body("gpt-4o-mini")); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "model_outside_body") {
			t.Errorf("POST %s: %d %.160s, want 400 model_outside_body", p, resp.StatusCode, b)
		}
	}
	if got := billed(); len(got) > 0 {
		t.Errorf("upstream billed %q", got)
	}
	if resp, b := h.do("/v1/chat/completions?api-version=2024-10-21", body("gpt-4o-mini")); resp.StatusCode != http.StatusOK {
		t.Errorf("a query without a model: %d %.160s, want 200", resp.StatusCode, b)
	}
}
