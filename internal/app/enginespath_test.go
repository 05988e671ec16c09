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

// enginesUpstream serves chat completions, completions and embeddings
// choosing the model as LiteLLM's proxy does on its
// /engines/{model:path}/… routes (proxy_server.py: the path's model goes
// before the body's, as on /openai/deployments/{model:path}/…), and, as a
// servlet container would, drops each segment's ";params" before routing.
// It records the model it billed and answers a large usage.
func enginesUpstream(t *testing.T) (string, func() []string) {
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
		segs := strings.Split(r.URL.Path, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		path := strings.Join(segs, "/")
		model := body.Model
		for _, root := range []string{"/engines/", "/v1/engines/", "/openai/deployments/"} {
			if rest, ok := strings.CutPrefix(strings.ToLower(path), root); ok {
				for _, end := range []string{"/chat/completions", "/completions", "/embeddings"} {
					if m, ok := strings.CutSuffix(rest, end); ok {
						model = m
						break
					}
				}
			}
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

// A path with an engines segment names the model outside the body
// (LiteLLM's /engines/{model:path}/chat/completions bills the path's
// model), and so does a deployments segment hidden behind ";params" from a
// server that drops them: both are refused (400 model_outside_body), where
// they were weighed and priced as the body's cheap model and served as
// o1-pro. (Adversarial pass h6, 2026-12-03.)
func TestEnginesPathRefused(t *testing.T) {
	up, billed := enginesUpstream(t)
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
		"/engines/o1-pro/chat/completions",
		"/v1/engines/o1-pro/chat/completions",
		"/Engines/openai/o1-pro/chat/completions",
		"/v1/engines;v=1/o1-pro/completions",
		"/openai/deployments;x/o1-pro/chat/completions",
	} {
		if resp, b := h.do(p, body("gpt-4o-mini")); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "model_outside_body") {
			t.Errorf("POST %s: %d %.160s, want 400 model_outside_body", p, resp.StatusCode, b)
		}
	}
	if got := billed(); len(got) > 0 {
		t.Errorf("upstream billed %q", got)
	}
	if resp, b := h.do("/v1/chat/completions", body("gpt-4o-mini")); resp.StatusCode != http.StatusOK {
		t.Errorf("control: gpt-4o-mini on /v1/chat/completions: %d %.160s, want 200", resp.StatusCode, b)
	}
}

// A gateway upstream's routing field picks the model over the body's:
// Portkey's x-portkey-config can name other targets and models with
// fallbacks, and a request's own config takes precedence over the
// gateway's. A request that sends one is refused (400 model_outside_body)
// before the upstream sees it, in any case of the name; an empty one
// routes nothing and passes.
func TestGatewayRoutingHeaderRefused(t *testing.T) {
	up, billed := enginesUpstream(t)
	h := startWith(t, nil, up, `
limits:
  - {name: spend, scope: user, unit: usd, rate: 10, per: 24h, burst: 10}
`)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`
	for _, hdr := range [][2]string{
		{"x-portkey-config", `{"strategy":{"mode":"fallback"},"targets":[{"override_params":{"model":"o1-pro"}}]}`},
		{"X-Portkey-Config", "pc-abc123"},
		{"x-portkey-provider", "anthropic"},
		{"X-PORTKEY-VIRTUAL-KEY", "vk-other"},
		{"x-portkey-custom-host", "http://elsewhere"},
		{"x-portkey-azure-deployment-id", "o1-pro"},
		{"Helicone-Fallbacks", `[{"model":"o1-pro"}]`},
	} {
		if resp, b := h.do("/v1/chat/completions", body, hdr[0], hdr[1]); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "model_outside_body") {
			t.Errorf("%s: %d %.160s, want 400 model_outside_body", hdr[0], resp.StatusCode, b)
		}
	}
	// An empty field first, then one of the same name with a value.
	if resp, b := h.send("/v1/chat/completions", []byte(body), "x-portkey-config", "", "X-Portkey-Config", "pc-abc123"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "model_outside_body") {
		t.Errorf("an empty x-portkey-config then one with a value: %d %.160s, want 400 model_outside_body", resp.StatusCode, b)
	}
	if got := billed(); len(got) > 0 {
		t.Errorf("upstream billed %q", got)
	}
	if resp, b := h.do("/v1/chat/completions", body, "x-portkey-trace-id", "t1", "X-Portkey-Metadata", `{"a":"b"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("control: a tracing field: %d %.160s, want 200", resp.StatusCode, b)
	}
}
