// Package lua holds the Redis scripts of the Redis bucket store, embedded
// from the .lua files beside this one. Each script opens with a comment that
// lists its KEYS, ARGV and reply; their core functions mirror the arithmetic
// of package bucket (bucket/tokenbucket.go for token buckets, bucket/quota.go
// for calendar quotas) line by line, under the same names. Package bucket wraps them with redis.NewScript and runs them by
// EVALSHA, falling back to EVAL when Redis answers NOSCRIPT.
package lua

import _ "embed"

// Take is the source of take.lua: the two-phase take over all of one
// request's buckets, token buckets and quotas together (refill or roll and
// check every bucket; commit every cost only when all can pay, else write
// nothing), replying allowed, the denying bucket, the retry-after in µs and
// each bucket's remaining units and reset in µs in one round trip.
//
//go:embed take.lua
var Take string

// Reconcile is the source of reconcile.lua: signed deltas (actual − reserved
// units) applied to a request's buckets once per request id, recorded by a
// marker key set with SET NX in the same script.
//
//go:embed reconcile.lua
var Reconcile string
