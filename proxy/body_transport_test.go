package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"golang.org/x/sync/semaphore"
)

// bodyServer serves readBody alone over an in-memory listener, as the
// proxy's server does (StreamRequestBody): 200 with the body's length, or
// the refusal. The Proxy holds limit bytes per body and budget in all.
func bodyServer(t *testing.T, limit int, budget int64) (*Proxy, func() net.Conn) {
	t.Helper()
	p := &Proxy{opt: Options{MaxBodyBytes: limit}, bodies: semaphore.NewWeighted(budget),
		shares: make(map[string]*int64), shareCap: max(budget/4, int64(limit))}
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{StreamRequestBody: true, DisablePreParseMultipartForm: true, MaxRequestBodySize: limit,
		Handler: func(ctx *fasthttp.RequestCtx) {
			defer func() {
				if unreadBody(ctx) {
					ctx.SetConnectionClose()
				}
			}()
			h, refusal, ok := p.readBody(ctx, string(ctx.Request.Header.Peek("X-Tenant")))
			if !ok {
				refusal.write(ctx, FlavorOpenAI)
				return
			}
			defer p.releaseBody(ctx, h)
			fmt.Fprintf(ctx, "%d", len(h.b))
		}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return p, func() net.Conn {
		c, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// send writes head and then, concurrently with reading the answer, body;
// it returns the status and the answer's body.
func send(t *testing.T, c net.Conn, head, body string) (int, string) {
	t.Helper()
	go func() {
		io.WriteString(c, head)
		io.WriteString(c, body)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func chunked(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	return b.String() + "0\r\n\r\n"
}

// readBody reads a body within max_body_bytes and the budget, whatever
// its framing, and gives every byte back.
func TestReadBodyLimits(t *testing.T) {
	const limit = 100 << 10
	for _, tc := range []struct {
		name, head, body string
		status           int
		want             string // the answer's body, or a fragment of the error
	}{
		{name: "length", head: "Content-Length: 5\r\n", body: "hello", status: 200, want: "5"},
		{name: "empty", head: "Content-Length: 0\r\n", body: "", status: 200, want: "0"},
		{name: "length at the limit", head: fmt.Sprintf("Content-Length: %d\r\n", limit), body: strings.Repeat("x", limit), status: 200, want: fmt.Sprint(limit)},
		// Refused from the header: the answer comes after the 8 KiB fasthttp
		// pre-reads, without the rest of the body.
		{name: "length over the limit", head: fmt.Sprintf("Content-Length: %d\r\n", limit+1), body: strings.Repeat("x", 8<<10), status: 413, want: "request_too_large"},
		{name: "chunked", head: "Transfer-Encoding: chunked\r\n", body: chunked("hel", "lo"), status: 200, want: "5"},
		{name: "chunked at the limit", head: "Transfer-Encoding: chunked\r\n", body: chunked(strings.Repeat("x", limit-1), "x"), status: 200, want: fmt.Sprint(limit)},
		{name: "chunked over the limit", head: "Transfer-Encoding: chunked\r\n", body: chunked(strings.Repeat("x", limit), "x"), status: 413, want: "request_too_large"},
		{name: "broken chunk", head: "Transfer-Encoding: chunked\r\n", body: "zz\r\nhello\r\n0\r\n\r\n", status: 400, want: "invalid_body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, dial := bodyServer(t, limit, 4*limit)
			status, body := send(t, dial(), "POST / HTTP/1.1\r\nHost: x\r\n"+tc.head+"\r\n", tc.body)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("status %d body %q, want %d with %q", status, body, tc.status, tc.want)
			}
			if !p.bodies.TryAcquire(4 * limit) {
				t.Error("bytes still held after the answer")
			}
		})
	}
}

// A body that does not fit in what the budget has left is refused at once
// with 503, by its length or as it grows, and what it held is given back.
func TestReadBodyBudget(t *testing.T) {
	const limit = 256 << 10
	p, dial := bodyServer(t, limit, limit)
	if !p.bodies.TryAcquire(limit - 100<<10) { // another request holds all but 100 KiB
		t.Fatal("budget")
	}
	if st, body := send(t, dial(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n", strings.Repeat("x", 8<<10)); st != 503 || !strings.Contains(body, "server_overloaded") {
		t.Errorf("length beyond the room left: %d %s", st, body)
	}
	if st, body := send(t, dial(), "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", chunked(strings.Repeat("x", 200000))); st != 503 || !strings.Contains(body, "server_overloaded") {
		t.Errorf("chunked beyond the room left: %d %s", st, body)
	}
	if st, body := send(t, dial(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 90000\r\n\r\n", strings.Repeat("x", 90000)); st != 200 || body != "90000" {
		t.Errorf("a body that fits: %d %s", st, body)
	}
	p.bodies.Release(limit - 100<<10)
	if !p.bodies.TryAcquire(limit) {
		t.Error("refused or served requests left bytes held")
	}
}

// TestReadBodyTenantShare: a tenant whose uploads stall holds at most a
// quarter of the budget; another tenant's body is still read.
func TestReadBodyTenantShare(t *testing.T) {
	const limit = 64 << 10
	p, dial := bodyServer(t, limit, 8*limit) // a tenant's share: 2 bodies
	stall := func() {
		c := dial()
		go io.WriteString(c, fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: slow\r\nContent-Length: %d\r\n\r\n%s", limit, strings.Repeat("x", 9<<10)))
	}
	stall()
	stall()
	waitHeld := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			p.shareMu.Lock()
			var held int64
			if s := p.shares["slow"]; s != nil {
				held = *s
			}
			p.shareMu.Unlock()
			if held == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tenant slow holds %d bytes, want %d", held, n)
			}
		}
	}
	waitHeld(2 * limit)
	if st, body := send(t, dial(), fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: slow\r\nContent-Length: %d\r\n\r\n", 10<<10), strings.Repeat("x", 10<<10)); st != 503 {
		t.Errorf("a third body of the stalled tenant: %d %s, want 503 (its share is full)", st, body)
	}
	if st, body := send(t, dial(), fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: other\r\nContent-Length: %d\r\n\r\n", limit), strings.Repeat("x", limit)); st != 200 {
		t.Errorf("another tenant's body: %d %s, want 200", st, body)
	}
}

// TestReadBodyReusesBuffers: a body read by its length goes into a buffer
// of the body pool, given back when the request is done and reused by the
// next body of about its size, which reads its own bytes, not the last
// one's; a body that breaks off gives its buffer back too.
func TestReadBodyReusesBuffers(t *testing.T) {
	const limit = 1 << 20
	p := &Proxy{opt: Options{MaxBodyBytes: limit}, bodies: semaphore.NewWeighted(4 * limit),
		shares: make(map[string]*int64), shareCap: limit, bodyPool: newBodyPool(4 * limit)}
	var bufs []*byte
	done := make(chan struct{}, 8) // one per request handled
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{StreamRequestBody: true, DisablePreParseMultipartForm: true, MaxRequestBodySize: limit,
		Handler: func(ctx *fasthttp.RequestCtx) {
			defer func() { done <- struct{}{} }()
			h, refusal, ok := p.readBody(ctx, "")
			if !ok {
				refusal.write(ctx, FlavorOpenAI)
				return
			}
			defer p.releaseBody(ctx, h)
			bufs = append(bufs, &h.pooled[0])
			ctx.SetBody(h.b) // a copy
		}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	dial := func() net.Conn {
		c, err := ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial()
	for i, n := range []int{100_000, 99_000, 101_000} {
		body := strings.Repeat(string(rune('a'+i)), n)
		st, got := send(t, c, fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n), body)
		if st != 200 || got != body {
			t.Fatalf("body %d (%d bytes): status %d, echoed %d bytes, first %.8q", i, n, st, len(got), got)
		}
		<-done
		if held := p.bodyPool.Held(); held < int64(n) {
			t.Errorf("body %d: the pool holds %d bytes after the request, want its buffer", i, held)
		}
	}
	if bufs[1] != bufs[0] || bufs[2] != bufs[0] {
		t.Errorf("bodies of about one size read into new buffers: %p %p %p", bufs[0], bufs[1], bufs[2])
	}
	// A body that breaks off: refused, its buffer given back.
	before := p.bodyPool.Held()
	c2 := dial()
	io.WriteString(c2, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("z", 50_000))
	c2.Close()
	<-done
	if p.bodyPool.Held() != before {
		t.Errorf("a broken body's buffer not given back: the pool holds %d, held %d before", p.bodyPool.Held(), before)
	}
	if !p.bodies.TryAcquire(4 * limit) {
		t.Error("bytes still held")
	}
}
