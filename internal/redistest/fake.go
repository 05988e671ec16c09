package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Fake serves the Redis protocol on a free loopback port until the test
// ends: each command a client sends is read whole and answered with the
// raw RESP bytes answer returns for its arguments (the command's name
// first), nothing when it returns "" (a server that never replies). It
// returns the address. For a peer no real Redis can play: an old server
// that refuses HELLO, a hostile or frozen one.
func Fake(t testing.TB, answer func(args []string) string) string {
	t.Helper()
	return FakeWith(t, func(args []string, w io.Writer, _ <-chan struct{}) error {
		if reply := answer(args); reply != "" {
			_, err := io.WriteString(w, reply)
			return err
		}
		return nil
	})
}

// FakeWith is Fake whose handler writes each reply itself, on the
// connection w, as slowly or as partially as it likes: a Redis that
// answers late, stalls halfway through a reply or trickles it a byte at a
// time. done is closed when the test ends (the listener and every
// connection are closed then too): a handler that waits must also wait on
// it. An error from serve closes the connection.
func FakeWith(t testing.TB, serve func(args []string, w io.Writer, done <-chan struct{}) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		close(done)
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			select {
			case <-done:
				mu.Unlock()
				conn.Close()
				return
			default:
			}
			conns[conn] = true
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				defer func() {
					conn.Close()
					mu.Lock()
					delete(conns, conn)
					mu.Unlock()
				}()
				rd := bufio.NewReader(conn)
				for {
					args, err := ReadCommand(rd)
					if err != nil {
						return
					}
					if serve(args, conn, done) != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ReadCommand reads one command, a RESP array of 1 to 64 bulk strings of
// at most 64 KiB each, from rd and returns its arguments.
func ReadCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[0] != '*' {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 || n > 64 {
		return nil, fmt.Errorf("array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
		if err != nil || size < 0 || size > 1<<16 {
			return nil, fmt.Errorf("bulk length %q", hdr)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}
