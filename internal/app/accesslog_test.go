package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/obs"
)

// obsMarker is a string that appears in prompts and keys sent by the
// observability tests, and must appear in no log line or span attribute.
const obsMarker = "ZQX7MARKERQZX"

// obsKey is a valid virtual key holding the marker.
const obsKey = "sk-" + obsMarker + "-carol"

// obsConfig is a config in front of upstreamURL with a key holding the
// marker (user carol, tenant acme), a second upstream under /dead that
// nothing listens on, a token limit that admits about one
// small request per minute for user dave, and tail appended.
func obsConfig(t *testing.T, upstreamURL, tail string) *config.Config {
	t.Helper()
	t.Setenv("LLMGUARD_TEST_UPSTREAM_KEY", "sk-upstream-"+obsMarker)
	cfg, err := config.Parse(fmt.Appendf(nil, `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: mock, flavor: openai, base_url: %q, api_key_env: LLMGUARD_TEST_UPSTREAM_KEY}
  - {name: dead, flavor: openai, base_url: "http://127.0.0.1:1", path_prefix: /dead, no_key: true}
keys:
  - {key: %q, user: carol, tenant: acme}
  - {key: sk-test-dave, user: dave, tenant: acme}
models:
  gpt-4o-mini: {encoding: o200k_base, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60, default_max_output_tokens: 64}
limits:
  - {name: dave-tokens, scope: user, users: [dave], unit: tokens, rate: 100, per: 1h}
%s`, upstreamURL, obsKey, tail))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// chatBody is a chat request whose prompt holds the marker.
func chatBody(stream bool, maxTokens int) string {
	s := ""
	if stream {
		s = `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say hi %s"}],"max_tokens":%d%s}`, obsMarker, maxTokens, s)
}

// readLines polls path until it holds at least n lines (or 20 s pass) and
// returns them, each decoded.
func readLines(t *testing.T, path string, n int) ([]map[string]any, string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		text := string(b)
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if text != "" && len(lines) >= n || time.Now().After(deadline) {
			var out []map[string]any
			for _, l := range lines {
				if l == "" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("access log line is not JSON: %v\n%s", err, l)
				}
				out = append(out, m)
			}
			if len(out) < n {
				t.Fatalf("access log has %d lines, want %d:\n%s", len(out), n, text)
			}
			return out, text
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// byID indexes access-log lines by request id.
func byID(t *testing.T, lines []map[string]any) map[string]map[string]any {
	t.Helper()
	m := map[string]map[string]any{}
	for _, l := range lines {
		id, _ := l["request_id"].(string)
		if _, dup := m[id]; dup {
			t.Errorf("request %q logged twice", id)
		}
		m[id] = l
	}
	return m
}

// rawExchange writes raw to the proxy over TCP and returns what came back
// until the server closed or 10 s passed.
func rawExchange(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestAccessLogLinePerRequest sends one request down every path — allowed
// (buffered and streamed), denied by a limit, unauthenticated, malformed,
// an upstream error, and a client that leaves mid-stream — and reads the
// access log file: one line each, written once settled, every field
// present with the right values, and the marker held by the prompts and
// the keys nowhere.
func TestAccessLogLinePerRequest(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := obsConfig(t, mock.URL, "access_log: {enabled: true, output: "+path+"}\n")
	h := serveApp(t, mock, mustApp(t, cfg), nil)
	ids := map[string]string{} // case → request id
	send := func(name, key, body string, want int, headers ...string) {
		t.Helper()
		resp, text := h.post(key, body, headers...)
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d: %s", name, resp.StatusCode, want, text)
		}
		ids[name] = resp.Header.Get("x-llmguard-request-id")
	}
	send("allowed", obsKey, chatBody(false, 20), 200, "x-mock-completion-tokens", "7")
	send("stream", obsKey, chatBody(true, 20), 200, "x-mock-completion-tokens", "5")
	send("dave-1", "sk-test-dave", chatBody(false, 60), 200)
	send("denied", "sk-test-dave", chatBody(false, 60), 429)
	send("unauthorized", "sk-unknown-"+obsMarker, chatBody(false, 20), 401)
	send("upstream-error", obsKey, chatBody(false, 20), 500, "x-mock-status", "500")
	h.url += "/dead"
	send("unreachable", obsKey, chatBody(false, 20), 502)
	h.url = strings.TrimSuffix(h.url, "/dead")

	// A client that leaves mid-stream: the line comes once the stream is
	// settled, marked client_gone.
	addr := strings.TrimPrefix(h.url, "http://")
	body := chatBody(true, 200)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"x-mock-completion-tokens: 200\r\nx-mock-delay-ms: 50\r\nContent-Length: %d\r\n\r\n%s", obsKey, len(body), body)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	ids["gone"] = resp.Header.Get("x-llmguard-request-id")
	c.Close()

	// A malformed request: fasthttp's error handler answers 400.
	out := rawExchange(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 400") {
		t.Fatalf("malformed request answered %q", out)
	}
	i := strings.Index(out, "X-Llmguard-Request-Id: ")
	if i < 0 {
		i = strings.Index(strings.ToLower(out), "x-llmguard-request-id: ")
	}
	ids["malformed"] = strings.TrimSpace(strings.SplitN(out[i+len("x-llmguard-request-id: "):], "\r\n", 2)[0])

	lines, text := readLines(t, path, len(ids))
	got := byID(t, lines)
	if len(lines) != len(ids) {
		t.Errorf("%d lines for %d requests:\n%s", len(lines), len(ids), text)
	}
	for _, l := range lines {
		for _, f := range obs.Fields() {
			if _, ok := l[f]; !ok {
				t.Errorf("line %v lacks field %s", l["request_id"], f)
			}
		}
		if l["msg"] != "access" {
			t.Errorf("msg %v", l["msg"])
		}
	}
	if strings.Contains(text, obsMarker) || strings.Contains(text, "sk-upstream") || strings.Contains(text, "say hi") {
		t.Errorf("the access log leaks prompt text or a key:\n%s", text)
	}
	type want struct {
		status                        float64
		outcome, user, limit          string
		input, output, cost, estimate bool // non-zero
		clientGone                    bool
	}
	for name, w := range map[string]want{
		"allowed":        {status: 200, outcome: "allowed", user: "carol", input: true, output: true, cost: true, estimate: true},
		"stream":         {status: 200, outcome: "allowed", user: "carol", input: true, output: true, cost: true, estimate: true},
		"denied":         {status: 429, outcome: "limited", user: "dave", limit: "dave-tokens", estimate: true},
		"unauthorized":   {status: 401, outcome: "unauthorized"},
		"upstream-error": {status: 500, outcome: "upstream_error", user: "carol", estimate: true},
		"unreachable":    {status: 502, outcome: "upstream_error", user: "carol", estimate: true},
		"gone":           {status: 200, outcome: "allowed", user: "carol", input: true, output: true, cost: true, estimate: true, clientGone: true},
		"malformed":      {status: 400, outcome: "invalid"},
	} {
		l := got[ids[name]]
		if l == nil {
			t.Errorf("%s (%s): no line", name, ids[name])
			continue
		}
		nz := func(f string) bool { v, _ := l[f].(float64); return v != 0 }
		if l["status"] != w.status || l["outcome"] != w.outcome || l["user"] != w.user || l["limit"] != w.limit ||
			nz("input_tokens") != w.input || nz("output_tokens") != w.output || nz("cost_micro_usd") != w.cost ||
			nz("estimated_input_tokens") != w.estimate || l["client_gone"] != w.clientGone {
			t.Errorf("%s: line %v, want %+v", name, l, w)
		}
		if w.user != "" && (l["tenant"] != "acme" || len(l["key_id"].(string)) == 0 || l["flavor"] != "openai" || l["model"] != "gpt-4o-mini" || l["kind"] != "chat") {
			t.Errorf("%s: identity fields %v", name, l)
		}
	}
	if l := got[ids["allowed"]]; l != nil && (l["output_tokens"] != float64(7) || l["estimated_output_tokens"] != float64(20) ||
		!(l["upstream_us"].(float64) > 0) || !(l["duration_us"].(float64) >= l["upstream_us"].(float64))) {
		t.Errorf("allowed: usage or timings %v", l)
	}
	if l := got[ids["stream"]]; l != nil && l["output_tokens"] != float64(5) {
		t.Errorf("stream: output tokens %v", l["output_tokens"])
	}
}

// mustApp builds an App from cfg with a silent logger.
func mustApp(t *testing.T, cfg *config.Config) *App {
	t.Helper()
	a, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// With sample_allowed: 0 no allowed request is logged, and denials still
// are; text format writes key=value lines.
func TestAccessLogSamplesAllowedOnly(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := obsConfig(t, mock.URL, "access_log: {enabled: true, format: text, sample_allowed: 0, output: "+path+"}\n")
	h := serveApp(t, mock, mustApp(t, cfg), nil)
	for range 5 {
		if resp, text := h.post(obsKey, chatBody(false, 20)); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, text)
		}
	}
	h.post("sk-test-dave", chatBody(false, 60))
	resp, _ := h.post("sk-test-dave", chatBody(false, 60))
	if resp.StatusCode != 429 {
		t.Fatalf("second dave request: %d", resp.StatusCode)
	}
	denied := resp.Header.Get("x-llmguard-request-id")
	h.post("sk-nobody", chatBody(false, 20))
	h.app.Close() // every request is settled: the file is complete
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var outcomes []string
	for _, l := range lines {
		for _, kv := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(kv, "outcome="); ok {
				outcomes = append(outcomes, v)
			}
		}
	}
	slices.Sort(outcomes)
	if !slices.Equal(outcomes, []string{"limited", "unauthorized"}) || !strings.Contains(string(b), "request_id="+denied) {
		t.Errorf("outcomes logged %v, want the denial and the 401 only:\n%s", outcomes, b)
	}
}
