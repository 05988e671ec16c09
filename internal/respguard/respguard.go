// Package respguard bounds what a Redis server can make llmguard allocate.
//
// go-redis (v9, internal/proto) allocates what a reply announces before it
// reads it: a bulk string's length (`$N`, `!N`, `=N`) becomes one byte
// slice of N+2 bytes, an aggregate's count (`*N`, `~N`, `>N`, and twice N
// for `%N` and `|N`) one slice of N interfaces, 16 bytes each. A peer on a
// configured Redis address that is not a healthy Redis (a wrong URL, a
// broken proxy, a man in the middle) could end the whole process with a
// single 16-byte reply, `$1099511627776\r\n`: the runtime's out-of-memory
// error is fatal, not a panic any recover catches (adv46).
//
// Conn reads the reply stream as it passes to go-redis and fails the read,
// closing the connection, as soon as a header announces more than Limits
// allow; go-redis then sees a read error, drops the connection and the call
// fails like any other store error (the breaker and each rule's fail-open
// or fail-closed setting handle it). Nothing is buffered or copied: Conn
// looks at the bytes go-redis reads, in place.
//
// The protocol is RESP2 and RESP3 (https://redis.io/docs/latest/develop/reference/protocol-spec/).
package respguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits bounds one connection's replies.
type Limits struct {
	// MaxBulk is the longest bulk string, verbatim string or bulk error a
	// reply may announce, in bytes. 0: DefaultMaxBulk.
	MaxBulk int64
	// MaxPending is the most elements the aggregates open at once may still
	// announce as to come (a map or attribute of N pairs counts 2N), summed
	// over the nesting. 0: DefaultMaxPending.
	MaxPending int64
	// MaxDepth is the deepest nesting of aggregates. 0: DefaultMaxDepth.
	MaxDepth int
}

const (
	// DefaultMaxBulk is Limits.MaxBulk's default: 16 MiB. llmguard's
	// largest bulk reply is INFO's (some 5 KiB: 4,873 bytes from a Redis
	// 7.0 here, INFO all 5,210).
	DefaultMaxBulk = 16 << 20
	// DefaultMaxPending is Limits.MaxPending's default: 1,048,576 elements
	// (go-redis allocates 16 MiB of interfaces for them). llmguard's
	// largest aggregates are pages of a ledger stream and of key scans, at
	// most thousands of elements.
	DefaultMaxPending = 1 << 20
	// DefaultMaxDepth is Limits.MaxDepth's default: 64 levels. Redis's own
	// replies to llmguard nest at most 4 deep (a stream page's entries).
	DefaultMaxDepth = 64
)

// maxHeaderLine is the longest length line ("$", "*" and the rest, digits,
// CRLF) accepted, in bytes: a sign and 19 digits fit.
const maxHeaderLine = 24

// ErrReply is the error a guarded read returns when a reply breaks the
// limits or is not RESP; it wraps the detail.
var ErrReply = errors.New("respguard: Redis reply refused")

// Dialer returns a dialer for redis.Options.Dialer that guards every
// connection next dials with Limits l.
func Dialer(next func(ctx context.Context, network, addr string) (net.Conn, error), l Limits) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c, l), nil
	}
}

// Options guards the connections of a client built from o with the
// default Limits: it wraps o.Dialer, or go-redis's own dialer for o (TCP
// or TLS, o.DialTimeout, go-redis's 5 s when unset) when o has none.
func Options(o *redis.Options) {
	next := o.Dialer
	if next == nil {
		d := *o
		if d.DialTimeout == 0 {
			d.DialTimeout = 5 * time.Second // go-redis's default (Options.init)
		}
		next = redis.NewDialer(&d)
	}
	o.Dialer = Dialer(next, Limits{})
}

// ClusterOptions guards every node client of a cluster client built from
// o with the default Limits, through o.NewClient (each node's options,
// TLS included, as go-redis makes them).
func ClusterOptions(o *redis.ClusterOptions) {
	next := o.NewClient
	if next == nil {
		next = redis.NewClient
	}
	o.NewClient = func(opt *redis.Options) *redis.Client {
		Options(opt)
		return next(opt)
	}
}

// Wrap returns c guarded by Limits l. The result implements syscall.Conn
// when c does, so that go-redis's pool still checks an idle connection's
// socket directly, and exposes c through NetConn.
func Wrap(c net.Conn, l Limits) net.Conn {
	g := &Conn{Conn: c, s: Scanner{lim: l.withDefaults()}}
	if sc, ok := c.(syscall.Conn); ok {
		return &sysConn{Conn: g, sc: sc}
	}
	return g
}

// Conn is a connection whose reads pass through a Scanner.
type Conn struct {
	net.Conn
	s   Scanner
	err error // the first refusal; every later read returns it
}

// Read reads from the connection and scans what it read; on a refusal it
// closes the connection and returns an error wrapping ErrReply (the bytes
// of that read are not handed on).
func (c *Conn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if serr := c.s.Scan(p[:n]); serr != nil {
			c.err = serr
			c.Conn.Close()
			return 0, serr
		}
	}
	return n, err
}

// NetConn returns the guarded connection (as crypto/tls.Conn's NetConn).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// sysConn is a Conn over a connection that implements syscall.Conn.
type sysConn struct {
	*Conn
	sc syscall.Conn
}

