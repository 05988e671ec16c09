//go:build linux

package proxy

import (
	"crypto/tls"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// A client on a TLS listener (as app.Serve builds it: TLS over the
// write-deadline listener) that goes away is seen by peerClosed through
// tls.Conn's socket, as on a plain listener: without it a streamed
// response to a TLS client would not stop when the client leaves.
func TestPeerClosedThroughTLS(t *testing.T) {
	cert := httptest.NewUnstartedServer(nil) // only for its test certificate
	cert.StartTLS()
	serverTLS := cert.TLS.Clone()
	cert.Close()

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ln := tls.NewListener(WriteTimeoutListener(raw, time.Minute), serverTLS)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		c.(*tls.Conn).Handshake()
		accepted <- c
	}()
	client, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	defer srv.Close()
	if closed, ok := peerClosed(srv); !ok || closed {
		t.Fatalf("client still there: closed=%v ok=%v, want false, true", closed, ok)
	}
	client.Close()
	deadline := time.Now().Add(10 * time.Second) // a failure timeout: loopback delivers the FIN at once
	for {
		closed, ok := peerClosed(srv)
		if !ok {
			t.Fatal("peerClosed cannot see the socket under a TLS connection")
		}
		if closed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the TLS client's close was never seen")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
