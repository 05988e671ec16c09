//go:build !unix

package app

import (
	"net"
	"testing"
)

// refusedAddr returns an address where nothing listens: a port listened on
// and closed (elsewhere than unix another listener may take it meanwhile).
func refusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
