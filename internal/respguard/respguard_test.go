package respguard

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// honest are reply streams a Redis sends llmguard, RESP2 and RESP3, each
// a run of whole replies.
var honest = []string{
	"+OK\r\n",
	"-ERR unknown command\r\n",
	":42\r\n:-7\r\n",
	"$5\r\nhello\r\n$0\r\n\r\n$-1\r\n",
	"$12\r\nline\r\nwith\r\n\r\n", // a body holding CRLFs
	"*3\r\n:1\r\n$3\r\nabc\r\n*2\r\n+a\r\n_\r\n",
	"*-1\r\n*0\r\n",
	"%2\r\n+k\r\n:1\r\n+m\r\n*1\r\n,3.5\r\n",
	"~2\r\n#t\r\n(12345678901234567890\r\n",
	">3\r\n+message\r\n+chan\r\n$1\r\nx\r\n",
	"=15\r\ntxt:Some string\r\n!9\r\nSYNTAX ok\r\n",
	"|1\r\n+ttl\r\n:3600\r\n$2\r\nok\r\n",
	// a stream page as XRANGE returns it: entries of id and field pairs
	"*2\r\n*2\r\n$3\r\n1-0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\na\r\n$1\r\n3\r\n",
}

// feed scans stream in pieces of size n and returns the first error.
func feed(s *Scanner, stream string, n int) error {
	for i := 0; i < len(stream); i += n {
		if err := s.Scan([]byte(stream[i:min(len(stream), i+n)])); err != nil {
			return err
		}
	}
	return nil
}

func TestHonestRepliesPass(t *testing.T) {
	for _, stream := range honest {
		for n := 1; n <= len(stream); n++ {
			s := NewScanner(Limits{})
			if err := feed(s, stream, n); err != nil {
				t.Fatalf("%q in pieces of %d: %v", stream, n, err)
			}
			if s.state != stType || len(s.stack) != 0 || s.pending != 0 {
				t.Fatalf("%q in pieces of %d: ends in state %d with %d aggregates open (%d pending), want a reply boundary",
					stream, n, s.state, len(s.stack), s.pending)
			}
		}
	}
}

func TestBombsRefused(t *testing.T) {
	deep := strings.Repeat("*2\r\n", DefaultMaxDepth+1)
	wide := strings.Repeat("*1000\r\n", 1100) // 1,100,000 elements pending; depth set high below
	for _, tc := range []struct {
		name, stream string
		lim          Limits
	}{
		{"a 1 TiB bulk string", "$1099511627776\r\n", Limits{}},
		{"a bulk one byte over", "$16777217\r\n", Limits{}},
		{"a verbatim string over", "=16777217\r\n", Limits{}},
		{"a bulk error over", "!16777217\r\n", Limits{}},
		{"an array of 2^40", "*1099511627776\r\n", Limits{}},
		{"a map whose pairs are over", "%600000\r\n", Limits{}},
		{"a map whose doubled pairs would overflow int64", "%4611686018427387904\r\n", Limits{}},
		{"an attribute whose doubled pairs would overflow int64", "|4611686018427387904\r\n", Limits{}},
		{"nested past the depth", deep, Limits{}},
		{"nested past the pending elements", wide, Limits{MaxDepth: 10000}},
		{"a length past 2^62", "$99999999999999999999\r\n", Limits{MaxBulk: 1 << 62}},
		{"a long length line", "*" + strings.Repeat("0", 30) + "1\r\n", Limits{}},
		{"a negative length other than -1", "$-2\r\n", Limits{}},
		{"not RESP", "HTTP/1.1 400 Bad Request\r\n", Limits{}},
		{"a streamed string", "$?\r\n;4\r\nabcd\r\n;0\r\n", Limits{}},
		{"after an honest reply", "+OK\r\n$1099511627776\r\n", Limits{}},
		{"inside an array", "*2\r\n:1\r\n$1099511627776\r\n", Limits{}},
	} {
		for _, n := range []int{1, 3, len(tc.stream)} {
			err := feed(NewScanner(tc.lim), tc.stream, n)
			if !errors.Is(err, ErrReply) {
				t.Errorf("%s, in pieces of %d: %v, want ErrReply", tc.name, n, err)
			}
		}
	}
	// At the limits exactly: passes.
	for _, stream := range []string{"$16777216\r\n", "*1048576\r\n", "%524288\r\n", strings.Repeat("*2\r\n", DefaultMaxDepth)} {
		if err := feed(NewScanner(Limits{}), stream, len(stream)); err != nil {
			t.Errorf("%.20q at its limit: %v", stream, err)
		}
	}
}

// fakeRedis answers HELLO as a Redis before 6 does (unknown command, so
// go-redis goes on in RESP2) and every other command with reply.
func fakeRedis(t *testing.T, reply string) string {
	return redistest.Fake(t, func(args []string) string {
		if strings.EqualFold(args[0], "HELLO") {
			return "-ERR unknown command 'HELLO'\r\n"
		}
		return reply
	})
}

