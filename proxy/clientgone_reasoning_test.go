package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/ledger"
)

// goneAfter runs one chat stream through a rig whose upstream sends events
// (SSE data lines, in chunks) and then waits for llmguard to cut it; the
// client reads until a line holding marker and hangs up. It returns the
// tokens the request spent from the bucket and its ledger record, once
// the upstream has been cut and the request settled.
func goneAfter(t *testing.T, body, marker string, events ...string) (spent int64, rec ledger.Record) {
	t.Helper()
	w := testWeigher(t)
	asked, cut := make(chan struct{}), make(chan struct{})
	url := byteUpstream(t, func(c net.Conn, _ int) bool {
		close(asked)
		io.WriteString(c, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
		for _, e := range events {
			s := "data: " + e + "\n\n"
			io.WriteString(c, strconv.FormatInt(int64(len(s)), 16)+"\r\n"+s+"\r\n")
		}
		c.SetReadDeadline(time.Now().Add(75 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			close(cut)
		}
		return false
	})
	r := newRig(t, rigOptions{url: url, w: w, timeout: 10 * time.Minute})
	before := r.remaining()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-panic\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
	<-asked
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, marker) {
			break
		}
	}
	c.Close()
	select {
	case <-cut:
	case <-time.After(60 * time.Second): // only ends a hung run
		t.Fatal("upstream not cut")
	}
	r.waitLedger(1)
	return before - r.remaining(), r.ledger.records[0]
}

// TestClientGoneChargedTheOutputReservation: a reasoning model thinks
// before its first visible token, and chat streams never show those
// reasoning tokens; the upstream bills them whether or not the client
// stays. A client that reads the first word and hangs up is charged its
// output reservation (30,000 here), not the few tokens it saw: the
// upstream had reasoned 20,000 tokens before that word.
func TestClientGoneChargedTheOutputReservation(t *testing.T) {
	spent, rec := goneAfter(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"prove it"}],"max_completion_tokens":30000,"reasoning_effort":"high","stream":true}`,
		`"Hi"`,
		`{"id":"c","object":"chat.completion.chunk","model":"o3","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		// ... 20,000 reasoning tokens later:
		`{"id":"c","object":"chat.completion.chunk","model":"o3","choices":[{"index":0,"delta":{"content":"Hi"}}]}`)
	if spent < 30000 || rec.OutputTokens < 30000 {
		t.Errorf("client gone after hidden reasoning: bucket charged %d tokens, ledger output %d; want at least the 30,000-token output reservation (the upstream bills over 20,000 unseen)", spent, rec.OutputTokens)
	}
}

// TestClientGoneAfterInBandErrorRefunded: an upstream that ends an answer
// with an in-band error before any output (OpenAI's error chunk) bills
// nothing for it; a client that reads the error and hangs up before the
// upstream's end is read is refunded, not charged its output reservation.
func TestClientGoneAfterInBandErrorRefunded(t *testing.T) {
	spent, _ := goneAfter(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":30000,"stream":true}`,
		`"error"`,
		`{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`)
	if spent != 0 {
		t.Errorf("an in-band error before any output, client gone: charged %d tokens, want the refund (0)", spent)
	}
}
