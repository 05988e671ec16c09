//go:build unix

package app

import (
	"fmt"
	"syscall"
	"testing"
)

// refusedAddr returns "127.0.0.1:port" where a connection is refused for
// the whole test: a TCP socket bound to the port and never listening, held
// until the test ends. A port closed after net.Listen is free for any
// other process's next listener (on a shared machine, another test's), so
// a test expecting "connection refused" there could reach a server
// (TestReadyzShowsTheLedger got an HTTP 400 so once); a bound socket keeps
// the port, and the kernel answers a connect to it with RST.
func refusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
