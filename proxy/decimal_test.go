package proxy

import (
	"bytes"
	"math"
	"strconv"
	"testing"
)

// TestAppendIntSameAsStrconv: appendInt appends what strconv.AppendInt
// does for every power of ten and its neighbours, both signs, the int64
// bounds, and every value below 1,000, onto an empty slice, a prefix with
// no room left, and one with room.
func TestAppendIntSameAsStrconv(t *testing.T) {
	vals := []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}
	for v := int64(0); v < 1000; v++ {
		vals = append(vals, v, -v)
	}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10*10; p *= 10 {
		for _, d := range []int64{-1, 0, 1} {
			vals = append(vals, p+d, -(p + d), 2*p+d, 9*p+d)
		}
		if p > math.MaxInt64/10 {
			break
		}
	}
	for _, v := range vals {
		checkAppendInt(t, v)
	}
}

// checkAppendInt compares appendInt with strconv.AppendInt for v after
// three prefixes: none, a full one (no capacity left), and one with room.
func checkAppendInt(t *testing.T, v int64) {
	t.Helper()
	room := make([]byte, 3, 64)
	copy(room, "a=b")
	for _, pre := range [][]byte{nil, []byte("q="), room} {
		want := strconv.AppendInt(append([]byte(nil), pre...), v, 10)
		got := appendInt(append(pre[:len(pre):len(pre)], nil...), v)
		if len(pre) == 3 {
			got = appendInt(pre, v) // in place, within its capacity
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("appendInt(%q, %d) = %q, want %q", pre, v, got, want)
		}
	}
}

// FuzzAppendIntSameAsStrconv holds appendInt to strconv.AppendInt for any
// int64.
func FuzzAppendIntSameAsStrconv(f *testing.F) {
	for _, v := range []int64{0, 9, 10, 99, 100, 12345678, -1, math.MaxInt64, math.MinInt64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) { checkAppendInt(t, v) })
}

// BenchmarkAppendInt formats the figures an answer's limit fields carry
// (a limit, a remaining, a reset) with appendInt and with strconv.
func BenchmarkAppendInt(b *testing.B) {
	vals := []int64{1_000_000, 987_654, 60, 1_000, 999, 1}
	var buf [64]byte
	b.Run("appendInt", func(b *testing.B) {
		for b.Loop() {
			for _, v := range vals {
				_ = appendInt(buf[:0], v)
			}
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			for _, v := range vals {
				_ = strconv.AppendInt(buf[:0], v, 10)
			}
		}
	})
}
