package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/contentcoding"
)

// zstdFrame is a Zstandard frame (RFC 8878 §3.1.1) whose header asks for a
// window of 2^(10+exp) bytes (not single-segment, no checksum), holding
// content as a raw block, then rle blocks of 128 KiB of the byte fill, and
// a last, empty, raw block when last is set.
func zstdFrame(exp byte, content []byte, rle int, fill byte, last bool) []byte {
	f := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, exp << 3}
	f = append(f, zstdBlock(0, content)...)
	for range rle {
		f = append(f, zstdBlock(0, []byte{fill}, 128<<10)...)
	}
	if last {
		f = append(f, zstdBlock(1, nil)...)
	}
	return f
}

// zstdBlock is a raw block holding content, or, with a size, an RLE block
// of size copies of content's byte (RFC 8878 §3.1.1.2); last (1) marks the
// frame's last block, then empty.
func zstdBlock(last int, content []byte, size ...int) []byte {
	h := len(content)<<3 | last
	if len(size) > 0 {
		h = size[0]<<3 | 1<<1 | last
	}
	return append([]byte{byte(h), byte(h >> 8), byte(h >> 16)}, content...)
}

// allocated is the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestZstdAnswerWindowWithinTheBudget: through real sockets, an upstream
// answer in zstd is decoded (for its usage) only with a window of at most
// 8 MiB (RFC 9659 §3) taken from max_inflight_response_bytes before the
// decoder allocates it, for as long as it decodes. Before, a frame header
// of six bytes asking for a 64 MiB window made the decoder allocate 64 MiB
// outside any budget, per answer and per stream: 30 such streams held 2
// GiB of heap, and 120 non-streamed answers with a 4 MiB answer budget
// took llmguard's RSS to 2.6 GB. A window over 8 MiB, or one without room
// in the budget, is not decoded: the answer reaches the client as sent and
// keeps its reservation.
func TestZstdAnswerWindowWithinTheBudget(t *testing.T) {
	w := testWeigher(t)
	reserved := w.Chat([]byte(budgetBody)).InputTokens + 50
	usage := jsonAnswer(900) // 1 + 1 tokens
	event := []byte(`data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n")
	final := []byte(`data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}` + "\n\ndata: [DONE]\n\n")
	for _, tc := range []struct {
		name   string
		stream bool
		exp    byte  // the window: 2^(10+exp) bytes
		budget int64 // max_inflight_response_bytes
		read   bool  // the usage is read (decoded), else the reservation stands
		rle    int   // 128 KiB blocks of spaces after the answer's JSON
		// later: the window exponent of a second frame, holding the rest
		// of a stream (0: none, the rest ends the first frame).
		later byte
	}{
		{name: "answer, 64 MiB window", exp: 16, budget: 256 << 20, rle: 8},
		{name: "answer, 16 MiB window", exp: 14, budget: 256 << 20, rle: 8},
		{name: "answer, 4 MiB window", exp: 12, budget: 16 << 20, read: true, rle: 8},
		{name: "answer, 4 MiB window, no room", exp: 12, budget: 2 << 20}, // room for its 900 bytes decoded, not for the window
		{name: "stream, 64 MiB window", stream: true, exp: 16, budget: 256 << 20},
		{name: "stream, 16 MiB window", stream: true, exp: 14, budget: 256 << 20},
		{name: "stream, 4 MiB window", stream: true, exp: 12, budget: 16 << 20, read: true},
		{name: "stream, 4 MiB window, no room", stream: true, exp: 12, budget: 2 << 20},
		// Decoded until a frame asks for more than the first did: the
		// rest is not read, and the stream keeps its reservation.
		{name: "stream, a later frame asks for 8 MiB", stream: true, exp: 12, budget: 16 << 20, read: true, later: 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// first is sent at once, rest once the test let it go (a
			// stream is checked in between, while its decoder lives).
			var first, rest []byte
			ct, body, decoded := "application/json", budgetBody, usage
			if tc.stream {
				ct = "text/event-stream"
				body = strings.Replace(budgetBody, `"max_tokens":50`, `"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}`, 1)
				decoded = append(append([]byte{}, event...), final...)
				first = zstdFrame(tc.exp, event, 0, 0, false)
				rest = append(zstdBlock(0, final), zstdBlock(1, nil)...)
				if tc.later != 0 {
					rest = append(zstdBlock(1, nil), zstdFrame(tc.later, final, 0, 0, true)...)
					decoded = event
				}
			} else {
				first = zstdFrame(tc.exp, usage, tc.rle, ' ', true)
			}
			coded := append(append([]byte{}, first...), rest...)
			head := "HTTP/1.1 200 OK\r\ncontent-type: " + ct + "\r\ncontent-encoding: zstd\r\ncontent-length: " + itoa(len(coded)) + "\r\n\r\n"
			goOn := make(chan struct{})
			url := byteUpstream(t, func(c net.Conn, _ int) bool {
				c.Write([]byte(head))
				c.Write(first)
				if len(rest) > 0 {
					<-goOn
					c.Write(rest)
				}
				return true
			})
			r := newRig(t, rigOptions{url: url, w: w, answerBudget: tc.budget})
			before := r.remaining()
			var status int
			var enc string
			var got []byte
			alloc := allocated(func() {
				req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-panic")
				resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				status, enc = resp.StatusCode, resp.Header.Get("Content-Encoding")
				if tc.stream {
					// The first event (or the first bytes, as sent) has
					// arrived: the decoder lives now.
					one := make([]byte, 1)
					if _, err := io.ReadFull(resp.Body, one); err != nil {
						t.Fatal(err)
					}
					got = append(got, one...)
					held, window := r.px.ResponseBytesHeld(), int64(1)<<(10+tc.exp)
					if tc.read && held < window {
						t.Errorf("%d answer bytes held while the stream decodes, want at least its %d-byte window", held, window)
					}
					if !tc.read && held != 0 {
						t.Errorf("%d answer bytes held by a stream relayed as sent", held)
					}
					close(goOn)
				}
				b, err := io.ReadAll(resp.Body)
				switch {
				case tc.later != 0:
					// Its decoder failed mid-stream: the client's body
					// ends broken, not as a whole answer (trial8).
					if !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("reading a stream whose decoding failed: err %v, want io.ErrUnexpectedEOF (a cut)", err)
					}
				case err != nil:
					t.Fatal(err)
				}
				got = append(got, b...)
			})
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			// Measured: not decoded, at most 350 KiB; decoded with a 4 MiB
			// window, 4.5 to 8.7 MiB (the window, the decoded copy).
			if most := map[bool]uint64{false: 4 << 20, true: 16 << 20}[tc.read]; alloc > most {
				t.Errorf("the request allocated %d KiB, want at most %d: the decoder's window is not bounded", alloc>>10, most>>10)
			}
			r.waitLedger(1)
			charged := before - r.remaining()
			switch {
			case tc.read && tc.later == 0 && charged != 2:
				t.Errorf("charged %d, want the 2 tokens reported", charged)
			case (!tc.read || tc.later != 0) && charged < reserved:
				t.Errorf("charged %d, want at least the reservation %d", charged, reserved)
			}
			// A non-streamed answer reaches the client as sent; a stream
			// decoded when it was read, as sent (with its content-encoding:
			// TestUndecodedAnswerKeepsItsCoding) when not.
			want, wantEnc := coded, "zstd"
			if tc.stream && tc.read {
				want, wantEnc = decoded, ""
			}
			if !bytes.Equal(got, want) || enc != wantEnc {
				t.Errorf("client got %d bytes (content-encoding %q), want %d (%q)", len(got), enc, len(want), wantEnc)
			}
			r.released(tc.name)
		})
	}
}

