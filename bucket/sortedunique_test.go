package bucket

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// oracleUnique is what sortedUnique returns, by the standard library: s
// sorted ascending without repeats.
func oracleUnique(s []uint32) []uint32 {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestSortedUniqueDifferential: sortedUnique (bits of one word below 64,
// insertion sort otherwise) against the standard library's sort and
// compaction, over every length up to 9 (a take's keys and its request
// id's shard, as memory.go's lock buffers hold), shards below 64, at 63
// and 64 (the word's edge), and above.
func TestSortedUniqueDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, top := range []uint32{1, 4, 63, 64, 65, 1024} {
		for n := range 10 {
			for range 200 {
				s := make([]uint32, n)
				for i := range s {
					s[i] = r.Uint32N(top)
					if top >= 64 && r.IntN(4) == 0 {
						s[i] = 63 + r.Uint32N(2) // the word's edge: 63 and 64
					}
				}
				want := oracleUnique(s)
				in := slices.Clone(s)
				if got := sortedUnique(in); !slices.Equal(got, want) {
					t.Fatalf("sortedUnique(%v) = %v, want %v", s, got, want)
				}
			}
		}
	}
}

// FuzzSortedUnique: sortedUnique of any shards, read as little-endian
// uint16 pairs (so that values past 64 come often), is the sorted set.
func FuzzSortedUnique(f *testing.F) {
	f.Add([]byte{1, 0, 3, 0, 1, 0})
	f.Add([]byte{63, 0, 64, 0, 0, 0, 63, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := make([]uint32, 0, len(b)/2)
		for i := 0; i+1 < len(b) && len(s) < 16; i += 2 {
			s = append(s, uint32(b[i])|uint32(b[i+1]&1)<<8)
		}
		want := oracleUnique(s)
		if got := sortedUnique(slices.Clone(s)); !slices.Equal(got, want) {
			t.Fatalf("sortedUnique(%v) = %v, want %v", s, got, want)
		}
	})
}
