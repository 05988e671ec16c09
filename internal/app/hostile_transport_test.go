package app

// Hostile transports, over real sockets: callers without a key sending huge
// bodies, bodies beyond the in-flight budget, a client that stops reading a
// stream, upstreams that drop idle keep-alive connections or restart.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
	"github.com/llmguard/llmguard/ledger"
)

// transportYAML is the harness's config with top-level keys top, keys of
// the one upstream (each line indented by four spaces) and tail.
func transportYAML(upstreamURL, top, upstream, tail string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
%s
upstreams:
  - name: mock
    flavor: openai
    base_url: %s
    api_key_env: LLMGUARD_TEST_UPSTREAM_KEY
%s
keys:
  - key: %s
    user: alice
    tenant: acme
    plan: free
models:
  gpt-4o-mini:
    encoding: o200k_base
    input_usd_per_mtok: 0.15
    cached_input_usd_per_mtok: 0.075
    output_usd_per_mtok: 0.60
    default_max_output_tokens: 256
%s`, top, upstreamURL, upstream, testKey, tail)
}

// startTransport runs llmguard on yaml; wrap, when not nil, wraps the
// proxy listener (to shape the sockets it accepts).
func startTransport(t *testing.T, mock *mockllm.Server, yaml string, wrap func(net.Listener) net.Listener) *harness {
	t.Helper()
	t.Setenv("LLMGUARD_TEST_UPSTREAM_KEY", "sk-upstream")
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	a, err := newApp(cfg, discardLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return serveApp(t, mock, a, wrap)
}

func startMock(t *testing.T) *mockllm.Server {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	return mock
}

// rawResult is what a raw-socket caller got.
type rawResult struct {
	status     int
	retryAfter string
	errType    string // error.type of an OpenAI-shaped error body
	errCode    string // error.code
	err        error
}

// rawBodyPost sends a chat request over its own connection: the headers, then
// the body from body (chunked when chunked is true, else with
// Content-Length length), while reading the answer.
func rawBodyPost(addr, key string, length int, chunked bool, body io.Reader) rawResult {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return rawResult{err: err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute)) // a hang fails the caller, not the run
	var hdr strings.Builder
	hdr.WriteString("POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nContent-Type: application/json\r\n")
	if key != "" {
		hdr.WriteString("Authorization: Bearer " + key + "\r\n")
	}
	if chunked {
		hdr.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	} else {
		fmt.Fprintf(&hdr, "Content-Length: %d\r\n\r\n", length)
	}
	if _, err := io.WriteString(c, hdr.String()); err != nil {
		return rawResult{err: err}
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		buf, head, crlf := make([]byte, 32<<10), make([]byte, 0, 16), []byte("\r\n")
		for {
			n, rerr := body.Read(buf)
			if n > 0 {
				// Written without allocating: the test measures llmguard's
				// allocations in the same process.
				var err error
				if chunked {
					_, err = c.Write(strconv.AppendInt(head[:0], int64(n), 16))
					if err == nil {
						_, err = c.Write(crlf)
					}
				}
				if err == nil {
					_, err = c.Write(buf[:n])
				}
				if err == nil && chunked {
					_, err = c.Write(crlf)
				}
				if err != nil {
					return // the server closed the connection: expected on a refusal
				}
			}
			if rerr != nil {
				if chunked {
					io.WriteString(c, "0\r\n\r\n")
				}
				return
			}
		}
	}()
	r := readAnswer(bufio.NewReader(c))
	c.Close() // stops the writer if the server did not read the body
	<-wrote
	return r
}

// readAnswer reads one response and its OpenAI-shaped error, if any.
func readAnswer(br *bufio.Reader) rawResult {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return rawResult{err: err}
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := rawResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), err: err}
	var e struct {
		Error struct{ Type, Code string }
	}
	if json.Unmarshal(b, &e) == nil {
		r.errType, r.errCode = e.Error.Type, e.Error.Code
	}
	return r
}

// spaces is an endless reader of blanks: JSON whitespace, which weighs
// nothing.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// paddedChat is hiBody padded with blanks to n bytes: a valid request that
// weighs what hiBody weighs.
func paddedChat(n int) []byte {
	head := strings.TrimSuffix(hiBody, "}")
	return append(append([]byte(head), bytes.Repeat([]byte(" "), n-len(head)-1)...), '}')
}

// memSampler records the highest HeapInuse seen until stop.
type memSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func sampleMem() *memSampler {
	s := &memSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > s.peak.Load() {
				s.peak.Store(m.HeapInuse)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *memSampler) end() uint64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// Item 3: callers without a valid key, each sending an 8 MB body (within
// max_body_bytes), get 401 without llmguard reading or holding their
// bodies: memory stays near its baseline, nothing reaches the upstream,
// nothing is charged.
func TestUnauthenticatedHugeBodiesCostNothing(t *testing.T) {
	mock := startMock(t)
	h := startTransport(t, mock, transportYAML(mock.URL, "max_body_bytes: 16777216", "", slowTPM), nil)
	addr := strings.TrimPrefix(h.url, "http://")
	const callers, size = 40, 8 << 20

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	s := sampleMem()
	results := make([]rawResult, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			key := ""
			if i%2 == 1 {
				key = "sk-not-a-key"
			}
			// One caller in four sends its body chunked, so its size is
			// known only by reading it.
			results[i] = rawBodyPost(addr, key, size, i%4 == 3, io.LimitReader(spaces{}, size))
		})
	}
	wg.Wait()
	peak := s.end()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	for i, r := range results {
		if r.err != nil || r.status != http.StatusUnauthorized || r.errCode != "invalid_api_key" {
			t.Errorf("caller %d: status %d code %q err %v, want 401 invalid_api_key", i, r.status, r.errCode, r.err)
		}
	}
	// Holding the bodies would take 40 × 8 MiB = 320 MiB; reading them at
	// all would allocate as much.
	allocated := after.TotalAlloc - base.TotalAlloc
	grew := int64(peak) - int64(base.HeapInuse)
	t.Logf("baseline HeapInuse %d MiB, peak %+d MiB, allocated %d MiB during the burst", base.HeapInuse>>20, grew>>20, allocated>>20)
	if allocated > 32<<20 {
		t.Errorf("%d MiB allocated while refusing %d unauthenticated bodies: their bytes were read", allocated>>20, callers)
	}
	if grew > 64<<20 {
		t.Errorf("HeapInuse grew %d MiB over its baseline: unauthenticated bodies were held", grew>>20)
	}
	if n := mock.Requests.Load(); n != 0 {
		t.Errorf("%d unauthenticated requests reached the upstream", n)
	}
	if got := h.scrape()["llmguard_requests_total"].sum(map[string]string{"outcome": "unauthorized"}); got != callers {
		t.Errorf("requests_total{outcome=unauthorized} = %v, want %d", got, callers)
	}
	// Alive, and nothing was charged: the bucket is full.
	resp, body := h.post(testKey, hiBody)
	if resp.StatusCode != 200 {
		t.Fatalf("after the burst: %d %s", resp.StatusCode, body)
	}
	if r := remainingTokens(t, resp.Header); r != 10000-(hiInput+100) {
		t.Errorf("remaining %d after the burst, want %d: something was charged", r, 10000-(hiInput+100))
	}
}

// bodyBytesInFlight is the llmguard_request_body_bytes_in_flight gauge.
func (h *harness) bodyBytesInFlight() float64 {
	return h.scrape()["llmguard_request_body_bytes_in_flight"].sum(nil)
}

// waitFor polls cond every 10 ms, at most for limit; it reports whether
// cond held.
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// Item 3: the request-body bytes held at once stay within
// max_inflight_body_bytes. A request that cannot get its bytes is refused
// at once with 503 and Retry-After (by Content-Length, or as a chunked body
// grows); the request already holding bytes is never starved; bodies over
// max_body_bytes get 413, chunked ones included; refused requests reach
// no upstream and cost nothing.
func TestBodyBudgetRefusesWithoutWaiting(t *testing.T) {
	mock := startMock(t)
	h := startTransport(t, mock, transportYAML(mock.URL, "max_body_bytes: 1048576\nmax_inflight_body_bytes: 1048576", "", slowTPM), nil)
	addr := strings.TrimPrefix(h.url, "http://")
	const size = 700_000

	// A declares 700 kB and sends half: llmguard holds 700 kB for it.
	body := paddedChat(size)
	pr, pw := io.Pipe()
	aDone := make(chan rawResult, 1)
	go func() { aDone <- rawBodyPost(addr, testKey, size, false, pr) }()
	if _, err := pw.Write(body[:size/2]); err != nil {
		t.Fatal(err)
	}
	if !waitFor(20*time.Second, func() bool { return h.bodyBytesInFlight() == size }) {
		t.Fatalf("request A does not hold its %d bytes: gauge %v", size, h.bodyBytesInFlight())
	}

	// B declares as much: no room, 503 at once.
	b := rawBodyPost(addr, testKey, size, false, bytes.NewReader(paddedChat(size)))
	if b.err != nil || b.status != http.StatusServiceUnavailable || b.retryAfter != "1" || b.errCode != "server_overloaded" || b.errType != "api_error" {
		t.Errorf("B: status %d Retry-After %q type %q code %q err %v; want 503, 1, api_error, server_overloaded", b.status, b.retryAfter, b.errType, b.errCode, b.err)
	}
	// C is chunked: refused as it grows past the room left.
	c := rawBodyPost(addr, testKey, 0, true, bytes.NewReader(paddedChat(size)))
	if c.err != nil || c.status != http.StatusServiceUnavailable || c.retryAfter != "1" {
		t.Errorf("C (chunked): status %d Retry-After %q err %v; want 503 with Retry-After 1", c.status, c.retryAfter, c.err)
	}
	if got := h.bodyBytesInFlight(); got != size {
		t.Errorf("refused requests left bytes held: gauge %v, want A's %d", got, size)
	}

	// A is not starved: it finishes and is served.
	if _, err := pw.Write(body[size/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if a := <-aDone; a.err != nil || a.status != 200 {
		t.Fatalf("A: status %d err %v", a.status, a.err)
	}
	if !waitFor(10*time.Second, func() bool { return h.bodyBytesInFlight() == 0 }) {
		t.Errorf("bytes still held after A: %v", h.bodyBytesInFlight())
	}

	// A chunked body over max_body_bytes: 413 in OpenAI's shape.
	over := rawBodyPost(addr, testKey, 0, true, io.MultiReader(bytes.NewReader(paddedChat(1<<20)), strings.NewReader(" ")))
	if over.err != nil || over.status != http.StatusRequestEntityTooLarge || over.errCode != "request_too_large" {
		t.Errorf("chunked body over the limit: status %d code %q err %v", over.status, over.errCode, over.err)
	}
	// The whole budget is free again: a body of exactly max_body_bytes
	// (= max_inflight_body_bytes) is read and served.
	full := rawBodyPost(addr, testKey, 1<<20, false, bytes.NewReader(paddedChat(1<<20)))
	if full.err != nil || full.status != 200 {
		t.Errorf("body of the whole budget: status %d err %v", full.status, full.err)
	}

	if n := mock.Requests.Load(); n != 2 {
		t.Errorf("%d requests reached the upstream, want 2 (A and the full one)", n)
	}
	if got := h.scrape()["llmguard_requests_total"].sum(map[string]string{"outcome": "overloaded"}); got != 2 {
		t.Errorf("requests_total{outcome=overloaded} = %v, want 2", got)
	}
	// Charged: A and the full one, input + 16 streamed words each (the
	// mock's default answer); the refused ones nothing.
	resp, _ := h.post(testKey, hiBody)
	if want := int64(10000 - 2*(hiInput+16) - (hiInput + 100)); remainingTokens(t, resp.Header) != want {
		t.Errorf("remaining %d, want %d", remainingTokens(t, resp.Header), want)
	}
}

// smallSendBuffer wraps a listener so that each accepted socket has a
// small send buffer, and a stalled client fills it within a few kB instead
// of the megabytes loopback autotuning allows.
func smallSendBuffer(ln net.Listener) net.Listener { return sndbufListener{ln} }

type sndbufListener struct{ net.Listener }

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// Item 4: a client that opens a stream and stops reading is disconnected
// after client_write_timeout, its upstream request is cancelled (the one
// upstream connection allowed is free again), and it is charged what was
// streamed, as a client that leaves is.
func TestSlowReaderIsCut(t *testing.T) {
	mock := startMock(t)
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := startTransport(t, mock, transportYAML(mock.URL, "client_write_timeout: 300ms", "    max_conns: 1",
		slowTPM+fmt.Sprintf("ledger: {file: %q}\n", file)), smallSendBuffer)
	addr := strings.TrimPrefix(h.url, "http://")

	// A client with a small receive buffer.
	c := dialSmallReceiveBuffer(t, addr)
	const words = 5000 // 5000 × 2 ms: ten seconds of stream, unless cut
	req := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":6000,"stream":true}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"x-mock-completion-tokens: %d\r\nx-mock-delay-ms: 2\r\nContent-Length: %d\r\n\r\n%s", testKey, words, len(req), req)
	br := bufio.NewReaderSize(c, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	// Read three events (the role chunk and two words), then stop reading.
	const seenWords = 2
	for seen := 0; seen < 1+seenWords; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			seen++
		}
	}

	// The upstream stream is cancelled, not completed.
	if !waitFor(60*time.Second, func() bool { return mock.StreamsAborted.Load() > 0 || mock.StreamsCompleted.Load() > 0 }) {
		t.Fatal("the upstream stream neither ended nor was cancelled")
	}
	if a, done := mock.StreamsAborted.Load(), mock.StreamsCompleted.Load(); a != 1 || done != 0 {
		t.Fatalf("upstream streams: aborted %d completed %d, want the stream cancelled", a, done)
	}
	// The client was disconnected: what is left to read ends.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil && isTimeout(err) {
		t.Error("the stalled client's connection is still open")
	}

	// Settled (the stream's input is counted once it is), and the one
	// upstream connection is free: another request is served.
	if !waitFor(30*time.Second, func() bool {
		return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"}) == hiInput
	}) {
		t.Fatal("the cut stream was not settled")
	}
	resp2, body := h.post(testKey, hiBody)
	if resp2.StatusCode != 200 {
		t.Fatalf("next request: %d %s", resp2.StatusCode, body)
	}
	// Charged the input and the output reservation, not the words the
	// client read: the upstream bills what it generated before the cut,
	// which the client never saw (a reasoning model's reasoning above all);
	// the ledger and the bucket agree.
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d ledger records, want 2", len(recs))
	}
	cut := recs[0]
	if cut.Status != 200 || cut.InputTokens != hiInput || cut.OutputTokens != cut.Reserved-hiInput || cut.OutputTokens < words {
		t.Errorf("cut stream recorded as %+v: want input %d and the output reservation %d", cut, hiInput, cut.Reserved-hiInput)
	}
	charged := 10000 - (hiInput + 100) - remainingTokens(t, resp2.Header)
	if charged != cut.InputTokens+cut.OutputTokens {
		t.Errorf("bucket charged %d, ledger says %d + %d", charged, cut.InputTokens, cut.OutputTokens)
	}
	t.Logf("client read %d words; charged %d input + %d output tokens", seenWords, cut.InputTokens, cut.OutputTokens)
}

// Item 4, buffered answers: a client that stops reading a large
// non-streamed answer is disconnected after client_write_timeout too, and
// the proxy goes on serving.
func TestSlowReaderOfABufferedAnswerIsCut(t *testing.T) {
	mock := startMock(t)
	h := startTransport(t, mock, transportYAML(mock.URL, "client_write_timeout: 300ms", "    max_conns: 1", ""), smallSendBuffer)
	c := dialSmallReceiveBuffer(t, strings.TrimPrefix(h.url, "http://"))
	const words = 20000 // about 120 kB of answer, far beyond both socket buffers
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"x-mock-completion-tokens: %d\r\nContent-Length: %d\r\n\r\n%s", testKey, words, len(hiBody), hiBody)
	// Read nothing for a while: the answer fills the buffers and the write
	// waits past its deadline.
	if !waitFor(60*time.Second, func() bool { return mock.Requests.Load() == 1 }) {
		t.Fatal("the request did not reach the upstream")
	}
	time.Sleep(time.Second) // the stall: past 300 ms
	// The answer breaks off: the connection was closed mid-body.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
	}
	switch {
	case err == nil:
		t.Fatal("the stalled client read the whole answer: not cut")
	case isTimeout(err):
		t.Fatal("the stalled client's connection is still open")
	}
	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
		t.Fatalf("next request: %d %s", resp.StatusCode, body)
	}
}

// dialSmallReceiveBuffer connects to addr with a 4 KiB receive buffer, set
// before connecting so that the window stays small.
func dialSmallReceiveBuffer(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// chatAnswer is a small non-streamed chat completion with usage.
const chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`

// countingUpstream is a net/http upstream that answers chatAnswer and
// counts requests and connections.
type countingUpstream struct {
	arrivals, conns atomic.Int64
}

func (u *countingUpstream) server() *http.Server {
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			u.arrivals.Add(1)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, chatAnswer)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				u.conns.Add(1)
			}
		},
		IdleTimeout: time.Second,
	}
}

