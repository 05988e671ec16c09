package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/proxy"
)

// The connection cap's default is half the file-descriptor limit, never
// below minDefaultConnections; a configured cap is kept, and one at or
// above the limit is logged.
func TestMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		configured int
		files      uint64
		want       int
		warns      bool
	}{
		{0, 1 << 20, maxDefaultConnections, false}, // half would let half-sent requests hold ~8 GiB of read buffers
		{0, 1024, 512, false},
		{0, 100, minDefaultConnections, false},
		{0, 0, fasthttp.DefaultConcurrency, false},
		{0, 100000, 50000, false},
		{500, 1024, 500, false},
		{1024, 1024, 1024, true},
		{5000, 1024, 5000, true},
		{5000, 0, 5000, false},
	} {
		var out bytes.Buffer
		got := maxConnections(tc.configured, tc.files, slog.New(slog.NewTextHandler(&out, nil)))
		if got != tc.want {
			t.Errorf("maxConnections(%d, %d) = %d, want %d", tc.configured, tc.files, got, tc.want)
		}
		if warned := strings.Contains(out.String(), "max_connections"); warned != tc.warns {
			t.Errorf("maxConnections(%d, %d) logged %q, want a warning: %v", tc.configured, tc.files, out.String(), tc.warns)
		}
	}
	if fileLimit() == 0 {
		t.Log("RLIMIT_NOFILE unreadable or unlimited here: the default is fasthttp's")
	}
}

// Connections that each send half a request hold a file descriptor until
// the read timeout (60 s). Past max_connections a new connection is
// answered 503 at once instead of taking another descriptor, and once
// the half-sent ones go, callers are served again. Before the cap the
// listener took every connection up to the process's limit, and the
// upstream dials and Redis then failed for want of descriptors.
func TestConnectionsPastTheCapAreRefused(t *testing.T) {
	mock := startMock(t)
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, slowTPM+"max_connections: 64\n")))
	if err != nil {
		t.Fatal(err)
	}
	h := startParsed(t, mock, cfg, discardLog())
	addr := strings.TrimPrefix(h.url, "http://")
	var half []net.Conn
	for range 64 { // the least cap a config may set
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
		half = append(half, c)
	}
	// The 65th: refused. Its deadline only ends a failing run (a proxy
	// without the cap reads its request until the read timeout).
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	c.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(hiBody)) + "\r\n\r\n" + hiBody))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the connection past the cap: %v, want a 503", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the connection past the cap: status %d, want 503", resp.StatusCode)
	}
	// llmguard's own answer, in a shape both SDKs read, naming the setting
	// (fasthttp's said "Server.Concurrency limit exceeded" in plain text).
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Error.Type != "overloaded_error" || e.Error.Code != "max_connections" ||
		!strings.Contains(e.Error.Message, "max_connections 64") || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("the answer past the cap: %q (Retry-After %q, Content-Type %q), want llmguard's JSON naming max_connections 64, Retry-After 1",
			body, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	}
	m := h.metrics()
	for _, want := range []string{"llmguard_connections_refused_total 1", "llmguard_max_connections 64", "llmguard_open_connections 64"} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, c := range half {
		c.Close()
	}
	// The server notices the closed connections as it reads them: try a
	// bounded number of times. Until it has, a new connection is answered
	// 503 at accept, before the client has written its request, which Go's
	// client reports as an error ("unsolicited response"): that too is
	// "not yet".
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	status, refusals := 0, 0
	var lastErr error
	for try := 0; try < 200 && status != http.StatusOK; try++ {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(hiBody))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			status = resp.StatusCode
		} else {
			status, lastErr = 0, err
		}
		if status != http.StatusOK {
			refusals++
			time.Sleep(10 * time.Millisecond)
		}
	}
	if status != http.StatusOK {
		t.Fatalf("after the half-sent connections closed: %d tries refused (last status %d, last error %v), want a 200", refusals, status, lastErr)
	}
}

// A capped connection gives its TCP socket to the client write deadline
// (proxy.SocketConn), which writes an answer the socket takes at once
// without setting a deadline: the socket is the accepted one, and a
// connection that is not TCP gives none.
func TestCappedConnGivesItsSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl := newConnCap(4, false, slog.New(slog.DiscardHandler)).listen(ln)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := proxy.SocketOf(c)
	if tc == nil || tc != c.(*cappedConn).Conn {
		t.Fatalf("SocketOf(capped connection) = %v, want its *net.TCPConn %v", tc, c.(*cappedConn).Conn)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if s := proxy.SocketOf(&cappedConn{Conn: a}); s != nil {
		t.Errorf("SocketOf(capped pipe) = %v, want nil", s)
	}
}
