package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/weigher"
)

// rawUpstream answers every request on a loopback socket with resp, byte
// for byte, and keeps the raw bytes of the last request it read.
type rawUpstream struct {
	ln   net.Listener
	mu   sync.Mutex
	last string
}

func startRawUpstream(t *testing.T, resp string) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c, resp)
		}
	}()
	return u
}

func (u *rawUpstream) serve(c net.Conn, resp string) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		var b strings.Builder
		req.Header.Write(&b)
		io.Copy(io.Discard, req.Body)
		u.mu.Lock()
		u.last = b.String()
		u.mu.Unlock()
		if _, err := io.WriteString(c, resp); err != nil {
			return
		}
	}
}

func (u *rawUpstream) url() string { return "http://" + u.ln.Addr().String() }

func (u *rawUpstream) lastHeaders() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

// TestHopHeadersRemovedWhateverTheirCase sends an answer whose hop-by-hop
// fields are written in lower case, one of them named only by Connection,
// and checks none reaches the client, while end-to-end fields do; and a
// request's lower-case hop-by-hop fields do not reach the upstream.
func TestHopHeadersRemovedWhateverTheirCase(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	up := startRawUpstream(t, "HTTP/1.1 200 OK\r\n"+
		"content-type: application/json\r\n"+
		"connection: keep-alive, X-Hop-Resp\r\n"+
		"x-hop-resp: secret\r\n"+
		"keep-alive: timeout=5\r\n"+
		"proxy-connection: keep-alive\r\n"+
		"proxy-authenticate: Basic\r\n"+
		"upgrade: h2c\r\n"+
		"x-end-to-end: kept\r\n"+
		"content-length: "+itoa(len(body))+"\r\n\r\n"+body)
	r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
	status, h, got, err := r.do("/v1/chat/completions", panicBody,
		"Connection", "keep-alive, x-hop-req", "x-hop-req", "secret", "te", "trailers", "proxy-authorization", "Basic abc", "x-end-req", "kept")
	if err != nil || status != 200 {
		t.Fatalf("status %d, err %v, body %s", status, err, got)
	}
	for _, k := range []string{"X-Hop-Resp", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Upgrade"} {
		if v := h.Get(k); v != "" {
			t.Errorf("client got hop-by-hop %s: %q", k, v)
		}
	}
	if h.Get("X-End-To-End") != "kept" {
		t.Errorf("end-to-end field lost: %v", h)
	}
	sent := strings.ToLower(up.lastHeaders())
	for _, k := range []string{"x-hop-req:", "te:", "proxy-authorization:"} {
		if strings.Contains(sent, k) {
			t.Errorf("upstream got hop-by-hop %s\n%s", k, sent)
		}
	}
	if !strings.Contains(sent, "x-end-req: kept") {
		t.Errorf("end-to-end request field lost:\n%s", sent)
	}
}