// Item 5: an upstream that closes idle keep-alive connections after 1 s
// (below llmguard's default idle_timeout of 4s), called every 1.5 s,
// answers every call: the closed connection is found before the request is
// written on it, and the request goes on a fresh one.
func TestUpstreamIdleCloseGivesNoFalse502(t *testing.T) {
	up := &countingUpstream{}
	srv := up.server()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h := startTransport(t, nil, transportYAML("http://"+ln.Addr().String(), "", "", slowTPM), nil)

	const calls = 4
	for i := range calls {
		if i > 0 {
			time.Sleep(1500 * time.Millisecond) // a gap past the upstream's idle timeout
		}
		if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if n := up.arrivals.Load(); n != calls {
		t.Errorf("%d requests reached the upstream for %d calls", n, calls)
	}
	t.Logf("%d calls over %d upstream connections", calls, up.conns.Load())
}

// Item 5: an upstream restarted between two calls (listener and
// connections closed, the same port bound again) answers the second call.
func TestUpstreamRestartGivesNoFalse502(t *testing.T) {
	up := &countingUpstream{}
	srv := up.server()
	srv.IdleTimeout = time.Minute
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go srv.Serve(ln)
	h := startTransport(t, nil, transportYAML("http://"+addr, "", "", slowTPM), nil)

	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	srv.Close()
	srv2 := up.server()
	var ln2 net.Listener
	if !waitFor(10*time.Second, func() bool { ln2, err = net.Listen("tcp", addr); return err == nil }) {
		t.Fatalf("rebind %s: %v", addr, err)
	}
	go srv2.Serve(ln2)
	t.Cleanup(func() { srv2.Close() })
	time.Sleep(50 * time.Millisecond) // the old connection's close reaches llmguard's socket

	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
		t.Fatalf("call after the restart: %d %s", resp.StatusCode, body)
	}
	if n := up.arrivals.Load(); n != 2 {
		t.Errorf("%d requests reached the upstream for 2 calls", n)
	}
}

