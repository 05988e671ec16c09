package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	brotli "github.com/molecule-man/go-brrr"
)

// startTrickleUpstream answers every request with head, then body one
// byte per write, TCP_NODELAY, a short pause between writes, so that
// llmguard's reads end at every byte of the stream.
func startTrickleUpstream(t *testing.T, head string, body []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				c.(*net.TCPConn).SetNoDelay(true)
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if _, err := io.WriteString(c, head); err != nil {
					return
				}
				for i := range body {
					if _, err := c.Write(body[i : i+1]); err != nil {
						return
					}
					time.Sleep(50 * time.Microsecond)
				}
			}(c)
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAdv55UsageTrickledByteByByteInEveryCoding (adv55): a chat stream
// whose usage chunk reports 5,000 prompt tokens, sent one byte per write
// (every event, and the usage event, split at every byte), plain and in
// each coding llmguard decodes (gzip, deflate, br, zstd): the usage is
// read and charged whole, and the client gets the decoded stream.
func TestAdv55UsageTrickledByteByByteInEveryCoding(t *testing.T) {
	stream := []byte(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5000,"completion_tokens":7,"total_tokens":5007}}` + "\n\n" +
		"data: [DONE]\n\n")
	code := func(enc string) []byte {
		var b bytes.Buffer
		var w io.WriteCloser
		switch enc {
		case "":
			return stream
		case "gzip":
			w = gzip.NewWriter(&b)
		case "deflate":
			w = zlib.NewWriter(&b)
		case "br":
			var err error
			if w, err = brotli.NewWriter(&b, 5); err != nil {
				t.Fatal(err)
			}
		case "zstd":
			var err error
			if w, err = zstd.NewWriter(&b, zstd.WithWindowSize(1<<16)); err != nil {
				t.Fatal(err)
			}
		}
		w.Write(stream)
		w.Close()
		return b.Bytes()
	}
	w := testWeigher(t)
	for _, enc := range []string{"", "gzip", "deflate", "br", "zstd"} {
		t.Run("coding="+enc, func(t *testing.T) {
			body := code(enc)
			head := "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
			if enc != "" {
				head += "content-encoding: " + enc + "\r\n"
			}
			head += "content-length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
			r := newRig(t, rigOptions{url: startTrickleUpstream(t, head, body), w: w})
			full := r.remaining()
			status, _, got, err := r.do("/v1/chat/completions", panicStreamBody, "Accept-Encoding", "identity")
			if err != nil || status != 200 {
				t.Fatalf("status %d, err %v", status, err)
			}
			if !bytes.Contains([]byte(got), []byte(`"content":"hi"`)) {
				t.Errorf("client read %q, want the decoded stream", got)
			}
			r.waitLedger(1)
			if charged := full - r.remaining(); charged != 5007 {
				t.Errorf("charged %d tokens, want the usage's 5,007", charged)
			}
		})
	}
}
