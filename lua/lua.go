// Package lua holds the Redis scripts of the Redis bucket store, embedded
// from the .lua files beside this one. Each script opens with a comment that
// lists its KEYS, ARGV and reply; their core functions mirror the arithmetic
// of package bucket (bucket/tokenbucket.go for token buckets, bucket/quota.go
// for calendar quotas) line by line, under the same names.
//
// The scripts come in two forms built from the same text. Take, TakeBatch
// and Reconcile are scripts for EVAL/EVALSHA (Redis 2.6 and later, and
// miniredis): each call runs the whole script, so every "local function" of
// core.lua is made again on every call. Library is the same text as one
// Redis Functions library (FUNCTION LOAD, Redis 7.0 and later), loaded once
// per server: its functions are made once, at load, and each FCALL runs
// only a script's entry (its lines after "-- @entry", or takebatch.lua's
// after "-- @batch") as the registered function, with KEYS and ARGV as its
// arguments. Package bucket calls the library by FCALL and falls back to
// the scripts (EVALSHA, EVAL on NOSCRIPT) where Redis has no FUNCTION
// command.
package lua

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strconv"
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

// The lines of the scripts where package lua splits or splices them.
const (
	entryMarker   = "-- @entry: take.lua's own; takebatch.lua's entry sets now and commit itself.\n"
	bodyMarker    = "-- @body: one request's take; takebatch.lua runs it once per request.\n"
	takeMarker    = "-- @take: take.lua up to its entry is inserted here by package lua.\n"
	takeOneMarker = "-- @takeOne: take.lua's body, as takeOne(KEYS, ARGV), is inserted here by package lua.\n"
	batchMarker   = "-- @batch: the batch's entry; a Redis Functions library runs it as a function.\n"
	rcEntryMarker = "-- @entry: the script's work; a Redis Functions library runs it as a function.\n"
)

// parts are the scripts cut at their markers (core.lua not inserted).
type parts struct {
	takePrelude, takeEntry, takeBody string // take.lua: definitions, entry, body
	batchHead, batchDefs, batchEntry string // takebatch.lua: header, overrides, entry
	rcPrelude, rcEntry               string // reconcile.lua: definitions, entry
}

// The lines of takebatch.lua that unroll expands.
const (
	unrollMarker    = "-- @unroll\n"
	unrollEndMarker = "-- @unroll end\n"
	eachMarker      = "-- @each"
	eachEndMarker   = "-- @end"
)

// unrolledWidths is how many buckets (or deltas) the widest of
// takebatch.lua's runTokens functions (reconcile.lua's runDeltas,
// take.lua's takeLoneRun) takes: unroll makes runTokens1 to runTokens4
// (runDeltas1 to runDeltas4, takeLoneRun1 to takeLoneRun4).
const unrolledWidths = 4

// LoneBuckets is the most buckets a take sent in take.lua's lone layout
// may have (its takeLoneRun functions, one per count); a take of more
// goes in the single layout.
const LoneBuckets = unrolledWidths

// unroll expands a script's block between the "-- @unroll" and
// "-- @unroll end" lines into one copy per width W from 1 to
// unrolledWidths, "@W" replaced by W, and in each copy every block between
// a "-- @each" line and the next "-- @end" line (the marker lines
// trimmed) repeated for i from 1 to W, "@i" replaced by i; then the line
// "local <name> = {<name>1, …}" (name: the copies' function name without
// its width, "runTokens" in takebatch.lua, "runDeltas" in reconcile.lua).
// The copies keep each bucket's state in locals of their own (a Lua table
// access per bucket and take, or delta and reconciliation, is what they
// save). It panics when a marker is missing or unpaired, as cut does (a
// test guards them).
func unroll(src, name string) string {
	head, rest, ok := strings.Cut(src, unrollMarker)
	body, tail, ok2 := strings.Cut(rest, unrollEndMarker)
	if !ok || !ok2 {
		panic("lua: a script lost its unroll markers (" + name + ")")
	}
	var out strings.Builder
	out.WriteString(head)
	names := make([]string, unrolledWidths)
	for w := 1; w <= unrolledWidths; w++ {
		ws := strconv.Itoa(w)
		names[w-1] = name + ws
		var block []string
		inEach := false
		for _, line := range strings.SplitAfter(strings.ReplaceAll(body, "@W", ws), "\n") {
			switch strings.TrimSpace(line) {
			case eachMarker:
				if inEach {
					panic("lua: " + name + " has a nested -- @each")
				}
				inEach, block = true, block[:0]
				continue
			case eachEndMarker:
				if !inEach {
					panic("lua: " + name + " has an -- @end without -- @each")
				}
				inEach = false
				for i := 1; i <= w; i++ {
					for _, b := range block {
						out.WriteString(strings.ReplaceAll(b, "@i", strconv.Itoa(i)))
					}
				}
				continue
			}
			if inEach {
				block = append(block, line)
			} else {
				out.WriteString(line)
			}
		}
		if inEach {
			panic("lua: " + name + " has a -- @each without -- @end")
		}
	}
	out.WriteString("local " + name + " = {" + strings.Join(names, ", ") + "}\n")
	out.WriteString(tail)
	return out.String()
}