// scriptedUpstream is a raw HTTP/1.1 upstream that answers the exchange-th
// request on its conn-th connection (both from 1) as act says: "ok" (a
// whole answer, keep-alive), "close" (close without a byte), "partial"
// (the status line, then close).
type scriptedUpstream struct {
	ln              net.Listener
	arrivals, conns atomic.Int64
	open            atomic.Int64 // connections not yet closed on the upstream's side
	act             func(conn, exchange int) string
}

func startScripted(t *testing.T, act func(conn, exchange int) string) *scriptedUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &scriptedUpstream{ln: ln, act: act}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c, int(u.conns.Add(1)))
		}
	}()
	return u
}

func (u *scriptedUpstream) serve(c net.Conn, n int) {
	u.open.Add(1)
	defer u.open.Add(-1)
	defer c.Close()
	br := bufio.NewReader(c)
	for ex := 1; ; ex++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		u.arrivals.Add(1)
		switch u.act(n, ex) {
		case "ok":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(chatAnswer), chatAnswer)
		case "bigheaders": // 10 KiB of answer fields, as a CDN's cookies and tracing can add
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: c=%s\r\nContent-Length: %d\r\n\r\n%s", strings.Repeat("x", 10<<10), len(chatAnswer), chatAnswer)
		case "partial":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			return
		case "drip": // slowloris: the headers, then one body byte every 100 ms until the write fails
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(chatAnswer))
			for k := 0; ; k++ {
				time.Sleep(100 * time.Millisecond)
				if _, err := c.Write([]byte(chatAnswer[k%len(chatAnswer) : k%len(chatAnswer)+1])); err != nil {
					return
				}
			}
		case "hang": // read it, bill it, never answer: wait for llmguard to give up
			io.Copy(io.Discard, c)
			return
		case "brokenstream": // a stream a gateway cuts (its read timeout) before any text: no end chunk
			chunk := "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk)
			return
		case "408", "504", "524", "400", "503": // a gateway's error, without usage
			body := `{"error":{"message":"upstream answered ` + u.act(n, ex) + `"}}`
			fmt.Fprintf(c, "HTTP/1.1 %s Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.act(n, ex), len(body), body)
		default:
			return
		}
	}
}

