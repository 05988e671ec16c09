package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/weigher"
)

// inFlight is how many slots the in-flight limit "one" holds for the rig's
// user.
func (r *panicRig) inFlight() int {
	r.t.Helper()
	pr, _ := r.pol.Identify("sk-panic")
	for _, rule := range r.pol.Match(nil, pr, "gpt-4o-mini", "/v1/chat/completions") {
		if rule.Name == "one" {
			return r.store.InFlight(rule.Key(pr))
		}
	}
	r.t.Fatal("no rule one")
	return 0
}

// waitFree waits (bounded: 10s) until the slot is given back; a stream's
// settles after its last byte, or once the proxy sees its client gone.
func (r *panicRig) waitFree(path string) {
	r.t.Helper()
	for i := 0; i < 1000 && r.inFlight() != 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := r.inFlight(); n != 0 {
		r.t.Fatalf("%s: %d slots still held, want the slot given back", path, n)
	}
}

// An in-flight limit of one request, through real sockets: the slot is
// held while a request is in flight (a second one is denied 429 with a
// short Retry-After naming the limit) and given back on every way out of
// the proxy: a normal end, an upstream error, a client that leaves
// mid-stream, a recovered panic (in the handler and in the stream relay),
// an upstream timeout.
func TestInFlightEveryExitPath(t *testing.T) {
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	const one = `  - {name: one, scope: user, unit: concurrent, max: 1}
`
	newOne := func(point string, timeout time.Duration) *panicRig {
		return newRig(t, rigOptions{mock: mock, url: mock.URL, w: w, point: point, limits: one, timeout: timeout})
	}

	t.Run("held while in flight; a second is denied", func(t *testing.T) {
		r := newOne("", 0)
		done := make(chan int, 1)
		go func() {
			st, _, _ := r.post(panicStreamBody, "x-mock-delay-ms", "100", "x-mock-completion-tokens", "20")
			done <- st
		}()
		for i := 0; i < 500 && r.inFlight() == 0; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		if r.inFlight() != 1 {
			t.Fatal("the first request holds no slot")
		}
		st, h, body, _ := r.do("/v1/chat/completions", panicBody)
		if st != 429 || h.Get("Retry-After") != "1" || h.Get("retry-after-ms") != "1000" || h.Get("x-llmguard-limit") != "one" ||
			!strings.Contains(body, "Concurrency limit reached for limit one") {
			t.Fatalf("second request: %d %v %s; want 429, Retry-After 1, the limit named", st, h, body)
		}
		if !strings.Contains(h.Get("RateLimit-Policy"), `"one";q=1;w=1;llmguard-unit="concurrent"`) {
			t.Errorf("RateLimit-Policy %q lacks the in-flight limit", h.Get("RateLimit-Policy"))
		}
		if st := <-done; st != 200 {
			t.Fatalf("first request: %d", st)
		}
		r.waitFree("normal end")
		if st, _, _ := r.post(panicBody); st != 200 {
			t.Fatalf("after the release: %d, want 200", st)
		}
		r.waitFree("normal end, again")
	})

	t.Run("upstream error", func(t *testing.T) {
		r := newOne("", 0)
		if st, body, _ := r.post(panicBody, "x-mock-status", "500"); st != 500 {
			t.Fatalf("status %d (%s), want the upstream's 500", st, body)
		}
		r.waitFree("upstream error")
	})

	t.Run("client leaves mid-stream", func(t *testing.T) {
		r := newOne("", 0)
		conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(panicStreamBody))
		req.Header.Set("Authorization", "Bearer sk-panic")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-mock-delay-ms", "100")
		req.Header.Set("x-mock-completion-tokens", "200")
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", resp, err)
		}
		for seen := 0; seen < 4; { // the stream has begun, output streamed (charged as counted, not refunded)
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, `"content":"`) {
				seen++
			}
		}
		if r.inFlight() != 1 {
			t.Fatal("a running stream holds no slot")
		}
		conn.Close()
		r.waitFree("client gone")
	})

	t.Run("panic in the handler after the take", func(t *testing.T) {
		r := newOne(pointForward, 0)
		r.armed.Store(true)
		st, _, _ := r.post(panicBody)
		r.armed.Store(false)
		if st != 500 {
			t.Fatalf("status %d, want 500", st)
		}
		r.waitFree("panic in the handler")
	})

	t.Run("panic in the stream relay", func(t *testing.T) {
		r := newOne(pointStream, 0)
		r.armed.Store(true)
		r.post(panicStreamBody, "x-mock-delay-ms", "20")
		r.armed.Store(false)
		r.waitFree("panic in the stream")
	})

	t.Run("upstream timeout", func(t *testing.T) {
		// The upstream sends its headers and a first event at once, then
		// neither writes nor closes: only the timeout can end the stream,
		// whenever it fires. The timeout bounds the one step that is not
		// driven (the headers reaching llmguard from a loopback socket);
		// when a loaded machine lets the deadline pass first (a 502, an
		// exit whose slot must come back too), the call is made again
		// with twice the timeout, so that the stream cut mid-way is
		// always the path checked.
		event := `data: {"choices":[{"index":0,"delta":{"content":"hello"}}]}` + "\n\n"
		up := startScriptedUpstream(t, false, scriptStep{write: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n", len(event), event)}) // one chunk, not the last
		for timeout := 500 * time.Millisecond; ; timeout *= 2 {
			r := newRig(t, rigOptions{url: up, w: w, limits: one, timeout: timeout})
			st, body, _ := r.post(panicStreamBody)
			r.waitFree("upstream timeout")
			if st == 502 && timeout < time.Minute {
				t.Logf("the %v timeout passed before the answer's headers: again with twice that", timeout)
				continue
			}
			if st != 200 || !strings.Contains(body, `"content":"hello"`) || strings.Contains(body, "[DONE]") {
				t.Errorf("want a stream cut by the timeout before its end, got %d %q", st, body)
			}
			if log := r.log.String(); !strings.Contains(log, "upstream stream ended with an error") || !strings.Contains(log, "timeout") {
				t.Errorf("the stream did not end by the upstream timeout; log:\n%s", log)
			}
			return
		}
	})
}

// A shadow limit through real sockets: requests it would deny are served,
// with x-llmguard-shadow marking it would-deny; the real limits' headers
// never list it.
func TestShadowLimitHeaders(t *testing.T) {
	w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	r := newRig(t, rigOptions{mock: mock, url: mock.URL, w: w, limits: `  - {name: new-rpm, scope: user, unit: requests, rate: 1, per: 1h, burst: 2, shadow: true}
`})
	want := []string{`"new-rpm";r=1;t=3600`, `"new-rpm";r=0;t=7200`, `"new-rpm";r=0;t=7200;would-deny`, `"new-rpm";r=0;t=7200;would-deny`}
	for i, w := range want {
		st, h, body, _ := r.do("/v1/chat/completions", panicBody)
		if st != 200 {
			t.Fatalf("request %d: %d %s: a shadow limit denied", i+1, st, body)
		}
		if got := h.Get("x-llmguard-shadow"); got != w {
			t.Errorf("request %d: x-llmguard-shadow %q, want %q", i+1, got, w)
		}
		if strings.Contains(h.Get("RateLimit-Policy"), "new-rpm") || h.Get("x-ratelimit-limit-requests") != "" {
			t.Errorf("request %d: the real limits' headers list the shadow limit: %v", i+1, h)
		}
	}
	if got := testutilCount(t, r, `llmguard_shadow_decisions_total`, "would_deny"); got != 2 {
		t.Errorf("shadow_decisions_total{decision=would_deny} = %v, want 2", got)
	}
}

// testutilCount is the value of family's series whose decision label is
// decision.
func testutilCount(t *testing.T, r *panicRig, family, decision string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "decision" && l.GetValue() == decision {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
