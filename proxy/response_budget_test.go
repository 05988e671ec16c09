package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBufferedAnswersShareABudget: non-streamed answers are held whole (up
// to max_response_bytes each) to read their usage; without a bound on how
// many are held at once, 32 requests whose 1 MiB JSON answers stall on
// their last byte held 33 MiB of heap (measured before the budget), and an
// upstream that stalls large answers (or floods them) made llmguard hold
// max_response_bytes × requests in flight. With the shared budget
// (max_inflight_response_bytes, here 4 answers' size) the answers held at
// once stay within it: the heap measured while all 32 stall stays below 8
// answers' size (the test's own bound: the budget plus what each
// connection costs anyway), the budget's gauge within the budget; the
// answers that found no room are streamed through unread, and every client
// gets its whole answer. Measured in bytes, not time: the test waits for
// the upstream to have written all but the last byte of every answer.
// Its answers relayed unread are counted as they pass too, their usage
// first (unread37: a usage is checked against the text after it).
func TestBufferedAnswersShareABudget(t *testing.T) {
	const size = 1 << 20
	answersShareABudget(t, `{"usage":{"prompt_tokens":1,"completion_tokens":1},"pad":"`+strings.Repeat("x", size-64)+`"}`, true)
}

// TestCountedAnswersShareABudget: the answers relayed unread for want of
// room are counted as they pass (passingCount) when no usage comes first,
// each count borrowing the weigher's pooled scratch (a byte-pair merge of
// a run of letters as long as the text counted at once). Those scratches
// went back to their pools whatever their size and stayed there until two
// collections: with 32 such answers stalled the heap held 7 to 19 MiB
// against the 8 answers' bound of TestBufferedAnswersShareABudget (tier33).
// A scratch grown past what an ordinary text needs is now dropped, not
// pooled.
func TestCountedAnswersShareABudget(t *testing.T) {
	const size = 1 << 20
	answersShareABudget(t, `{"pad":"`+strings.Repeat("x", size-16)+`","usage":{"prompt_tokens":1,"completion_tokens":1}}`, true)
}

// answersShareABudget runs TestBufferedAnswersShareABudget's 32 stalled
// requests, each answered with body (about 1 MiB), counted as it passes
// when counted is set. Under the race detector, whose counts of 32 MiB of
// text on a loaded machine took minutes, the heap is measured without
// waiting for them, and not checked for counted answers (the counts in
// progress allocate).
func answersShareABudget(t *testing.T, body string, counted bool) {
	const n, size = 32, 1 << 20
	full := []byte("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + itoa(len(body)) + "\r\n\r\n" + body) // shared: no copy per connection
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
				c.Write(full[:len(full)-1])
				stalled.Done()
				<-release
				c.Write(full[len(full)-1:])
			}(c)
		}
	}()
	w := testWeigher(t)
	r := newRig(t, rigOptions{url: "http://" + ln.Addr().String(), w: w, maxResponse: 2 * size, answerBudget: 4 * size,
		timeout: 2 * time.Minute}) // counted under the race detector, an answer took over the default 10 s
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var done sync.WaitGroup
	var whole, nearly atomic.Int64
	for range n {
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
			req.Header.Set("Authorization", "Bearer sk-panic")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			// Read and dropped: the client holds no answer in memory.
			var got int64
			buf := make([]byte, 32<<10)
			for {
				k, err := resp.Body.Read(buf)
				if got < int64(len(body)-1) && got+int64(k) >= int64(len(body)-1) {
					nearly.Add(1) // all but the last byte: relayed (and counted) as far as it goes
				}
				got += int64(k)
				if err != nil {
					if err == io.EOF && got == int64(len(body)) && resp.StatusCode == 200 {
						whole.Add(1)
					}
					break
				}
			}
		}()
	}
	stalled.Wait()
	// Measured once every answer relayed unread has reached its client
	// all but its last byte, and so has been counted as far as it goes:
	// the heap then holds what the answers keep while they stall, not
	// what counting them allocates on the way. The budget holds at most
	// 4 answers whole (their clients get nothing before the end).
	for wait := 0; !raceEnabled && (float64(nearly.Load()) < r.metric("llmguard_responses_unread_total", unreadBudget) ||
		r.metric("llmguard_responses_unread_total", unreadBudget) < n-4); wait++ {
		if wait == 6000 {
			t.Fatalf("%d clients got all but the last byte, %v answers relayed unread", nearly.Load(), r.metric("llmguard_responses_unread_total", unreadBudget))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	gauge := r.px.ResponseBytesHeld()
	close(release)
	done.Wait()
	held := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap held with %d answers of %d bytes stalled: %d MiB; budget gauge %d MiB; %v relayed unread for want of room",
		n, size, held>>20, gauge>>20, r.metric("llmguard_responses_unread_total", unreadBudget))
	if held > 8*size && !(raceEnabled && counted) {
		t.Errorf("held %d MiB for %d stalled answers, want at most %d MiB", held>>20, n, 8*size>>20)
	}
	if gauge > 4*size {
		t.Errorf("the budget's gauge showed %d bytes held, over the budget's %d", gauge, 4*size)
	}
	if whole.Load() != n {
		t.Errorf("%d of %d clients got their whole answer", whole.Load(), n)
	}
	if r.metric("llmguard_responses_unread_total", unreadBudget) == 0 {
		t.Error("no answer was relayed unread for want of room: the budget was not reached")
	}
	r.released("after the answers")
}