// Item 5: nothing but a request the upstream cannot have seen, or one that
// may be repeated and got no byte back, is sent again — and only when its
// connection was a reused one. Each case counts what reached the upstream.
func TestUpstreamFailuresRetriedOnlyByNetHTTPRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		// act answers the second exchange on the first connection (the
		// first is served, making the connection a reused one), or with
		// fresh set, the first exchange.
		act       string
		fresh     bool
		idemKey   bool
		status    int
		arrivals  int64 // for the failing call, retry included
		retriedOn bool  // the retry went on a new connection
	}{
		{name: "fresh connection closed without an answer", act: "close", fresh: true, idemKey: true, status: 502, arrivals: 1},
		{name: "reused connection closed after the request", act: "close", status: 502, arrivals: 1},
		// An Idempotency-Key does not make a POST replayable: the upstream
		// may have billed it.
		{name: "reused connection closed, request with an Idempotency-Key", act: "close", idemKey: true, status: 502, arrivals: 1},
		{name: "reused connection cut after answer bytes", act: "partial", idemKey: true, status: 502, arrivals: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startScripted(t, func(conn, exchange int) string {
				if conn == 1 && (exchange == 2 || tc.fresh && exchange == 1) {
					return tc.act
				}
				return "ok"
			})
			h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "", slowTPM), nil)
			before := int64(0)
			if !tc.fresh {
				if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
					t.Fatalf("first call: %d %s", resp.StatusCode, body)
				}
				before = 1
			}
			var extra []string
			if tc.idemKey {
				extra = []string{"Idempotency-Key", "k-1"}
			}
			resp, body := h.post(testKey, hiBody, extra...)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if n := u.arrivals.Load() - before; n != tc.arrivals {
				t.Errorf("the call reached the upstream %d times, want %d", n, tc.arrivals)
			}
			if wantConns := int64(1) + map[bool]int64{true: 1}[tc.retriedOn]; u.conns.Load() != wantConns {
				t.Errorf("%d upstream connections, want %d", u.conns.Load(), wantConns)
			}
			// Alive, and a failed call keeps its reservation (8 + 100
			// tokens): the upstream read it, and may have billed it. The
			// bucket holds the successful calls' usage (8 + 1 tokens each)
			// and the failed call's reservation.
			successes := before + map[bool]int64{true: 1}[tc.status == 200]
			kept := map[bool]int64{true: 1}[tc.status == 502]
			resp, body = h.post(testKey, hiBody)
			if resp.StatusCode != 200 {
				t.Fatalf("next call: %d %s", resp.StatusCode, body)
			}
			if want := 10000 - successes*(hiInput+1) - kept*(hiInput+100) - (hiInput + 100); remainingTokens(t, resp.Header) != want {
				t.Errorf("remaining %d, want %d", remainingTokens(t, resp.Header), want)
			}
		})
	}
}

