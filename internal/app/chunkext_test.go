package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHugeChunkExtensionHeldInNoMemory: through the proxy's own server, a
// chunked request body whose one chunk carries an 8 MiB chunk extension
// (max_body_bytes, yet no body byte: only the read timeout bounds it) is
// served and charged once, and llmguard allocates far less than the
// extension while it reads it (the server skips an extension as it
// arrives). Found sound by adv21 (live: 300 MiB of extension, the RSS flat
// at 75 MiB, 230 KiB allocated here); kept as a cheap regression probe of a
// hostile caller's framing.
func TestHugeChunkExtensionHeldInNoMemory(t *testing.T) {
	mock := startMock(t)
	h := startTransport(t, mock, transportYAML(mock.URL, "", "", slowTPM), nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute)) // only ends a failing run
	const extBytes = 8 << 20
	piece := bytes.Repeat([]byte("e"), 64<<10) // written again and again: the sender allocates nothing per piece
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x;x=", testKey, len(hiBody))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	for range extBytes / len(piece) {
		if _, err := c.Write(piece); err != nil {
			t.Fatalf("writing the extension: %v", err)
		}
	}
	if _, err := io.WriteString(c, "\r\n"+hiBody+"\r\n0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	runtime.ReadMemStats(&m1)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answer: %d %s", resp.StatusCode, body)
	}
	if r, want := remainingTokens(t, resp.Header), int64(10000-(hiInput+100)); r != want {
		t.Errorf("remaining %d, want %d: the body was weighed otherwise", r, want)
	}
	if n := mock.Requests.Load(); n != 1 {
		t.Errorf("%d requests reached the upstream, want 1", n)
	}
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("allocated %d KiB while reading a %d MiB chunk extension", alloc>>10, extBytes>>20)
	if alloc > extBytes/4 {
		t.Errorf("allocated %d bytes while reading a %d-byte chunk extension, want under a quarter of it", alloc, extBytes)
	}
}