// FuzzZstdWindowOf: any bytes an upstream sends: zstdWindowOf never panics
// nor consumes them, and a window it returns is one ZstdWindow reads from
// the same bytes, at least zstd's minimum.
func FuzzZstdWindowOf(f *testing.F) {
	f.Add(zstdFrame(12, []byte("data: x\n\n"), 0, 0, true))
	f.Add([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x05})                                  // single segment, one-byte size
	f.Add([]byte{0x28, 0xB5, 0x2F, 0xFD, 0xE3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) // 4-byte dictionary id, 8-byte size
	f.Add([]byte{0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(b), 32)
		window, err := zstdWindowOf(br)
		if err == nil {
			if window < 1<<10 {
				t.Fatalf("window %d", window)
			}
			if w, err := contentcoding.ZstdWindow(b); err != nil || w != window {
				t.Fatalf("window %d, ZstdWindow %d %v", window, w, err)
			}
		}
		if rest, _ := io.ReadAll(br); !bytes.Equal(rest, b) {
			t.Fatalf("consumed: %d of %d bytes left", len(rest), len(b))
		}
	})
}

// TestClientGoneBeforeTheCodingHeader: a compressed stream whose upstream
// sends its headers and then nothing (not even its coding's header, which
// the decoder must read first: gzip's 10 bytes, zstd's frame header) is cut
// upstream once its client has left, as an uncompressed silent stream is
// (clientWatch), not held until the upstream timeout (10 minutes here).
func TestClientGoneBeforeTheCodingHeader(t *testing.T) {
	w := testWeigher(t)
	body := strings.Replace(budgetBody, `"max_tokens":50`, `"max_tokens":50,"stream":true`, 1)
	for _, enc := range []string{"gzip", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			asked, cut := make(chan struct{}), make(chan struct{})
			url := byteUpstream(t, func(c net.Conn, _ int) bool {
				close(asked)
				c.Write([]byte("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: " + enc + "\r\ntransfer-encoding: chunked\r\n\r\n"))
				// Read returns when llmguard closes the connection; past the
				// test's wait, the deadline ends it, which lets the stream
				// (and the server's shutdown) end.
				c.SetReadDeadline(time.Now().Add(75 * time.Second))
				if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
					close(cut)
				}
				return false
			})
			r := newRig(t, rigOptions{url: url, w: w, timeout: 10 * time.Minute})
			c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-panic\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
			<-asked // (llmguard sends its headers with the first bytes of the body)
			c.Close()
			select {
			case <-cut:
			case <-time.After(60 * time.Second): // generous: clientWatch looks every 500 ms
				t.Fatal("the upstream connection is still open a minute after the client left")
			}
			r.waitLedger(1)
		})
	}
}

