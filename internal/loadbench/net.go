package loadbench

import (
	"errors"
	"net"
	"time"

	"github.com/llmguard/llmguard/internal/redisprobe"
)

// freePort returns a loopback TCP port that is free now and is not
// Redis's default 6379.
func freePort() (int, error) {
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port, nil
		}
	}
	return 0, errors.New("loadbench: no free port")
}

// ping sends PING over a fresh connection and expects +PONG.
func ping(addr string) error { return redisprobe.Ping(addr, time.Second) }
