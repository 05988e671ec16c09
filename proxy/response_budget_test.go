package proxy

import (
	"bufio"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestBufferedAnswersShareABudget: non-streamed answers are held whole (up
// to max_response_bytes each) to read their usage, and nothing bounds how
// many are held at once. Here 32 requests get a 1 MiB JSON answer whose
// last byte the upstream holds back; while they wait, the proxy's heap
// holds about 32 MiB (measured with the Skip removed: 33 MiB), and it grows with the
// number of requests in flight: an upstream that stalls large answers (or
// a flood of large answers) makes llmguard hold max_response_bytes ×
// requests in flight, 64 MiB each by default, plus as much again when the
// answer is compressed (tapView decodes a copy). The fix is a shared
// budget for held answers, as max_inflight_body_bytes is for request
// bodies: an answer that finds no room is streamed through unread and
// keeps its reservation, as one over max_response_bytes already is (the
// budget's bytes must be held until fasthttp has written the answer, not
// only until Handle returns). Skipped until that budget exists.
func TestBufferedAnswersShareABudget(t *testing.T) {
	t.Skip("no shared budget for held upstream answers yet: see the doc comment (finding of the adversarial pass)")
	const n, size = 32, 1 << 20
	body := `{"usage":{"prompt_tokens":1,"completion_tokens":1},"pad":"` + strings.Repeat("x", size-64) + `"}`
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	var stalled sync.WaitGroup
	stalled.Add(n)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				req.Body.Close()
				c.Write([]byte("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + itoa(len(body)) + "\r\n\r\n" + body[:len(body)-1]))
				stalled.Done()
				<-release
				c.Write([]byte(body[len(body)-1:]))
			}(c)
		}
	}()
	w := testWeigher(t)
	r := newRig(t, rigOptions{url: "http://" + ln.Addr().String(), w: w, maxResponse: 2 * size})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			r.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
		}()
	}
	stalled.Wait()
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	close(release)
	done.Wait()
	held := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap held with %d answers of %d bytes stalled: %d MiB", n, size, held>>20)
	// A budget of 8 answers' size (the test's own choice) must hold.
	if held > 8*size {
		t.Errorf("held %d MiB for %d stalled answers, want at most %d MiB", held>>20, n, 8*size>>20)
	}
}
