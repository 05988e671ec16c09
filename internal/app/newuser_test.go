package app

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// Findings of a README-only new-user trial, each through a real socket on
// the embedded default config (what `llmguard serve` runs without
// --config), its upstreams pointed at a mock.

// devKey is the embedded default config's development key.
const devKey = "sk-llmguard-dev"

// startDefault runs llmguard on the embedded default config, its upstreams
// (the mock's usual 127.0.0.1:8081) replaced by a mock of the test's own.
func startDefault(t *testing.T) *harness {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	yaml := bytes.ReplaceAll(config.DefaultYAML, []byte("http://127.0.0.1:8081"), []byte(mock.URL))
	if bytes.Equal(yaml, config.DefaultYAML) {
		t.Fatal("the embedded default config no longer names http://127.0.0.1:8081: update startDefault")
	}
	cfg, err := config.Parse(yaml)
	if err != nil {
		t.Fatal(err)
	}
	return startParsed(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// raw POSTs body to path with the given headers (name, value pairs) and
// nothing else: no credential unless one is given.
func (h *harness) raw(path, body string, headers ...string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, string(b)
}

// An Azure client on the embedded default config (no azure upstream) gets
// 401 invalid_api_key, as the README says, whether its key is the dev key
// (sent in api-key, which only an azure upstream reads) or a wrong one:
// the caller is authenticated before its path is judged, so that a caller
// without a valid key learns nothing about routing. An authenticated
// caller still gets the path's refusal.
func TestAuthenticatedBeforePathRefusal(t *testing.T) {
	h := startDefault(t)
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	azurePath := "/openai/deployments/chat-prod/chat/completions?api-version=2024-10-21"
	for _, c := range []struct {
		name, path string
		headers    []string
		status     int
		code       string
	}{
		{"azure client, dev key in api-key", azurePath, []string{"api-key", devKey}, 401, "invalid_api_key"},
		{"azure client, wrong key", azurePath, []string{"api-key", "sk-wrong"}, 401, "invalid_api_key"},
		{"wrong bearer key, deployments path", azurePath, []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key"},
		{"wrong bearer key, model in the query", "/v1/chat/completions?model=o1-pro", []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key"},
		{"no key, engines path", "/v1/engines/o1-pro/chat/completions", nil, 401, "invalid_api_key"},
		{"wrong bearer key, odd path", "/v1/chat%2Fcompletions", []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key"},
		// Authenticated: the path's own refusal.
		{"dev key, deployments path", azurePath, []string{"Authorization", "Bearer " + devKey}, 400, "model_outside_body"},
		{"dev key, model in the query", "/v1/chat/completions?model=o1-pro", []string{"Authorization", "Bearer " + devKey}, 400, "model_outside_body"},
	} {
		resp, b := h.raw(c.path, chat, c.headers...)
		if resp.StatusCode != c.status || !strings.Contains(b, `"`+c.code+`"`) {
			t.Errorf("%s: POST %s: %d %.200s, want %d %s", c.name, c.path, resp.StatusCode, b, c.status, c.code)
		}
	}
}