// A credential the request announces as a trailer (Trailer: X-Api-Key)
// is held by fasthttp outside its list of fields until the Trailer field
// goes: it must not reach the upstream once that field is removed.
func TestAnnouncedTrailerCredentialIsDropped(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	up := startRawUpstream(t, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "+itoa(len(body))+"\r\n\r\n"+body)
	r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t)})
	// Written by hand: net/http's client does not send a Trailer field
	// from the header map.
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-panic\r\n"+
		"Content-Type: application/json\r\nTrailer: X-Api-Key, OpenAI-Organization\r\nX-Api-Key: sk-smuggled\r\n"+
		"OpenAI-Organization: org-smuggled\r\nX-End-Req: kept\r\nConnection: close\r\n"+
		"Content-Length: "+itoa(len(panicBody))+"\r\n\r\n"+panicBody)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, body %s", resp.StatusCode, got)
	}
	sent := strings.ToLower(up.lastHeaders())
	for _, v := range []string{"smuggled", "trailer:"} {
		if strings.Contains(sent, v) {
			t.Errorf("upstream got %q\n%s", v, sent)
		}
	}
	if !strings.Contains(sent, "x-end-req: kept") {
		t.Errorf("end-to-end request field lost:\n%s", sent)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

var sharedWeigher struct {
	once sync.Once
	w    *weigher.Weigher
	err  error
}

// testWeigher is one Weigher shared by the package's tests (building one
// takes a fraction of a second).
func testWeigher(t *testing.T) *weigher.Weigher {
	t.Helper()
	sharedWeigher.once.Do(func() { sharedWeigher.w, sharedWeigher.err = weigher.New(weigher.Options{DefaultMaxOutputTokens: 256}) })
	if sharedWeigher.err != nil {
		t.Fatal(sharedWeigher.err)
	}
	return sharedWeigher.w
}

// TestUpstreamRefusingTheGatewayKey checks that an upstream 401 or 403 to a
// request carrying llmguard's own upstream key reaches the caller as
// llmguard's error, in its flavor's shape, with none of the upstream's body
// (which quotes the key); that the reservation is refunded; that the
// operator's log names it; and that a pass-through caller, whose own key
// was refused, gets the upstream's answer as it is.
func TestUpstreamRefusingTheGatewayKey(t *testing.T) {
	const upstreamKey = "sk-proj-gatewaysecret5678"
	for _, tc := range []struct {
		status int
		flavor Flavor
		path   string
		body   string
		shape  string
	}{
		{401, FlavorOpenAI, "/v1/chat/completions", panicBody, `"code":"upstream_auth_failed"`},
		{403, FlavorOpenAI, "/v1/chat/completions", panicBody, `"code":"upstream_auth_failed"`},
		{401, FlavorAnthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
			`{"type":"error","error":{"type":"api_error"`},
	} {
		refusal := `{"error":{"message":"Incorrect API key provided: sk-proj-********5678.","type":"invalid_request_error","code":"invalid_api_key"}}`
		up := startRawUpstream(t, "HTTP/1.1 "+strconv.Itoa(tc.status)+" Refused\r\ncontent-type: application/json\r\nx-upstream-detail: sk-proj-****5678\r\ncontent-length: "+
			itoa(len(refusal))+"\r\n\r\n"+refusal)
		r := newRig(t, rigOptions{url: up.url(), w: testWeigher(t), flavor: tc.flavor, apiKey: upstreamKey})
		full := r.remaining()
		status, h, got, err := r.do(tc.path, tc.body, "x-api-key", "sk-panic")
		if err != nil {
			t.Fatal(err)
		}
		if status != 502 || !strings.Contains(got, tc.shape) || h.Get("x-should-retry") != "false" {
			t.Errorf("%d %v: got %d %s (x-should-retry %q), want 502 with %s", tc.status, tc.flavor, status, got, h.Get("x-should-retry"), tc.shape)
		}
		for k, v := range h {
			if strings.Contains(strings.Join(v, " ")+got, "5678") {
				t.Errorf("%d %v: the caller saw part of the upstream key in %s: %v / %s", tc.status, tc.flavor, k, v, got)
			}
		}
		if left := r.remaining(); left != full {
			t.Errorf("%d %v: %d units kept, want the reservation refunded", tc.status, tc.flavor, full-left)
		}
		if !strings.Contains(r.log.String(), "rejected llmguard's upstream credential") || strings.Contains(r.log.String(), "5678") {
			t.Errorf("operator log: %s", r.log.String())
		}
		if !strings.Contains(up.lastHeaders(), upstreamKey) {
			t.Errorf("the upstream did not get llmguard's key:\n%s", up.lastHeaders())
		}

		// A pass-through caller's own key was refused: its answer as is.
		status, _, got, err = r.do(tc.path, tc.body, "Authorization", "Bearer sk-callers-own-key", "x-api-key", "sk-callers-own-key")
		if err != nil || status != tc.status || got != refusal {
			t.Errorf("%d %v pass-through: got %d %s, want the upstream's answer", tc.status, tc.flavor, status, got)
		}
	}
}

// TestMalformedRequestsAreCounted sends a body that ends, within its first
// 8 KiB, before its declared length: fasthttp refuses it before the
// handler runs, and the refusal is still counted as outcome invalid.
func TestMalformedRequestsAreCounted(t *testing.T) {
	r := newRig(t, rigOptions{url: "http://127.0.0.1:1", w: testWeigher(t)})
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-panic\r\nContent-Length: 1000\r\n\r\n{\"model\":\"gpt-4o-mini\"")
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"type":"invalid_request_error"`) {
		t.Errorf("got %d %s, want 400 in OpenAI's shape", resp.StatusCode, b)
	}
	if got := requestsBy(t, r.reg, meter.OutcomeInvalid); got != 1 {
		t.Errorf("requests_total{outcome=invalid} = %v, want 1", got)
	}
}