// discardLog is a logger that drops everything.
func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// An upstream that read the request but answered after the upstream's
// timeout may have billed it (a slow reasoning model, a long answer): the
// 502 keeps the reservation, or a caller could spend without limit by
// asking for answers slower than the timeout. Only a call that never
// reached the upstream (a refused dial) is refunded.
func TestUpstreamTimeoutKeepsTheReservation(t *testing.T) {
	u := startScripted(t, func(conn, exchange int) string { return "hang" })
	h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "    timeout: 300ms", slowTPM), nil)
	for i := range 3 {
		resp, body := h.post(testKey, hiBody)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("call %d: %d %s, want 502", i, resp.StatusCode, body)
		}
		if got, want := remainingTokens(t, resp.Header), 10000-int64(i+1)*(hiInput+100); got != want {
			t.Fatalf("call %d: %d left at admission, want %d: the earlier timed-out calls keep their reservations", i, got, want)
		}
	}
	// The upstream counts a request once its goroutine has read it, which
	// on a loaded machine can come after llmguard's 300 ms cut the call
	// (trial4 saw "2 arrivals" once at load 14–16): each was written
	// before its 502, so wait for the three to be counted; a retry, also
	// written before its call's 502, would be a fourth.
	waitFor(30*time.Second, func() bool { return u.arrivals.Load() >= 3 })
	if n := u.arrivals.Load(); n != 3 {
		t.Errorf("%d arrivals, want 3 (none retried)", n)
	}
}

