package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/weigher"
)

// The answer budget's tests run through real sockets: a client, the proxy
// behind a fasthttp server, and a raw upstream (byteUpstream) that writes
// whatever bytes a test gives it.

// budgetBody is the request of these tests: its reservation is its input
// and 50 output tokens, the answers' usage 1 + 1 tokens.
const budgetBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`

// byteUpstream serves each request on a connection with serve(conn, n), n
// counting requests from 0; it keeps the connection while serve returns
// true.
func byteUpstream(t *testing.T, serve func(c net.Conn, n int) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if !serve(c, int(n.Add(1)-1)) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// jsonAnswer is a chat completion of about size bytes reporting 1 prompt
// and 1 completion token, its usage first.
func jsonAnswer(size int) []byte {
	head := `{"usage":{"prompt_tokens":1,"completion_tokens":1},"pad":"`
	return []byte(head + strings.Repeat("x", max(0, size-len(head)-2)) + `"}`)
}

// unreadCharge is what a jsonAnswer relayed unread (passingCount) to req
// is charged, in tokens: its input estimate, and as output its bytes
// counted as text (its usage of 1 output token is contradicted by its
// bytes: weigher.OutputCheckBytes), at least the reservation of 50. The
// count is of the answer in passingPiece pieces; the proxy counts it in
// the pieces it reads, whose ends may split a token differently: compare
// with nearCharge.
func unreadCharge(w *weigher.Weigher, req string, answer []byte) int64 {
	text := pendingText{count: func(s string) int64 { return w.CountText("gpt-4o-mini", s) }, countAt: tapCountEvery}
	for b := answer; len(b) > 0; {
		n := min(len(b), passingPiece)
		text.add(string(b[:n]))
		b = b[n:]
	}
	return w.Chat([]byte(req)).InputTokens + max(50, text.tokens())
}

// nearCharge reports whether got is want within 1% (a count in other
// pieces: unreadCharge).
func nearCharge(got, want int64) bool { return got >= want-want/100 && got <= want+want/100 }

// response is the HTTP/1.1 answer carrying body, with more header lines.
func response(body []byte, headers ...string) []byte {
	h := "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + itoa(len(body)) + "\r\n"
	for _, l := range headers {
		h += l + "\r\n"
	}
	return append([]byte(h+"\r\n"), body...)
}

