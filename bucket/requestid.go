package bucket

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"time"
)

// epochSeconds is how many seconds of request ids made by NewRequestID
// share one set of each kind of marker in Redis (see Redis): the set
// "llmguard:{<hash tag>}::rcs:<epoch>" (reconciled), "…::tkt:<epoch>"
// (taken in a batch) or "…::tkv:<epoch>" (voided) holds, as members, ids
// whose second lies in the epoch. It bounds a set to the requests of 10 s of one
// slot, so that its expiry (Redis frees an expired key at once, in one
// step) stays short.
const epochSeconds = 10

// NewRequestID returns a fresh request id that names the second it was made
// in: 24 lowercase hex digits, the Unix seconds of now (the low 32 bits, 8
// digits) then 64 random bits (16 digits). Such an id (alone, or followed
// by "/" and any suffix, as derived ids are) lets the Redis store record
// its reconciliation, and its take when it commits in a batch, as members
// of sets shared by the ids of the same epoch (see Redis) instead of keys
// of their own; any other id is recorded as before. It is safe for concurrent use.
func NewRequestID(now time.Time) string {
	var b [RequestIDLen]byte
	PutRequestID(&b, now)
	return string(b[:])
}

// RequestIDLen is the length of a NewRequestID id, in bytes.
const RequestIDLen = 24

// PutRequestID writes into dst the id NewRequestID would return for now,
// so that a caller can keep it without an allocation of its own. It is
// safe for concurrent use.
func PutRequestID(dst *[RequestIDLen]byte, now time.Time) {
	putRequestID(dst, uint32(now.Unix()), rand.Uint64())
}

// putRequestID writes the id of second s and random bits v: s's 8 hex
// digits, most significant first, then each byte of v from the lowest,
// its high digit first. The digits are made eight at a time (hex8): a
// table look-up per digit, as written first, cost about 350 instructions
// an id (BenchmarkProxyPath/llmguard under callgrind), a tenth of them
// this way (TestPutRequestIDSameAsPerDigit, FuzzPutRequestID).
func putRequestID(dst *[RequestIDLen]byte, s uint32, v uint64) {
	binary.LittleEndian.PutUint64(dst[0:], hex8(bits.ReverseBytes32(s)))
	binary.LittleEndian.PutUint64(dst[8:], hex8(uint32(v)))
	binary.LittleEndian.PutUint64(dst[16:], hex8(uint32(v>>32)))
}

// hex8 returns the 8 lowercase hex digits of the 4 bytes of b, lowest
// byte first and each byte's high digit first, as the bytes of a
// little-endian word: each byte spread to a 16-bit lane, its two digits
// split into the lane's bytes, then each digit d (0–15) made '0'+d, plus
// 'a'−'0'−10 = 39 where d ≥ 10 (d+6 carries into bit 4 exactly then); no
// byte passes 0x66, so no lane carries into the next.
func hex8(b uint32) uint64 {
	x := uint64(b)
	x = (x | x<<16) & 0x0000ffff0000ffff
	x = (x | x<<8) & 0x00ff00ff00ff00ff
	d := (x>>4)&0x000f000f000f000f | (x&0x000f000f000f000f)<<8
	ten := (d + 0x0606060606060606) >> 4 & 0x0101010101010101
	return d + 0x3030303030303030 + ten*39
}

// markerEpoch returns the epoch (Unix seconds / epochSeconds, in decimal)
// of a request id made by NewRequestID, or of one made from it by a
// suffix after "/"; ok is false for every other id (they keep a marker key
// each). The epoch only groups ids into sets: it is read from the id, so
// every attempt of one id names the same set, whatever the clocks say.
func markerEpoch(requestID string) (epoch string, ok bool) {
	if len(requestID) < 24 || len(requestID) > 24 && requestID[24] != '/' {
		return "", false
	}
	var s uint32
	for i := range 24 {
		c := requestID[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		default:
			return "", false
		}
		if i < 8 {
			s = s<<4 | uint32(d)
		}
	}
	return strconv.FormatUint(uint64(s/epochSeconds), 10), true
}
