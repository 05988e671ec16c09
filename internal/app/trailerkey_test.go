package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// keyRecorder is an Anthropic-compatible upstream that records the
// x-api-key fields of each request it serves (every value, in order).
func keyRecorder(t *testing.T) (string, func() [][]string) {
	t.Helper()
	var mu sync.Mutex
	var seen [][]string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, append([]string(nil), r.Header.Values("X-Api-Key")...))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":8,"output_tokens":1}}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), func() [][]string { mu.Lock(); defer mu.Unlock(); return append([][]string(nil), seen...) }
}

// A pass-through caller is limited by the key that identified it; a
// trailer field of its chunked body, read after it was identified, must
// not put another key in front of the upstream. fasthttp merges trailer
// fields into the request header (refusing Authorization there, but not
// x-api-key), and the forwarded key was read from the header again after
// the body: a caller identified (and limited) as a fresh made-up key had
// its calls billed to another key, whose own limit they escaped.
// (Adversarial pass h6, 2026-12-03.)
func TestPassThroughTrailerKeyNotForwarded(t *testing.T) {
	up, seen := keyRecorder(t)
	h := startConfig(t, nil, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: claude, flavor: anthropic, base_url: %s, no_key: true}
identity: {pass_through: true, tenant: byok, plan: byok}
limits:
  - {name: key-tpm, scope: key, unit: tokens, rate: 1, per: 24h, burst: 100000}
`, up))
	body := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	send := func(head, trailer string) string {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: sk-ant-caller-A\r\nanthropic-version: 2023-06-01\r\n"+
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n%s\r\n%x\r\n%s\r\n0\r\n%s\r\n",
			head, len(body), body, trailer)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.Status
	}
	cases := []struct{ name, head, trailer string }{
		{name: "no trailer"},
		{name: "unannounced trailer", trailer: "x-api-key: sk-ant-other-B\r\n"},
		{name: "announced trailer", head: "Trailer: x-api-key\r\n", trailer: "X-Api-Key: sk-ant-other-B\r\n"},
	}
	for i, tc := range cases {
		st := send(tc.head, tc.trailer)
		got := seen()
		if len(got) != i+1 {
			t.Fatalf("%s: %s, upstream served %d requests, want %d", tc.name, st, len(got), i+1)
		}
		if k := got[i]; len(k) != 1 || k[0] != "sk-ant-caller-A" {
			t.Errorf("%s: upstream got x-api-key %q, want only the key that identified the caller", tc.name, k)
		}
	}
}

// A gateway routing field (x-portkey-config) in a chunked body's trailer,
// which arrives after checkPath judged the headers, is never forwarded:
// the upstream would serve and bill the model it names.
func TestRoutingTrailerNotForwarded(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Portkey-Config")+r.Trailer.Get("X-Portkey-Config"), r.Header.Get("X-Trace")+r.Trailer.Get("X-Trace"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h := startConfig(t, nil, fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - {name: gw, flavor: openai, base_url: http://%s, no_key: true}
keys: [{key: %s, user: alice, tenant: acme}]
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 100000}
`, ln.Addr(), testKey))
	body := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\nX-Portkey-Config: {\"override_params\":{\"model\":\"o1-pro\"}}\r\nX-Trace: t1\r\n\r\n",
		testKey, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("status %s, upstream served %d requests, want 1", resp.Status, len(seen)/2)
	}
	if seen[0] != "" {
		t.Errorf("upstream got x-portkey-config %q from the trailer", seen[0])
	}
	if seen[1] != "t1" { // the control: the same trailer's other field goes through
		t.Errorf("upstream got x-trace %q from the trailer, want t1: trailer fields do not reach the upstream, so the check above proves nothing", seen[1])
	}
}
