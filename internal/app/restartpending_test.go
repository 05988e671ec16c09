package app

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// TestRestartPendingNamedByUsageAndReadyz: a reload that changes a section
// only a restart applies (here max_body_bytes; in trial10 the README's
// `nodes: 2` in store:) takes, and the node keeps serving the section it
// started with, so `llmguard usage --config` on the file gets 409. The 409
// names the sections and the restart, and /readyz lists them as
// restart_pending, instead of sending the operator to a reload error that
// /readyz does not have; a file put back as it started clears them.
func TestRestartPendingNamedByUsageAndReadyz(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	started := baseConfig(t, mock.URL, slowTPM)
	write := func(body string) string {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Fingerprint()
	}
	fp := write(started)
	h := startFile(t, mock, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	usage := func(fp string) (int, string) {
		t.Helper()
		resp, err := http.Get(h.admin + "/admin/usage?format=json&config_sha256=" + url.QueryEscape(fp))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := usage(fp); code != 200 {
		t.Fatalf("step 1 (as started): usage answered %d %s, want 200", code, body)
	}
	if p, ok := readyz(t, h.admin)["config"].(map[string]any)["restart_pending"]; ok {
		t.Errorf("step 1 (as started): /readyz restart_pending %v, want none", p)
	}

	edited := write(strings.Replace(started, "max_body_bytes: 65536", "max_body_bytes: 131072", 1))
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	code, body := usage(edited)
	if code != 409 || !strings.Contains(body, "changes max_body_bytes, which apply only at restart") || !strings.Contains(body, "restart it") {
		t.Errorf("step 2 (max_body_bytes edited, reloaded): usage answered %d %s, want 409 naming max_body_bytes and a restart", code, body)
	}
	if p := readyz(t, h.admin)["config"].(map[string]any)["restart_pending"]; p == nil || len(p.([]any)) != 1 || p.([]any)[0] != "max_body_bytes" {
		t.Errorf("step 2 (max_body_bytes edited, reloaded): /readyz restart_pending %v, want [max_body_bytes]", p)
	}

	write(started)
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	if code, body := usage(fp); code != 200 {
		t.Errorf("step 3 (file put back): usage answered %d %s, want 200", code, body)
	}
	if p, ok := readyz(t, h.admin)["config"].(map[string]any)["restart_pending"]; ok {
		t.Errorf("step 3 (file put back): /readyz restart_pending %v, want none", p)
	}
	if code, body := usage(edited); code != 409 || !strings.Contains(body, "another llmguard may be listening") || strings.Contains(body, "restart_pending") {
		t.Errorf("step 3 (file put back), another config named: usage answered %d %s, want 409 without restart_pending", code, body)
	}
}