// An upstream that sends its headers and then one byte every 100 ms (a
// slowloris, or a provider stalled mid-answer) never lets a read time out:
// the upstream timeout bounds the whole exchange, not a read. The call is
// cut at it with a 502, keeps its reservation as TestUpstreamTimeoutKeepsTheReservation's
// does, and its upstream connection is closed (adv24, live: 5 s timeout,
// one byte every 2 s: 502 after 5.0 s, the upstream saw 0 connections open
// a second later).
func TestUpstreamDripIsCutAtItsTimeout(t *testing.T) {
	u := startScripted(t, func(conn, exchange int) string {
		if conn == 1 {
			return "drip"
		}
		return "ok"
	})
	h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "    timeout: 300ms", slowTPM), nil)
	resp, body := h.post(testKey, hiBody)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("dripped answer: %d %s, want 502", resp.StatusCode, body)
	}
	// The dripping connection's next write fails once llmguard closed it.
	if !waitFor(30*time.Second, func() bool { return u.open.Load() == 0 }) {
		t.Errorf("%d upstream connections still open after the cut: the dripping one was kept", u.open.Load())
	}
	resp, body = h.post(testKey, hiBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("call after the cut: %d %s", resp.StatusCode, body)
	}
	if got, want := remainingTokens(t, resp.Header), 10000-2*int64(hiInput+100); got != want {
		t.Errorf("%d left at the next admission, want %d: the cut call keeps its reservation", got, want)
	}
}

