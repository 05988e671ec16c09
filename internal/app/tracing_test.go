package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/obs"
)

// tracedHarness is llmguard in front of the mock with cfg, its spans
// recorded in process.
func tracedHarness(t *testing.T, tail string) (*harness, *tracetest.SpanRecorder) {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg := obsConfig(t, mock.URL, tail)
	rec := tracetest.NewSpanRecorder()
	a, err := newAppWith(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), appHooks{spans: rec})
	if err != nil {
		t.Fatal(err)
	}
	return serveApp(t, mock, a, nil), rec
}

// traceOf waits (20 s at most) until the root span of request id has
// ended and returns it with every ended span of its trace.
func traceOf(t *testing.T, rec *tracetest.SpanRecorder, id string) (sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, s := range rec.Ended() {
			if s.Name() == "llmguard.request" && attr(s, "llmguard.request_id") == id {
				var tree []sdktrace.ReadOnlySpan
				for _, c := range rec.Ended() {
					if c.SpanContext().TraceID() == s.SpanContext().TraceID() {
						tree = append(tree, c)
					}
				}
				return s, tree
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ended root span for request %s (%d spans ended)", id, len(rec.Ended()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attr is span s's attribute key as a string ("" when absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// children are the names of root's direct children in tree, sorted by
// start.
func children(root sdktrace.ReadOnlySpan, tree []sdktrace.ReadOnlySpan) []string {
	var kids []sdktrace.ReadOnlySpan
	for _, s := range tree {
		if s.Parent().SpanID() == root.SpanContext().SpanID() {
			kids = append(kids, s)
		}
	}
	slices.SortFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	var names []string
	for _, s := range kids {
		names = append(names, s.Name())
	}
	return names
}

// noMarker fails when any attribute of any span holds the marker, prompt
// text or a key.
func noMarker(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			v := kv.Value.Emit()
			if strings.Contains(v, obsMarker) || strings.Contains(v, "say hi") || strings.Contains(v, "sk-") {
				t.Errorf("span %s attribute %s = %q leaks the prompt or a key", s.Name(), kv.Key, v)
			}
		}
	}
}

// TestTraceSpanTree: an allowed request is one trace — the root server
// span with weigh, take, upstream and settle children — continuing the
// caller's traceparent; the upstream receives a traceparent naming the
// upstream span; the root carries the access log's fields; nothing holds
// the prompt or a key.
func TestTraceSpanTree(t *testing.T) {
	h, rec := tracedHarness(t, "tracing: {enabled: true, endpoint: 127.0.0.1:1}\n")
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, stream := range []bool{false, true} {
		resp, text := h.post(obsKey, chatBody(stream, 20), "traceparent", caller, "tracestate", "vendor=opaque", "x-mock-completion-tokens", "4")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, text)
		}
		root, tree := traceOf(t, rec, resp.Header.Get("x-llmguard-request-id"))
		if got := root.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("stream %v: trace id %s, not the caller's", stream, got)
		}
		if root.Parent().SpanID().String() != "00f067aa0ba902b7" || !root.Parent().IsRemote() || root.SpanKind() != trace.SpanKindServer {
			t.Errorf("stream %v: root's parent %v remote %v kind %v", stream, root.Parent().SpanID(), root.Parent().IsRemote(), root.SpanKind())
		}
		if got, want := children(root, tree), []string{"llmguard.weigh", "llmguard.take", "llmguard.upstream", "llmguard.settle"}; !slices.Equal(got, want) {
			t.Errorf("stream %v: children %v, want %v", stream, got, want)
		}
		var up sdktrace.ReadOnlySpan
		for _, s := range tree {
			if s.Name() == "llmguard.upstream" {
				up = s
			}
		}
		hdr, _ := h.mock.LastRequest()
		want := "00-" + up.SpanContext().TraceID().String() + "-" + up.SpanContext().SpanID().String() + "-01"
		if got := string(hdr.Peek("traceparent")); got != want {
			t.Errorf("stream %v: upstream got traceparent %q, want the upstream span's %q", stream, got, want)
		}
		if got := string(hdr.Peek("tracestate")); got != "vendor=opaque" {
			t.Errorf("stream %v: upstream got tracestate %q", stream, got)
		}
		if up.SpanKind() != trace.SpanKindClient || attr(up, "http.response.status_code") != "200" || up.EndTime().After(root.EndTime()) {
			t.Errorf("stream %v: upstream span kind %v status %q", stream, up.SpanKind(), attr(up, "http.response.status_code"))
		}
		for _, f := range obs.Fields() {
			if !slices.ContainsFunc(root.Attributes(), func(kv attribute.KeyValue) bool { return string(kv.Key) == "llmguard."+f }) {
				t.Errorf("stream %v: root lacks llmguard.%s", stream, f)
			}
		}
		if attr(root, "llmguard.user") != "carol" || attr(root, "llmguard.outcome") != "allowed" || attr(root, "llmguard.output_tokens") != "4" ||
			attr(root, "llmguard.status") != "200" || attr(root, "llmguard.cost_micro_usd") == "0" {
			t.Errorf("stream %v: root attributes %v", stream, root.Attributes())
		}
		noMarker(t, tree)
	}
}

