package proxy

import "math/bits"

// appendInt appends v in decimal to b and returns the extended slice: the
// bytes strconv.AppendInt(b, v, 10) appends (a '-' before a negative
// value, no leading zeros), written in place from the last digit back, two
// digits a division, where AppendInt formats into a buffer of its own and
// copies it over. The numbers of the limit fields (RateLimit,
// x-ratelimit-*, anthropic-ratelimit-*, Retry-After, retry-after-ms,
// x-llmguard-wait-ms) go through it into a buffer the caller reuses, so
// that none is a string of its own. It allocates only when b has no room
// for the digits (at most 20 and a sign).
func appendInt(b []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		b = append(b, '-')
		u = -u // two's complement: math.MinInt64 too
	}
	if u < 10 {
		return append(b, byte('0'+u))
	}
	n := decimalLen(u)
	b = append(b, twentyZeros[:n]...)
	i := len(b)
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		b[i], b[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		b[i-2], b[i-1] = digitPairs[u*2], digitPairs[u*2+1]
	} else {
		b[i-1] = byte('0' + u)
	}
	return b
}

// decimalLen is the number of decimal digits of u, u >= 1: from its bit
// length (log10(2) ≈ 1233/4096), corrected by one comparison.
func decimalLen(u uint64) int {
	t := bits.Len64(u) * 1233 >> 12
	if u >= powersOf10[t] {
		t++
	}
	return t
}

// powersOf10 are 10^0 through 10^19, the largest power of ten a uint64
// holds.
var powersOf10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// twentyZeros is room for the longest uint64's digits, appended before
// they are written.
const twentyZeros = "00000000000000000000"

// digitPairs holds "00" through "99", two bytes each.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"
