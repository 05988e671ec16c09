package proxy

import (
	"math/bits"
	"slices"
)

// appendInt appends v in decimal to b, byte for byte what
// strconv.AppendInt(b, v, 10) appends (TestAppendIntSameAsStrconv,
// FuzzAppendIntSameAsStrconv). It writes the digits in place, two at a
// time from the last, into a window of b's spare capacity whose indices
// are masked, so no store checks bounds; strconv formats into a zeroed
// stack array and copies it with a call to memmove. An answer's limit
// fields write about a dozen numbers (limits, remainings, resets): under
// callgrind strconv's form cost about 120 instructions a number of up to
// seven digits, this one about 80 (BenchmarkAppendInt). It grows b when
// fewer than digitWindow bytes are spare (where strconv grows b only
// when the digits do not fit): no allocation when they are.
func appendInt(b []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		b = append(b, '-')
		u = -u // MinInt64 stays 1<<63, its magnitude
	}
	if cap(b)-len(b) < digitWindow {
		b = slices.Grow(b, digitWindow)
	}
	s := len(b)
	n := decimalLen(u) // at most 20
	d := (*[digitWindow]byte)(b[s : s+digitWindow])
	i := uint(n)
	for u >= 100 {
		r := digitPairs[u%100]
		u /= 100
		i -= 2
		d[i&(digitWindow-1)], d[(i+1)&(digitWindow-1)] = byte(r), byte(r>>8)
	}
	if u >= 10 {
		r := digitPairs[u]
		d[(i-2)&(digitWindow-1)], d[(i-1)&(digitWindow-1)] = byte(r), byte(r>>8)
	} else {
		d[(i-1)&(digitWindow-1)] = byte('0' + u)
	}
	return b[:s+n]
}

// digitWindow is the spare capacity appendInt writes its digits in: a
// power of two (its indices are masked) of at least the 20 digits of the
// largest uint64.
const digitWindow = 32

// decimalLen is the number of decimal digits of u (1 for 0): the
// approximation log10(2) ≈ 1233/4096 of its bit length, corrected by one
// comparison with a power of ten.
func decimalLen(u uint64) int {
	x := u | 1
	t := bits.Len64(x) * 1233 >> 12 // floor(log10(x)) or one more
	if x < pow10[t] {
		return t
	}
	return t + 1
}

// pow10 holds 10^i for every i whose power fits in 64 bits.
var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// digitPairs holds the two digits of each n below 100 as a little-endian
// 16-bit word ("07" for 7), stored at once.
var digitPairs = func() (t [100]uint16) {
	for n := range t {
		t[n] = uint16('0'+n/10) | uint16('0'+n%10)<<8
	}
	return t
}()
