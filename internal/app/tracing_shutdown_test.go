package app

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// A collector that never answers costs the spans still queued at shutdown,
// and nothing else: App.Close waits its flush bound, logs a warning naming
// the collector, and returns no error, so that `serve` exits 0 on SIGTERM
// (it exited 1 with "app: tracing shutdown: context deadline exceeded",
// which a supervisor reads as a crash).
func TestTracingFlushFailureIsAWarning(t *testing.T) {
	release := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // holds every export until the test ends
	}))
	t.Cleanup(func() { close(release); collector.Close() })
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg := obsConfig(t, mock.URL, "tracing: {enabled: true, protocol: http, endpoint: "+collector.URL+"/v1/traces}\n")
	logs := &syncBuffer{}
	a, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h := serveApp(t, mock, a, nil)
	if resp, _ := h.post(obsKey, chatBody(false, 20)); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := h.app.Close(); err != nil {
		t.Errorf("Close with an unanswering collector: %v, want nil (only spans are lost)", err)
	}
	if l := logs.String(); !strings.Contains(l, "spans still queued at shutdown were not exported") || !strings.Contains(l, collector.URL) {
		t.Errorf("no warning naming the collector in:\n%s", l)
	}
}

// With tracing on, the OpenTelemetry SDK's errors (a failed export:
// "traces export: …") reach the app's log at WARN, so that --log-level
// warn shows a broken collector, and no more than one line per 30 s: three
// errors in a row make one line. (They went to the log package, which
// `serve` turns into INFO lines.)
func TestTracingExportErrorsAreWarnings(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(collector.Close)
	cfg := obsConfig(t, "http://127.0.0.1:1", "tracing: {enabled: true, protocol: http, endpoint: "+collector.URL+"/v1/traces}\n")
	logs := &syncBuffer{}
	a, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for range 3 {
		otel.Handle(errors.New("traces export: collector down"))
	}
	l := logs.String()
	if n := strings.Count(l, "traces export: collector down"); n != 1 || !strings.Contains(l, "level=WARN") || !strings.Contains(l, "suppressed=0") {
		t.Errorf("%d lines naming the export error, want 1 at WARN:\n%s", n, l)
	}
}