func (c *sysConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// Scanner follows a RESP reply stream fed to it in pieces of any size and
// refuses it at the first header that breaks its Limits. The zero value
// has no limits set: use Wrap, or NewScanner.
type Scanner struct {
	lim     Limits
	state   uint8
	typ     byte
	neg     bool
	digits  int   // of the header line read so far
	n       int64 // the header's number so far
	skip    int64 // bytes of a bulk body (and its CRLF) still to come
	stack   []int64
	pending int64 // sum of stack
}

// NewScanner returns a Scanner with Limits l (zero fields: their defaults).
func NewScanner(l Limits) *Scanner { return &Scanner{lim: l.withDefaults()} }

// withDefaults is l with each zero field set to its default.
func (l Limits) withDefaults() Limits {
	if l.MaxBulk <= 0 {
		l.MaxBulk = DefaultMaxBulk
	}
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

const (
	stType   uint8 = iota // the next byte is a reply's type
	stNumber              // reading a length or count line
	stLine                // reading a simple line to its LF
	stBody                // skipping a bulk body
)

// Scan reads the next piece of the stream. Errors wrap ErrReply.
func (s *Scanner) Scan(b []byte) error {
	for i := 0; i < len(b); i++ {
		switch s.state {
		case stType:
			s.typ = b[i]
			switch s.typ {
			case '$', '!', '=', '*', '~', '>', '%', '|':
				s.state, s.neg, s.digits, s.n = stNumber, false, 0, 0
			case '+', '-', ':', '_', ',', '#', '(':
				s.state = stLine
			default:
				return fmt.Errorf("%w: type byte %q is not RESP", ErrReply, s.typ)
			}
		case stNumber:
			c := b[i]
			switch {
			case c >= '0' && c <= '9':
				if s.n > (1<<62)/10 {
					return fmt.Errorf("%w: a %q length past 2^62", ErrReply, s.typ)
				}
				s.n = s.n*10 + int64(c-'0')
			case c == '-' && s.digits == 0 && !s.neg:
				s.neg = true
			case c == '\r':
			case c == '\n':
				if err := s.header(); err != nil {
					return err
				}
				continue
			default:
				return fmt.Errorf("%w: byte %q in a %q length", ErrReply, c, s.typ)
			}
			s.digits++
			if s.digits > maxHeaderLine {
				return fmt.Errorf("%w: a %q length line over %d bytes", ErrReply, s.typ, maxHeaderLine)
			}
		case stLine:
			if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
				i += j
				s.state = stType
				s.done()
			} else {
				i = len(b)
			}
		case stBody:
			rest := int64(len(b) - i)
			if rest < s.skip {
				s.skip -= rest
				i = len(b)
				break
			}
			i += int(s.skip) - 1
			s.skip = 0
			s.state = stType
			s.done()
		}
	}
	return nil
}

// header acts on a complete length or count line.
func (s *Scanner) header() error {
	s.state = stType
	if s.neg { // a RESP2 null ($-1, *-1): no body, no elements
		if s.n != 1 {
			return fmt.Errorf("%w: a %q length of -%d", ErrReply, s.typ, s.n)
		}
		s.done()
		return nil
	}
	switch s.typ {
	case '$', '!', '=':
		if s.n > s.lim.MaxBulk {
			return fmt.Errorf("%w: a bulk reply of %d bytes announced, over %d", ErrReply, s.n, s.lim.MaxBulk)
		}
		s.skip, s.state = s.n+2, stBody
		return nil
	}
	if s.n > s.lim.MaxPending { // checked before a map's pairs double it, which could overflow
		return fmt.Errorf("%w: an aggregate of %d announced, over %d", ErrReply, s.n, s.lim.MaxPending)
	}
	n := s.n
	if s.typ == '%' || s.typ == '|' {
		n *= 2
	}
	if s.typ == '|' {
		// An attribute precedes the reply it annotates: its pairs, then
		// that reply, all as one element of whatever encloses it.
		n++
	}
	if n == 0 {
		s.done()
		return nil
	}
	if s.pending+n > s.lim.MaxPending {
		return fmt.Errorf("%w: an aggregate of %d elements announced with %d pending, over %d", ErrReply, n, s.pending, s.lim.MaxPending)
	}
	if len(s.stack) >= s.lim.MaxDepth {
		return fmt.Errorf("%w: aggregates nested over %d deep", ErrReply, s.lim.MaxDepth)
	}
	s.stack = append(s.stack, n)
	s.pending += n
	return nil
}

// done counts one complete element against the aggregates open.
func (s *Scanner) done() {
	for len(s.stack) > 0 {
		top := len(s.stack) - 1
		s.stack[top]--
		s.pending--
		if s.stack[top] > 0 {
			return
		}
		s.stack = s.stack[:top] // the aggregate is complete: an element of its parent
	}
}

// NewClient is redis.NewClient with o's connections guarded (Options).
// Every Redis client llmguard builds from a configured address is made by
// it or NewClusterClient (TestEveryClientGuarded).
func NewClient(o *redis.Options) *redis.Client {
	Options(o)
	return redis.NewClient(o)
}

// NewClusterClient is redis.NewClusterClient with every node's
// connections guarded (ClusterOptions).
func NewClusterClient(o *redis.ClusterOptions) *redis.ClusterClient {
	ClusterOptions(o)
	return redis.NewClusterClient(o)
}