// A denial is a root with weigh and take only, its limit named; a 401 is a
// root alone. A request without a traceparent starts a trace of its own.
func TestTraceDenialAndUnauthorized(t *testing.T) {
	h, rec := tracedHarness(t, "tracing: {enabled: true, endpoint: 127.0.0.1:1}\n")
	h.post("sk-test-dave", chatBody(false, 60))
	resp, _ := h.post("sk-test-dave", chatBody(false, 60))
	if resp.StatusCode != 429 {
		t.Fatalf("second dave request: %d", resp.StatusCode)
	}
	root, tree := traceOf(t, rec, resp.Header.Get("x-llmguard-request-id"))
	if got := children(root, tree); !slices.Equal(got, []string{"llmguard.weigh", "llmguard.take"}) {
		t.Errorf("denial's children %v", got)
	}
	if attr(root, "llmguard.outcome") != "limited" || attr(root, "llmguard.limit") != "dave-tokens" || root.Parent().IsValid() {
		t.Errorf("denial root: parent %v attributes %v", root.Parent(), root.Attributes())
	}
	resp, _ = h.post("sk-unknown-"+obsMarker, chatBody(false, 20))
	root, tree = traceOf(t, rec, resp.Header.Get("x-llmguard-request-id"))
	if len(tree) != 1 || attr(root, "llmguard.outcome") != "unauthorized" || attr(root, "llmguard.status") != "401" {
		t.Errorf("401: %d spans, root attributes %v", len(tree), root.Attributes())
	}
	noMarker(t, rec.Ended())
}

// With tracing off (the default) no span is made, and the caller's
// traceparent reaches the upstream as it was sent.
func TestTraceOffMakesNoSpans(t *testing.T) {
	h, rec := tracedHarness(t, "")
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	resp, _ := h.post(obsKey, chatBody(false, 20), "traceparent", caller)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h.app.Close()
	if n := len(rec.Started()); n != 0 {
		t.Errorf("%d spans started with tracing off", n)
	}
	if hdr, _ := h.mock.LastRequest(); string(hdr.Peek("traceparent")) != caller {
		t.Errorf("upstream got traceparent %q, want the caller's", hdr.Peek("traceparent"))
	}
}

// With protocol http, the spans reach an OTLP/HTTP collector (a local fake
// decoding the protobuf POST) by App.Close at the latest.
func TestTraceOTLPHTTPExport(t *testing.T) {
	var mu sync.Mutex
	var names []string
	var gotHeader string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		var req collectortrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		gotHeader = r.Header.Get("x-collector-token")
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	defer collector.Close()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg := obsConfig(t, mock.URL, "tracing: {enabled: true, protocol: http, endpoint: "+collector.URL+"/v1/traces, headers: {x-collector-token: t0k}}\n")
	h := serveApp(t, mock, mustApp(t, cfg), nil)
	if resp, _ := h.post(obsKey, chatBody(false, 20)); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := h.app.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(names)
	want := []string{"llmguard.request", "llmguard.settle", "llmguard.take", "llmguard.upstream", "llmguard.weigh"}
	if !slices.Equal(names, want) || gotHeader != "t0k" {
		t.Errorf("collector got spans %v (header %q), want %v", names, gotHeader, want)
	}
}

// fakeGRPCCollector is an OTLP/gRPC trace service that keeps the names of
// the spans it receives.
type fakeGRPCCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *fakeGRPCCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.names = append(c.names, s.Name)
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// With the default protocol (grpc) and insecure, the spans reach an
// OTLP/gRPC collector on loopback by App.Close at the latest.
func TestTraceOTLPGRPCExport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	col := &fakeGRPCCollector{}
	collectortrace.RegisterTraceServiceServer(srv, col)
	go srv.Serve(ln)
	defer srv.Stop()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg := obsConfig(t, mock.URL, "tracing: {enabled: true, insecure: true, endpoint: "+ln.Addr().String()+"}\n")
	h := serveApp(t, mock, mustApp(t, cfg), nil)
	if resp, _ := h.post("sk-test-dave", chatBody(false, 20)); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := h.app.Close(); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	slices.Sort(col.names)
	if want := []string{"llmguard.request", "llmguard.settle", "llmguard.take", "llmguard.upstream", "llmguard.weigh"}; !slices.Equal(col.names, want) {
		t.Errorf("collector got spans %v, want %v", col.names, want)
	}
}