// gzipped is b compressed with gzip.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// metric is the value of the rig's series name{reason} (a gauge when
// reason is ""), 0 when it has none.
func (r *panicRig) metric(name, reason string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if reason == "" {
				return m.GetGauge().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// released waits until the proxy holds no answer bytes (fasthttp gives
// them back right after the write, on its own goroutine, which may run
// after the client has read the answer) and checks that the gauge agrees.
// It fails when bytes are still held after a generous wait: a leak, not
// a slow machine.
func (r *panicRig) released(what string) {
	r.t.Helper()
	for i := 0; r.px.ResponseBytesHeld() != 0; i++ {
		if i == 2000 {
			r.t.Fatalf("%s: %d answer bytes still held", what, r.px.ResponseBytesHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if g := r.metric("llmguard_response_body_bytes_in_flight", ""); g != 0 {
		r.t.Errorf("%s: gauge response_body_bytes_in_flight %v, want 0", what, g)
	}
}

// TestAnswerWithoutRoomPassesThroughWhole: an answer that finds no room in
// the budget (none at all, or none past its first chunk) reaches the client
// whole, byte for byte, and is charged at least its reservation (its pad
// counted as text, as the usage of 1 output token beside 200 KiB is not
// taken at its word: unreadCharge); counted as unread for
// the budget; its bytes are given back once it is written. An answer that
// fits is charged its usage (the control).
func TestAnswerWithoutRoomPassesThroughWhole(t *testing.T) {
	w := testWeigher(t)
	est := w.Chat([]byte(budgetBody))
	reserved, reported := est.InputTokens+50, int64(2)
	big := jsonAnswer(200 << 10)
	small := jsonAnswer(1 << 10)
	for _, tc := range []struct {
		name   string
		budget int64
		answer []byte
		unread bool
	}{
		{name: "room", budget: 1 << 20, answer: big},
		{name: "no room for a chunk", budget: readChunk - 1, answer: big, unread: true},
		{name: "no room past the first chunk", budget: 32 << 10, answer: big, unread: true},
		{name: "a small answer in a small budget", budget: 32 << 10, answer: small},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := byteUpstream(t, func(c net.Conn, _ int) bool { c.Write(response(tc.answer)); return true })
			r := newRig(t, rigOptions{url: url, w: w, answerBudget: tc.budget})
			before := r.remaining()
			status, body, err := r.post(budgetBody)
			if err != nil || status != 200 || body != string(tc.answer) {
				t.Fatalf("status %d, %d bytes of %d (%v): the answer must reach the client whole", status, len(body), len(tc.answer), err)
			}
			charged, want := before-r.remaining(), reported
			if tc.unread {
				want = unreadCharge(w, budgetBody, tc.answer)
			}
			if charged != want && !(tc.unread && nearCharge(charged, want)) {
				t.Errorf("charged %d tokens, want %d (reservation %d, reported %d)", charged, want, reserved, reported)
			}
			if n, want := r.metric("llmguard_responses_unread_total", unreadBudget), map[bool]float64{true: 1}[tc.unread]; n != want {
				t.Errorf("responses_unread_total{budget} %v, want %v", n, want)
			}
			r.released(tc.name)
		})
	}
}

// TestAnswerOverMaxResponseCounted: an answer over max_response_bytes is
// relayed whole, is charged at least its reservation (unreadCharge), is
// counted too_large, and gives its first chunk back once written.
func TestAnswerOverMaxResponseCounted(t *testing.T) {
	w := testWeigher(t)
	answer := jsonAnswer(100 << 10)
	url := byteUpstream(t, func(c net.Conn, _ int) bool { c.Write(response(answer)); return true })
	r := newRig(t, rigOptions{url: url, w: w, maxResponse: 40 << 10})
	before := r.remaining()
	if status, body, err := r.post(budgetBody); err != nil || status != 200 || body != string(answer) {
		t.Fatalf("status %d, %d bytes (%v)", status, len(body), err)
	}
	if charged, want := before-r.remaining(), unreadCharge(w, budgetBody, answer); !nearCharge(charged, want) {
		t.Errorf("charged %d, want %d", charged, want)
	}
	if n := r.metric("llmguard_responses_unread_total", unreadTooLarge); n != 1 {
		t.Errorf("responses_unread_total{too_large} %v, want 1", n)
	}
	r.released("too large")
}

// TestCompressedAnswerDecodedWithinTheBudget: the decoded copy of a
// compressed answer is taken from the budget: with room, its usage is read;
// without, the answer still reaches the client as sent, its reservation
// kept, counted decode_budget.
func TestCompressedAnswerDecodedWithinTheBudget(t *testing.T) {
	w := testWeigher(t)
	plain := jsonAnswer(300 << 10) // about 1 KiB compressed
	coded := gzipped(plain)
	for _, tc := range []struct {
		name   string
		budget int64
		unread bool
	}{
		{name: "room", budget: 1 << 20},
		{name: "no room to decode", budget: 64 << 10, unread: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := byteUpstream(t, func(c net.Conn, _ int) bool { c.Write(response(coded, "content-encoding: gzip")); return true })
			r := newRig(t, rigOptions{url: url, w: w, answerBudget: tc.budget})
			before := r.remaining()
			req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(budgetBody))
			req.Header.Set("Authorization", "Bearer sk-panic")
			resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, coded) {
				t.Fatalf("status %d, %d bytes of %d compressed (%v): the answer must reach the client as sent", resp.StatusCode, len(got), len(coded), err)
			}
			charged, want := before-r.remaining(), int64(2)
			if tc.unread {
				want = w.Chat([]byte(budgetBody)).InputTokens + 50
			}
			if charged != want {
				t.Errorf("charged %d, want %d", charged, want)
			}
			if n, want := r.metric("llmguard_responses_unread_total", unreadDecodeBudget), map[bool]float64{true: 1}[tc.unread]; n != want {
				t.Errorf("responses_unread_total{decode_budget} %v, want %v", n, want)
			}
			r.released(tc.name)
		})
	}
}