// A gateway upstream (LiteLLM, nginx, a cloud load balancer, Cloudflare)
// that gives up waiting for the provider answers 408, 504 or 524 without
// usage, while the provider goes on and bills the request. Such a call
// keeps its reservation, as one llmguard's own upstream timeout cuts does:
// refunded, a caller who asks for answers slower than the gateway's
// timeout (LiteLLM even takes it from the body, "timeout": 1) was never
// charged. Other errors (400, 503) are refunded as before.
func TestGatewayTimeoutKeepsTheReservation(t *testing.T) {
	for _, tc := range []struct {
		status string
		kept   bool
	}{{"504", true}, {"524", true}, {"408", true}, {"400", false}, {"503", false}} {
		t.Run(tc.status, func(t *testing.T) {
			u := startScripted(t, func(conn, exchange int) string {
				if exchange == 1 && conn == 1 {
					return tc.status
				}
				return "ok"
			})
			h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "", slowTPM), nil)
			resp, body := h.post(testKey, hiBody)
			if got := strconv.Itoa(resp.StatusCode); got != tc.status {
				t.Fatalf("first call: %s %s, want the upstream's %s", got, body, tc.status)
			}
			resp, body = h.post(testKey, hiBody)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("second call: %d %s", resp.StatusCode, body)
			}
			want := 10000 - 2*int64(hiInput+100) // the first call's reservation kept, the second's taken
			if !tc.kept {
				want = 10000 - int64(hiInput+100)
			}
			if got := remainingTokens(t, resp.Header); got != want {
				t.Errorf("after a %s without usage: %d left at the next admission, want %d (first call's reservation kept: %v)", tc.status, got, want, tc.kept)
			}
		})
	}
}

