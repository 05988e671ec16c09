package weigher

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// prefixBenchPoints are the prefixes a warm 1 KiB chat body hashes: the
// point it resumes at (confirm) and the ends of its two new messages
// (keepResumePoint), in bytes.
var prefixBenchPoints = []int{450, 600, 750}

// BenchmarkPrefixHashPasses weighs the prefix hash of resume points
// (elemMemo.prefixHash: one xxh3 Hasher pass, from the per-seed base past
// the pad, with a Sum128 at each point, which accumulates again every
// byte since the hasher's last 1 KiB block) against passes whose sums do
// not re-read the prefix: xxh3's seeded 128-bit hash chained over fixed
// blocks (each step hashes the 16-byte chain value and the next block; a
// sum, the chain value and the bytes after the last block: 240 bytes at
// most, xxh3's longest input hashed without deriving a secret from the
// seed), and a pair of cespare/xxhash Digests (XXH64, whose Sum64 reads
// only the at most 31 bytes it holds) under two seeds, for 128 bits.
// "hasher-last" hashes the last prefix alone (one write, one sum): the
// floor of any pass. One op is one request's prefixes of a 1,100-byte
// body; each pass is a function of its own (prefixPass…), for callgrind:
//
//	go test -c -o /tmp/w.test ./weigher
//	GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	  --collect-atstart=no --toggle-collect='*weigher.prefixPass*' \
//	  /tmp/w.test -test.run XXX -test.bench 'PrefixHashPasses/^hasher$' -test.benchtime 1000x -test.cpu 1
//
// and with 3000x: the difference over 2000 is one op. Figures:
// docs/performance-history.md, "Prefix hashes whose sums do not re-read".
func BenchmarkPrefixHashPasses(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 1100; i++ {
		fmt.Fprintf(&sb, `{"role":"user","content":"turn %d of the talk"},`, i*i)
	}
	body := sb.String()[:1100]
	c := newCountCache(1 << 20)
	b.Run("hasher", func(b *testing.B) {
		m := &elemMemo{cache: c, body: body}
		for b.Loop() {
			sinkPrefix = prefixPassHasher(m, prefixBenchPoints)
		}
	})
	b.Run("hasher-last", func(b *testing.B) {
		m := &elemMemo{cache: c, body: body}
		for b.Loop() {
			sinkPrefix = prefixPassHasher(m, prefixBenchPoints[len(prefixBenchPoints)-1:])
		}
	})
	for _, block := range []int{224, 112, 48} {
		b.Run(fmt.Sprintf("chain/%d", block), func(b *testing.B) {
			scratch := make([]byte, 16+block)
			for b.Loop() {
				sinkPrefix = prefixPassChain(body, c.seed, scratch, prefixBenchPoints)
			}
		})
	}
	b.Run("xxh64pair", func(b *testing.B) {
		lo, hi := xxhash.NewWithSeed(c.seed), xxhash.NewWithSeed(^c.seed)
		for b.Loop() {
			sinkPrefix = prefixPassXXH64(body, c.seed, lo, hi, prefixBenchPoints)
		}
	})
}

// prefixPassHasher is one request's prefix hashes of m's body at points,
// by prefixHash; it returns the last.
//
//go:noinline
func prefixPassHasher(m *elemMemo, points []int) (h xxh3.Uint128) {
	m.resume.forget() // a new request: the pass starts from the base
	for _, k := range points {
		h = m.prefixHash(k)
	}
	return h
}

// prefixPassChain is the chained pass over blocks of len(scratch)-16
// bytes; it returns the last sum.
//
//go:noinline
func prefixPassChain(body string, seed uint64, scratch []byte, points []int) (h xxh3.Uint128) {
	block := len(scratch) - 16
	var chain xxh3.Uint128
	chained := 0
	for _, k := range points {
		for chained+block <= k {
			*(*[16]byte)(scratch) = chain.Bytes()
			copy(scratch[16:], body[chained:chained+block])
			chain = xxh3.Hash128Seed(scratch, seed)
			chained += block
		}
		*(*[16]byte)(scratch) = chain.Bytes()
		n := copy(scratch[16:], body[chained:k])
		h = xxh3.Hash128Seed(scratch[:16+n], seed^0x73756d) // "sum"
	}
	return h
}

// prefixPassXXH64 is the pass of two XXH64 Digests; it returns the last
// pair of sums.
//
//go:noinline
func prefixPassXXH64(body string, seed uint64, lo, hi *xxhash.Digest, points []int) (h xxh3.Uint128) {
	lo.ResetWithSeed(seed)
	hi.ResetWithSeed(^seed)
	at := 0
	for _, k := range points {
		_, _ = lo.WriteString(body[at:k])
		_, _ = hi.WriteString(body[at:k])
		at = k
		h = xxh3.Uint128{Lo: lo.Sum64(), Hi: hi.Sum64()}
	}
	return h
}

// sinkPrefix keeps the benchmarks' hashes live.
var sinkPrefix xxh3.Uint128
