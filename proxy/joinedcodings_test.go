package proxy

import (
	"strings"
	"testing"
)

// TestJoinedCodings: the Content-Encoding lines of an answer's final head
// (an interim 1xx head skipped) are joined in order when there are two or
// more; one line, none, or a head not seen whole give nothing.
func TestJoinedCodings(t *testing.T) {
	for _, c := range []struct {
		head, want string
		ok         bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\ncontent-encoding:  br \r\n\r\nbody", "gzip, br", true},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nX: 1\r\nContent-Encoding: gzip, br\r\n\r\n", "gzip, gzip, br", true},
		{"HTTP/1.1 100 Continue\r\nContent-Encoding: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Encoding: br\r\n\r\n", "gzip, br", true},
		{"HTTP/1.1 100 Continue\r\nContent-Encoding: x\r\nContent-Encoding: y\r\n\r\nHTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n", "", false},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", "", false},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Encoding: br\r\n", "", false}, // not whole
		{"HTTP/1.1 200 OK\r\nX-Content-Encoding: gzip\r\nContent-Encoding: br\r\n\r\n", "", false},
		{"", "", false},
		{"HTTP/1.1 200 OK\nContent-Encoding: gzip\nContent-Encoding: br\n\nbody", "gzip, br", true}, // bare LF
		{"HTTP/1.1 103 Early\nContent-Encoding: x\n\nHTTP/1.1 200 OK\r\nContent-Encoding: gzip\nContent-Encoding: br\r\n\n", "gzip, br", true},
		{"HTTP/1.1 200 OK\nContent-Encoding: gzip\nContent-Encoding: br\n", "", false}, // not whole
	} {
		if got, ok := joinedCodings([]byte(c.head)); got != c.want || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.head, got, ok, c.want, c.ok)
		}
	}
}

// FuzzJoinedCodings: joinedCodings never panics, and what it joins holds
// at least two lines' values.
func FuzzJoinedCodings(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Encoding: br\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 103 Early\r\n\r\nHTTP/1.1 200 OK\r\ncontent-encoding:\r\nContent-Encoding:\r\n\r\n"))
	f.Fuzz(func(t *testing.T, head []byte) {
		got, ok := joinedCodings(head)
		if ok && !strings.Contains(got, ", ") {
			t.Fatalf("%q: joined %q from fewer than two lines", head, got)
		}
	})
}
