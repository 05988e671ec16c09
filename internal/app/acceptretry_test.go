package app

import (
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

// emfileListener fails its first n accepts as a process out of file
// descriptors does (accept4: too many open files), then accepts from the
// real listener it wraps.
type emfileListener struct {
	net.Listener
	left atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.left.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// The proxy keeps accepting after accepts failed for want of file
// descriptors: fasthttp's Serve returns on such an error, and the proxy
// listener stopped for good (its backlog never read) while /healthz, on
// the admin listener, still said ok. Reproduced on a live process: 19,990
// connections that each sent half a request's headers used up its 20,000
// descriptors; once they closed, every request hung. (Adversarial pass
// h6, 2026-12-03.)
func TestProxyAcceptsAfterFileDescriptorExhaustion(t *testing.T) {
	mock := startMock(t)
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, slowTPM)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(cfg, discardLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var failing *emfileListener
	h := serveApp(t, mock, a, func(ln net.Listener) net.Listener {
		failing = &emfileListener{Listener: ln}
		failing.left.Store(3)
		return failing
	})
	// The client's timeout only ends a failing run: the proxy that
	// stopped accepting never answers.
	c := &http.Client{Timeout: 30 * time.Second}
	req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(hiBody))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("after %d failed accepts: %v", 3-failing.left.Load(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if failing.left.Load() >= 0 {
		t.Fatalf("the listener failed %d accepts, want 3", 3-failing.left.Load())
	}
}
