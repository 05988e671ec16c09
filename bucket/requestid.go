package bucket

import (
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
	const hexDigits = "0123456789abcdef"
	s := uint32(now.Unix())
	for i := range 8 {
		dst[i] = hexDigits[(s>>(28-4*i))&15]
	}
	v := rand.Uint64()
	for i := range 8 {
		b := byte(v >> (8 * i))
		dst[8+2*i], dst[9+2*i] = hexDigits[b>>4], hexDigits[b&15]
	}
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