// A stream the upstream breaks off (its connection closed mid-body, no
// end chunk, no usage: a gateway's read timeout while a reasoning model
// thinks in silence) is charged at least its output reservation, as one
// whose client left: the provider generated tokens the stream never
// showed. Before, it was charged what it had shown, here nothing.
func TestBrokenUpstreamStreamKeepsTheOutputReservation(t *testing.T) {
	u := startScripted(t, func(conn, exchange int) string { return "brokenstream" })
	h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "", slowTPM), nil)
	if status, body, _ := postBroken(t, h); status != http.StatusOK {
		t.Fatalf("status %d %s, want the stream's 200", status, body)
	}
	// The bound only ends a failing run.
	if !waitFor(30*time.Second, func() bool {
		return h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "input"}) == hiInput
	}) {
		t.Fatal("the broken stream was not settled")
	}
	if out := h.scrape()["llmguard_tokens_total"].sum(map[string]string{"kind": "output"}); out != 100 {
		t.Errorf("broken stream charged %v output tokens, want its reservation, 100", out)
	}
}

// A stream the upstream breaks off before its terminal event reaches its
// client broken too: the connection is cut, so the body ends without the
// chunked coding's last chunk, as it would from the upstream itself (curl
// exits 18, the SDKs raise a connection error). Before, llmguard ended it
// cleanly, and the client took the partial answer for a whole one
// (trial8: the OpenAI and Anthropic SDKs returned a cut stream without an
// error).
func TestBrokenUpstreamStreamIsCutForItsClient(t *testing.T) {
	u := startScripted(t, func(conn, exchange int) string { return "brokenstream" })
	h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "", slowTPM), nil)
	status, body, err := postBroken(t, h)
	if status != http.StatusOK {
		t.Fatalf("status %d %s, want the stream's 200", status, body)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading the broken stream: err %v, want io.ErrUnexpectedEOF (a cut, not a clean end); body %q", err, body)
	}
	if !strings.Contains(body, `"role":"assistant"`) {
		t.Errorf("body %q: the event sent before the break did not reach the client", body)
	}
}

// postBroken posts a streamed chat request to h and reads its answer to
// the end, returning the status, the body read and the read's error (nil
// for a body that ended cleanly).
func postBroken(t *testing.T, h *harness) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// An answer whose header fields pass 4 KiB (fasthttp's default read
// buffer) was a 502 "could not reach the upstream" though the upstream had
// answered (and billed): the upstream client reads fields up to 16 KiB.
func TestUpstreamAnswerWithLargeHeaders(t *testing.T) {
	u := startScripted(t, func(conn, exchange int) string { return "bigheaders" })
	h := startTransport(t, nil, transportYAML("http://"+u.ln.Addr().String(), "", "", slowTPM), nil)
	resp, body := h.post(testKey, hiBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%s), want 200 with the upstream's answer", resp.StatusCode, body)
	}
}
