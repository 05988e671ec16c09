// Package redisprobe checks that a redis-server answers, without a client
// library: what the test harness and the load benchmark wait for after
// starting one.
package redisprobe

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"time"
)

// Ping sends PING to the redis-server at addr (host:port) over a fresh
// connection and expects +PONG, within timeout for the connection and
// again for the answer. It returns the dial or I/O error, or the server's
// answer as the error when it is not +PONG (for example a -LOADING reply).
func Ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}
