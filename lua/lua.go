// Package lua holds the Redis scripts of the Redis bucket store, embedded
// from the .lua files beside this one. Each script opens with a comment that
// lists its KEYS, ARGV and reply; their core functions mirror the arithmetic
// of package bucket (bucket/tokenbucket.go for token buckets, bucket/quota.go
// for calendar quotas) line by line, under the same names. Package bucket
// wraps them with redis.NewScript and runs them by EVALSHA, falling back to
// EVAL when Redis answers NOSCRIPT.
package lua

import (
	_ "embed"
	"strings"
)

// coreMarker is the line of take.lua and reconcile.lua where core.lua goes.
const coreMarker = "-- @core: the shared core (lua/core.lua) is inserted here by package lua.\n"

// core is core.lua: the state, arithmetic and storage functions both
// scripts share, kept once.
//
//go:embed core.lua
var core string

// withCore returns a script's source with the shared core inserted at its
// marker line; a script without the marker is returned unchanged (a test
// guards that both have it).
func withCore(src string) string { return strings.Replace(src, coreMarker, core, 1) }

//go:embed take.lua
var takeSource string

//go:embed reconcile.lua
var reconcileSource string

//go:embed takebatch.lua
var takeBatchSource string

// The lines of take.lua and takebatch.lua where takeBatch splices them.
const (
	bodyMarker    = "-- @body: one request's take; takebatch.lua runs it once per request.\n"
	takeMarker    = "-- @take: take.lua up to its body is inserted here by package lua.\n"
	takeOneMarker = "-- @takeOne: take.lua's body, as takeOne(KEYS, ARGV), is inserted here by package lua.\n"
)

// takeBatch returns takebatch.lua with take.lua spliced in: take.lua up to
// its body marker (core.lua inserted) at takeMarker, and its body wrapped
// as "local function takeOne(KEYS, ARGV)" at takeOneMarker. It panics when
// a marker is missing (a test guards them), as the embedded sources are
// fixed at build time: every program and test importing the package fails
// at start-up.
func takeBatch(take, batch string) string {
	prelude, body, ok := strings.Cut(take, bodyMarker)
	if !ok || !strings.Contains(batch, takeMarker) || !strings.Contains(batch, takeOneMarker) {
		panic("lua: take.lua or takebatch.lua lost a splice marker")
	}
	batch = strings.Replace(batch, takeMarker, withCore(prelude), 1)
	return strings.Replace(batch, takeOneMarker, "local function takeOne(KEYS, ARGV)\n"+body+"end\n", 1)
}

// Take is the source of take.lua, core.lua inserted: the two-phase take over all of one
// request's buckets, token buckets and quotas together (refill or roll and
// check every bucket; commit every cost only when all can pay, else write
// nothing), replying allowed, the denying bucket, the retry-after in µs and
// each bucket's remaining units and reset in µs in one round trip.
var Take = withCore(takeSource)

// Reconcile is the source of reconcile.lua, core.lua inserted: the
// reconciliations of many requests in one script, each its signed deltas
// (actual − reserved units) applied to its buckets once per request id
// (recorded by a marker key set with SET NX in the same script), or the
// void of its take; every bucket read once (one MGET) and written once.
var Reconcile = withCore(reconcileSource)

// TakeBatch is the source of takebatch.lua, take.lua and core.lua spliced
// in: the takes of several requests, each committing as Take would alone,
// in order, in one script; every key read once and written once. See the
// script's header for its KEYS, ARGV and reply.
var TakeBatch = takeBatch(takeSource, takeBatchSource)
