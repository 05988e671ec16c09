package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of an answer held while it is written need a client whose
// socket takes in little: its receive buffer is set with setsockopt
// before the connection is made (Linux).

// slowClient sends budgetBody to the rig over a connection with a small
// receive buffer (4 KiB, set before connecting) and reads only the answer's status line: the rest waits
// in the socket until the test reads or closes it.
func slowClient(t *testing.T, r *panicRig) (net.Conn, *bufio.Reader) {
	t.Helper()
	// The receive buffer is set before the connection is made: shrunk
	// after, below the window already offered, Linux prunes what arrives
	// and the sender backs off for seconds.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: llmguard\r\nAuthorization: Bearer sk-panic\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(budgetBody), budgetBody)
	br := bufio.NewReaderSize(c, 4096)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("status line %q: %v", line, err)
	}
	return c, br
}

// slowAnswer is the size of the answer a slow client does not read: more
// than the kernel's socket buffers on both sides can take in (Linux's
// tcp_wmem allows 4 MiB by default), so the proxy's write blocks.
const slowAnswer = 24 << 20

// slowUpstreamTimeout is the rig's upstream timeout in these tests: reading
// and scanning slowAnswer's 24 MiB under -race on a loaded machine took
// 13–15 s, past the rig's default of 10 s, and the answer came back 502.
// It bounds a failing run, nothing else.
const slowUpstreamTimeout = 2 * time.Minute

// TestAnswerHeldUntilWritten: a client that reads slowly holds the
// answer's bytes after the handler has returned and the exchange settled,
// until the whole answer has been written; then they are given back.
func TestAnswerHeldUntilWritten(t *testing.T) {
	answer := jsonAnswer(slowAnswer)
	url := byteUpstream(t, func(c net.Conn, _ int) bool { c.Write(response(answer)); return true })
	r := newRig(t, rigOptions{url: url, w: testWeigher(t), timeout: slowUpstreamTimeout})
	_, br := slowClient(t, r) // the status line arrived: the handler has returned
	if n := r.ledger.count(); n != 1 {
		t.Fatalf("%d ledger records, want 1: the exchange settles before the answer is written", n)
	}
	if held := r.px.ResponseBytesHeld(); held < slowAnswer {
		t.Fatalf("%d bytes held while the answer is being written, want at least its %d", held, slowAnswer)
	}
	if g := r.metric("llmguard_response_body_bytes_in_flight", ""); g < slowAnswer {
		t.Errorf("gauge response_body_bytes_in_flight %v while the answer is written", g)
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader("HTTP/1.1 200 OK\r\n"), br)), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != int64(len(answer)) {
		t.Fatalf("read %d of %d bytes: %v", n, len(answer), err)
	}
	r.released("after the write")
}

// TestAnswerReleasedWhenClientLeaves: a client that leaves while its
// answer is being written gives the answer's bytes back.
func TestAnswerReleasedWhenClientLeaves(t *testing.T) {
	answer := jsonAnswer(slowAnswer)
	url := byteUpstream(t, func(c net.Conn, _ int) bool { c.Write(response(answer)); return true })
	r := newRig(t, rigOptions{url: url, w: testWeigher(t), timeout: slowUpstreamTimeout})
	c, _ := slowClient(t, r)
	if held := r.px.ResponseBytesHeld(); held < slowAnswer {
		t.Fatalf("%d bytes held while the answer is being written, want at least its %d", held, slowAnswer)
	}
	c.Close()
	r.released("after the client left")
	// The proxy still serves, with its whole budget.
	if status, _, err := r.post(budgetBody); err != nil || status != 200 {
		t.Fatalf("next request: %d %v", status, err)
	}
	r.released("after the next request")
}