// TestClientRefusesBomb sends a go-redis client, guarded as llmguard's
// are, a reply announcing 64 MiB of bulk string (over the 16 MiB limit;
// large enough to show, small enough that an unguarded client survives the
// allocation in a mutation check) and then nothing: the guarded call fails
// with ErrReply at once, not after the 64 MiB allocation waits out its
// read timeout.
func TestClientRefusesBomb(t *testing.T) {
	addr := fakeRedis(t, "$67108864\r\n")
	o := &redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1}
	Options(o)
	c := redis.NewClient(o)
	defer c.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := c.Get(context.Background(), "k").Err()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrReply) {
		t.Fatalf("GET answered a 64 MiB bulk announcement: %v, want ErrReply", err)
	}
	// The announcement never reaches go-redis, so its 64 MiB are never
	// allocated (this test's own allocations are some KiB).
	if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
		t.Fatalf("the refused call allocated %d bytes: the announced bulk reached go-redis", d)
	}
}

// TestClientHonestRepliesPass runs a guarded client against a fake Redis
// answering an honest reply: the value arrives whole.
func TestClientHonestRepliesPass(t *testing.T) {
	addr := fakeRedis(t, "$11\r\nhello world\r\n")
	o := &redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true}
	Options(o)
	c := redis.NewClient(o)
	defer c.Close()
	v, err := c.Get(context.Background(), "k").Result()
	if err != nil || v != "hello world" {
		t.Fatalf("GET = %q, %v; want \"hello world\"", v, err)
	}
}

func TestClusterOptionsGuardsNodes(t *testing.T) {
	o := &redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}
	ClusterOptions(o)
	var seen *redis.Options
	inner := o.NewClient
	o.NewClient = func(opt *redis.Options) *redis.Client { seen = opt; return inner(opt) }
	c := o.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if seen == nil || seen.Dialer == nil {
		t.Fatal("a cluster node's client was made without a guarded dialer")
	}
	if _, err := seen.Dialer(context.Background(), "tcp", fakeRedis(t, "+OK\r\n")); err != nil {
		t.Fatal(err)
	}
}

// TestWrapKeepsSyscallConn: go-redis's pool checks an idle connection
// through syscall.Conn on the connection it holds; the guard must not
// hide it.
func TestWrapKeepsSyscallConn(t *testing.T) {
	addr := fakeRedis(t, "+OK\r\n")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := Wrap(c, Limits{})
	if _, ok := g.(syscall.Conn); !ok {
		t.Fatal("a guarded TCP connection does not implement syscall.Conn")
	}
	if g.(interface{ NetConn() net.Conn }).NetConn() != c {
		t.Fatal("NetConn is not the guarded connection")
	}
}

// FuzzScanner: any bytes, in any pieces, get the same verdict as whole,
// and never a panic.
func FuzzScanner(f *testing.F) {
	for _, s := range honest {
		f.Add([]byte(s), uint8(1))
	}
	f.Add([]byte("$1099511627776\r\n"), uint8(3))
	f.Add([]byte("*3\r\n*2\r\n%1\r\n"), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, piece uint8) {
		n := int(piece)%16 + 1
		lim := Limits{MaxBulk: 64, MaxPending: 32, MaxDepth: 4}
		whole := NewScanner(lim).Scan(b)
		split := feed(NewScanner(lim), string(b), n)
		if (whole == nil) != (split == nil) {
			t.Fatalf("%q: whole %v, in pieces of %d %v", b, whole, n, split)
		}
	})
}

// TestEveryClientGuarded reads the module's production Go files: outside
// this package, only the test and benchmark harnesses (which dial servers
// they start themselves) may build a go-redis client directly; llmguard's
// own clients, of configured addresses, go through NewClient and
// NewClusterClient.
func TestEveryClientGuarded(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	harness := map[string]bool{"internal/respguard": true, "internal/redistest": true, "internal/loadbench": true}
	direct := regexp.MustCompile(`\bredis\.New(Client|ClusterClient|UniversalClient|FailoverClient|FailoverClusterClient|Ring)\(`)
	guarded := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if harness[filepath.ToSlash(rel)] || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := direct.FindIndex(src); loc != nil {
			t.Errorf("%s:%d builds a go-redis client unguarded: use respguard.NewClient or NewClusterClient",
				rel, 1+strings.Count(string(src[:loc[0]]), "\n"))
		}
		guarded += strings.Count(string(src), "respguard.NewClient(") + strings.Count(string(src), "respguard.NewClusterClient(")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if guarded < 9 { // the store, keys, ledger, region, probe and report clients
		t.Errorf("found %d guarded client constructions, want at least 9: has the scan lost its way?", guarded)
	}
}

// BenchmarkScanTakeReply scans a reply the size of a take batch's (an
// array of 32 packed levels): the guard's cost a call.
func BenchmarkScanTakeReply(b *testing.B) {
	reply := []byte("*32\r\n" + strings.Repeat("$17\r\n0.123456789012345\r\n", 32))
	s := NewScanner(Limits{})
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		if err := s.Scan(reply); err != nil {
			b.Fatal(err)
		}
	}
}