// TestAnswerBudgetReturnsToZero: after many requests of every kind of
// answer — small, grown past the first chunk, compressed, over
// max_response_bytes, without room, cut by the upstream, left by the
// client — the budget and its gauge are back at zero, and every answer
// that fit was read.
func TestAnswerBudgetReturnsToZero(t *testing.T) {
	small, grown, large := jsonAnswer(900), jsonAnswer(150<<10), jsonAnswer(600<<10)
	coded := gzipped(jsonAnswer(200 << 10))
	url := byteUpstream(t, func(c net.Conn, n int) bool {
		switch n % 6 {
		case 0:
			c.Write(response(small))
		case 1:
			c.Write(response(grown))
		case 2:
			c.Write(response(coded, "content-encoding: gzip"))
		case 3:
			c.Write(response(large)) // over max_response_bytes
		case 4:
			// Cut: the proxy answers 502. Not JSON, so that the cut body
			// is not charged as text (lostAnswer): a 75 KiB cut JSON
			// answer is, and 120 of them empty the rig's bucket.
			all := response(bytes.Repeat([]byte("x"), 150<<10))
			c.Write(all[:len(all)/2])
			return false
		case 5:
			c.Write(response(grown))
		}
		return true
	})
	// The burst pays for every answer relayed unread charged its pad as
	// text (some 77,000 tokens each; unreadCharge).
	r := newRig(t, rigOptions{url: url, w: testWeigher(t), maxResponse: 512 << 10, answerBudget: 1 << 20, burst: 1 << 30})
	const requests, clients = 120, 8
	var wg sync.WaitGroup
	var next, ok, cut, left atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= requests; i = next.Add(1) {
				if i%7 == 0 { // a client that leaves after the status line
					c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
					if err != nil {
						t.Error(err)
						return
					}
					fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-panic\r\nContent-Length: %d\r\n\r\n%s", len(budgetBody), budgetBody)
					bufio.NewReader(c).ReadString('\n')
					c.Close()
					left.Add(1)
					continue
				}
				switch status, _, _ := r.post(budgetBody); status {
				case 200:
					ok.Add(1)
				case 502:
					cut.Add(1)
				default:
					t.Errorf("status %d", status)
				}
			}
		}()
	}
	wg.Wait()
	r.released("after all requests")
	unread := r.metric("llmguard_responses_unread_total", unreadTooLarge) + r.metric("llmguard_responses_unread_total", unreadBudget)
	if ok.Load() == 0 || cut.Load() == 0 || left.Load() == 0 || unread == 0 {
		t.Errorf("the mix did not run: %d answered, %d cut, %d left, %v unread", ok.Load(), cut.Load(), left.Load(), unread)
	}
}

// FuzzHeldAnswerRead reads data through heldAnswer.readFrom in reads of
// uneven sizes, under a fuzzed budget, limit and declared size: what it
// holds is always a prefix of data, at most limit bytes, the budget never
// exceeds its max and counts exactly the buffer's capacity; a read that
// reports no room holds less than the whole; release gives every byte back.
func FuzzHeldAnswerRead(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":1}}`), uint32(1<<20), uint32(1<<20), int32(-1), uint8(7))
	f.Add(bytes.Repeat([]byte("x"), 40<<10), uint32(64<<10), uint32(1<<20), int32(40<<10), uint8(0))
	f.Add(bytes.Repeat([]byte("y"), 70<<10), uint32(48<<10), uint32(50<<10), int32(-1), uint8(255))
	f.Add(bytes.Repeat([]byte("y"), 70<<10), uint32(1<<20), uint32(50_000), int32(-1), uint8(255))
	f.Add(bytes.Repeat([]byte("z"), readChunk), uint32(1<<20), uint32(1<<20), int32(readChunk), uint8(3))
	f.Add([]byte{}, uint32(0), uint32(10), int32(0), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, budget, limit uint32, size int32, step uint8) {
		b, lim := int64(budget%(4<<20)), int(limit%(2<<20))+1
		sz := int(size)
		if sz >= 0 && sz != len(data) {
			sz = -1 // a declared size is the stream's (fasthttp checks the framing)
		}
		p := budgetOnly(b)
		h := heldAnswer{p: p}
		full, err := h.readFrom(&unevenReader{data: data, step: int(step)}, lim, sz, nil)
		if err != nil {
			t.Fatalf("error %v", err)
		}
		got := h.buf
		if len(got) > lim || !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("held %d bytes, not a prefix of the %d within %d", len(got), len(data), lim)
		}
		if !full && len(got) != min(len(data), lim) {
			t.Fatalf("not full, but %d of %d bytes read (limit %d)", len(got), len(data), lim)
		}
		if held := p.ResponseBytesHeld(); held != int64(cap(h.buf)) || held > b {
			t.Fatalf("budget holds %d, buffer capacity %d, max %d", held, cap(h.buf), b)
		}
		h.release()
		if held := p.ResponseBytesHeld(); held != 0 {
			t.Fatalf("%d bytes held after release", held)
		}
	})
}

// unevenReader returns data in reads of step+1 bytes at most, every third
// one empty, then io.EOF with the last bytes.
type unevenReader struct {
	data []byte
	step int
	n    int
}

func (r *unevenReader) Read(p []byte) (int, error) {
	r.n++
	if r.n%3 == 0 && len(r.data) > 0 {
		return 0, nil
	}
	n := copy(p, r.data[:min(len(r.data), r.step+1)])
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, io.EOF
	}
	return n, nil
}
