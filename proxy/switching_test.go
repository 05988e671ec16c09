package proxy

import (
	"net"
	"testing"
)

// A 101 is seen in the answer's first bytes as the connection reads them,
// split across reads too, before fasthttp pools the connection; another
// status is not.
func TestReadMarksSwitched(t *testing.T) {
	for _, tc := range []struct {
		reads []string
		want  bool
	}{
		{[]string{"HTTP/1.1 101 Switching Protocols\r\n\r\n"}, true},
		{[]string{"HTT", "P/1.1 1", "01 Switching Protocols\r\n\r\n"}, true},
		{[]string{"HTTP/1.0 101 x\r\n\r\n"}, true},
		{[]string{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}, false},
		{[]string{"HTTP/1.1 1010"}, true},                                        // the status code's digits decide; fasthttp refuses the rest
		{[]string{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 S\r\n\r\n"}, false}, // after an interim answer: retryTransport's mark
	} {
		server, client := net.Pipe()
		c := &upstreamConn{Conn: client}
		go func() {
			for _, r := range tc.reads {
				server.Write([]byte(r))
			}
			server.Close()
		}()
		buf := make([]byte, 64)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		client.Close()
		if got := c.switched.Load(); got != tc.want {
			t.Errorf("reads %q: switched %v, want %v", tc.reads, got, tc.want)
		}
	}
}
