package proxy

import (
	"bytes"
	"math"
	"strconv"
	"testing"
)

// appendIntCases are the values at every change of length and sign.
func appendIntCases() []int64 {
	vs := []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		vs = append(vs, p-1, p, p+1, -p+1, -p, -p-1, 10*p-1, -(10*p - 1))
	}
	return vs
}

// TestAppendIntSameAsStrconv: appendInt appends what strconv.AppendInt
// appends in base 10, after a prefix, at every change of length and sign.
func TestAppendIntSameAsStrconv(t *testing.T) {
	for _, v := range appendIntCases() {
		prefix := []byte("x=")
		got := appendInt(append([]byte(nil), prefix...), v)
		want := strconv.AppendInt(append([]byte(nil), prefix...), v, 10)
		if !bytes.Equal(got, want) {
			t.Errorf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestAppendIntAllocatesNothing: into a buffer with room, appendInt
// allocates nothing.
func TestAppendIntAllocatesNothing(t *testing.T) {
	var b [32]byte
	n := testing.AllocsPerRun(100, func() {
		appendInt(b[:0], math.MinInt64)
		appendInt(b[:0], 1234567)
	})
	if n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

// FuzzAppendIntSameAsStrconv: for any value and prefix, appendInt appends
// what strconv.AppendInt appends in base 10, and leaves the prefix as it
// was.
func FuzzAppendIntSameAsStrconv(f *testing.F) {
	for _, v := range appendIntCases() {
		f.Add(v, []byte("r="))
	}
	f.Fuzz(func(t *testing.T, v int64, prefix []byte) {
		got := appendInt(bytes.Clone(prefix), v)
		want := strconv.AppendInt(bytes.Clone(prefix), v, 10)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendInt(%q, %d) = %q, want %q", prefix, v, got, want)
		}
	})
}

// BenchmarkAppendInt formats the numbers of a request's limit fields.
func BenchmarkAppendInt(b *testing.B) {
	b.ReportAllocs()
	var buf [32]byte
	vs := []int64{1000000000, 999999873, 60, 1000000, 999998, 1}
	for b.Loop() {
		for _, v := range vs {
			appendInt(buf[:0], v)
		}
	}
}

// BenchmarkStrconvAppendInt is BenchmarkAppendInt through
// strconv.AppendInt, for comparison in the same run.
func BenchmarkStrconvAppendInt(b *testing.B) {
	b.ReportAllocs()
	var buf [32]byte
	vs := []int64{1000000000, 999999873, 60, 1000000, 999998, 1}
	for b.Loop() {
		for _, v := range vs {
			strconv.AppendInt(buf[:0], v, 10)
		}
	}
}