// cut splits the three scripts at their markers. It panics when a marker
// is missing (a test guards them), as the embedded sources are fixed at
// build time: every program and test importing the package fails at
// start-up.
func cut(take, batch, reconcile string) parts {
	var p parts
	var rest string
	var ok [6]bool
	p.takePrelude, rest, ok[0] = strings.Cut(take, entryMarker)
	p.takeEntry, p.takeBody, ok[1] = strings.Cut(rest, bodyMarker)
	p.batchHead, rest, ok[2] = strings.Cut(unroll(batch, "runTokens"), takeMarker)
	p.batchDefs, p.batchEntry, ok[3] = strings.Cut(rest, takeOneMarker)
	_, _, ok[4] = strings.Cut(p.batchEntry, batchMarker)
	p.rcPrelude, p.rcEntry, ok[5] = strings.Cut(unroll(reconcile, "runDeltas"), rcEntryMarker)
	for _, o := range ok {
		if !o {
			panic("lua: take.lua, takebatch.lua or reconcile.lua lost a splice marker")
		}
	}
	return p
}

// takeBatch returns takebatch.lua as an EVAL script: take.lua up to its
// entry (core.lua inserted) at takeMarker, and take.lua's body wrapped as
// "local function takeOne(KEYS, ARGV)" at takeOneMarker.
func takeBatch(p parts) string {
	return p.batchHead + withCore(p.takePrelude) + p.batchDefs +
		"local function takeOne(KEYS, ARGV)\n" + p.takeBody + "end\n" + p.batchEntry
}

// library returns the Redis Functions library of the three scripts, named
// LibraryName and registering TakeFunction, TakeBatchFunction and
// ReconcileFunction: core.lua once, then take.lua and takebatch.lua in one
// do block (takebatch.lua's overrides shadow take.lua's read, write, mark,
// hold and parse for takeOne only, as in the EVAL script), reconcile.lua in
// another, each script's entry wrapped as function(KEYS, ARGV).
func library(p parts) (src, name string) {
	body := core +
		"do\n" + strings.Replace(p.takePrelude, coreMarker, "", 1) +
		"local function take(KEYS, ARGV)\n" + p.takeEntry + p.takeBody + "end\n" +
		p.batchDefs +
		"local function takeOne(KEYS, ARGV)\n" + p.takeBody + "end\n" +
		"local function takeBatch(KEYS, ARGV)\n" + p.batchEntry + "end\n" +
		"redis.register_function('llmguard_take_@v', take)\n" +
		"redis.register_function('llmguard_takebatch_@v', takeBatch)\n" +
		"end\n" +
		"do\n" + strings.Replace(p.rcPrelude, coreMarker, "", 1) +
		"local function reconcile(KEYS, ARGV)\n" + p.rcEntry + "end\n" +
		"redis.register_function('llmguard_reconcile_@v', reconcile)\n" +
		"end\n"
	sum := sha256.Sum256([]byte(body))
	v := hex.EncodeToString(sum[:6])
	return "#!lua name=llmguard_" + v + "\n" + strings.ReplaceAll(body, "@v'", v+"'"), v
}

// takeUnrolled is take.lua with its takeLoneRun block unrolled.
var takeUnrolled = unroll(takeSource, "takeLoneRun")

var split = cut(takeUnrolled, takeBatchSource, reconcileSource)

// Take is the source of take.lua, core.lua inserted: the two-phase take over all of one
// request's buckets, token buckets and quotas together (refill or roll and
// check every bucket; commit every cost only when all can pay, else write
// nothing), replying allowed, the denying bucket, the retry-after in µs and
// each bucket's remaining units and reset in µs in one round trip.
var Take = withCore(takeUnrolled)

// Reconcile is the source of reconcile.lua, core.lua inserted: the
// reconciliations of many requests in one script, each its signed deltas
// (actual − reserved units) applied to its buckets once per request id
// (recorded by a marker key set with SET NX in the same script, or, for
// an id of bucket.NewRequestID's, a member of its epoch's set), or the
// void of its take; every bucket read once (one MGET) and written once.
var Reconcile = withCore(unroll(reconcileSource, "runDeltas"))

// TakeBatch is the source of takebatch.lua, take.lua and core.lua spliced
// in: the takes of several requests, each committing as Take would alone,
// in order, in one script; every key read once and written once. See the
// script's header for its KEYS, ARGV and reply.
var TakeBatch = takeBatch(split)

var librarySource, libraryVersion = library(split)

// Library is the source of the Redis Functions library (FUNCTION LOAD,
// Redis 7.0 and later) holding the three scripts as functions:
// TakeFunction, TakeBatchFunction and ReconcileFunction take the KEYS and
// ARGV and give the reply of Take, TakeBatch and Reconcile. It opens with
// the shebang "#!lua name=<LibraryName>" the Redis docs require
// (https://redis.io/docs/latest/develop/programmability/functions-intro/).
// Function names are global to a Redis server, not per library, so the
// library's name and each function's end in Version: two builds of
// llmguard with different scripts load two libraries side by side (a
// rolling upgrade), neither replacing the other's functions.
var Library = librarySource

// Version is the first 12 hex digits of the SHA-256 of the library's text
// after its shebang line, written with a placeholder where the function
// names carry Version: the suffix of LibraryName and of each function's
// name. Any change to a script changes it.
var Version = libraryVersion

// LibraryName is the name Library loads under: "llmguard_" + Version.
var LibraryName = "llmguard_" + libraryVersion

// The names of the library's functions, for FCALL: "llmguard_take_",
// "llmguard_takebatch_" and "llmguard_reconcile_" + Version.
var (
	TakeFunction      = "llmguard_take_" + libraryVersion
	TakeBatchFunction = "llmguard_takebatch_" + libraryVersion
	ReconcileFunction = "llmguard_reconcile_" + libraryVersion
)