// TestClientGoneFromAnAnswerPassedThrough: a non-streamed answer passed
// through unread (over max_response_bytes here) whose upstream stalls
// mid-body is cut upstream once its client has left, and the bytes read
// first go back to max_inflight_response_bytes, as for a stream. Before,
// fasthttp noticed the departure only at its next write, which the
// stalled upstream never allowed: the answer's bytes (up to
// max_response_bytes, 64 MiB by default), the goroutine and the upstream
// connection stayed held until the upstream timeout (10 minutes here; in a
// run of the binary, 2 MiB held after the client left, until then).
func TestClientGoneFromAnAnswerPassedThrough(t *testing.T) {
	w := testWeigher(t)
	asked, cut := make(chan struct{}), make(chan struct{})
	url := byteUpstream(t, func(c net.Conn, _ int) bool {
		close(asked)
		c.Write([]byte("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1048576\r\n\r\n"))
		c.Write(bytes.Repeat([]byte(" "), 256<<10)) // then nothing: see TestClientGoneBeforeTheCodingHeader
		c.SetReadDeadline(time.Now().Add(75 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			close(cut)
		}
		return false
	})
	r := newRig(t, rigOptions{url: url, w: w, timeout: 10 * time.Minute, maxResponse: 64 << 10})
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-panic\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(budgetBody))+"\r\n\r\n"+budgetBody)
	<-asked
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if r.px.ResponseBytesHeld() == 0 {
		t.Fatal("no answer bytes held while the answer passes through")
	}
	c.Close()
	select {
	case <-cut:
	case <-time.After(60 * time.Second): // generous: clientWatch looks every 500 ms
		t.Fatal("the upstream connection is still open a minute after the client left")
	}
	r.released("after the client left")
}
