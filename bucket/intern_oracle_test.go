package bucket

// The argument builders of reconcile.lua and takebatch.lua as they were at
// d920abb, each with its own maps (before they shared an interner): the
// oracles of TestInternedArgsMatchMaps and FuzzInternedArgs, which compare
// their KEYS and ARGV with the store's, value for value.

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// mapReconcileCall is one run of reconcile.lua being built: the entries of
// one or more requests (in a cluster, of one slot), and what they share,
// each sent once: the distinct keys (KEYS), limits and shapes (mode, marker
// set, bucket keys and limits) their entries name.
type mapReconcileCall struct {
	now     string
	keys    []string         // KEYS: every distinct key, in order of first use
	keyOf   map[string]int   // a key → its index in keys, from 1
	limits  []any            // 1 ARGV per distinct limit, its text (limitText)
	limitOf map[[5]int64]int // a limit's ARGV → its index, from 1
	sets    []markerSet      // the marker sets of mode h, in order of first use
	setOf   map[string]int   // a marker set's key → its index in sets, from 1
	shapes  []any            // per shape: mode, set (modes h, w), count, then key and limit index per delta
	shapeOf map[string]int   // a shape's signature → its index, from 1
	entries []any            // per run of entries of one shape: shape index, run length, then per entry: marker index (modes r, v, w), id (mode w), units per delta
	run     int              // the index in entries of the last run's length
	runOf   int              // the shape of the last run (0: none yet)
	owners  []int            // the batch element of each entry
	sig     []byte           // scratch: the signature of the shape being added
	at      []int            // scratch: its key and limit indexes, two per delta
	// zeroUnits sends deltas of zero units too (applyScript's; the store
	// never does).
	zeroUnits bool
}

// newReconcileCall returns a call with no entries yet.
func newMapReconcileCall(r *Redis) *mapReconcileCall {
	return &mapReconcileCall{now: r.nowArg(), keyOf: map[string]int{}, limitOf: map[[5]int64]int{},
		setOf: map[string]int{}, shapeOf: map[string]int{}}
}

// args returns the call's ARGV (see lua/reconcile.lua): the units packed
// (packUnits).
func (c *mapReconcileCall) args(r *Redis) []any {
	n := 6 + len(c.limits) + 2*len(c.sets) + len(c.shapes) + len(c.entries)
	for _, s := range c.sets {
		n += len(s.ids)
	}
	args := make([]any, 0, n)
	args = append(args, c.now, r.dedupFor, r.voidFor, len(c.limits), len(c.shapeOf), len(c.sets))
	args = append(args, c.limits...)
	for _, s := range c.sets {
		args = append(args, s.key, len(s.ids))
		args = append(args, s.ids...)
	}
	args = append(args, c.shapes...)
	return packUnits(append(args, c.entries...))
}

// add appends to c the entry of requestID's deltas (those at idx, when idx
// is not nil) in mode, for batch element owner: its marker key (none for
// modeRefund, or modeReconcile with an empty requestID; for modeReconcile
// and an id of NewRequestID's, the marker set of its epoch, the id then
// sent in that set's list), named in the slot of its first delta, then its deltas
// of non-zero units. An entry of
// modeReconcile or modeRefund with no such delta is not added.
func (c *mapReconcileCall) add(owner int, requestID string, deltas []Delta, idx []int, mode scriptMode) {
	n := len(deltas)
	if idx != nil {
		n = len(idx)
	}
	at := func(j int) Delta {
		if idx != nil {
			return deltas[idx[j]]
		}
		return deltas[j]
	}
	count := 0
	for j := range n {
		if at(j).Units != 0 {
			count++
		}
	}
	e := rcEntry{mode: 'n'}
	switch {
	case mode == modeVoid:
		e.mode, e.marker = 'v', takeMarkerKey(at(0).Key, requestID)
		if epoch, ok := markerEpoch(requestID); ok {
			e.mode, e.set, e.id = 'w', takenSetKey(at(0).Key, epoch), requestID
			e.voided = voidedSetKey(at(0).Key, epoch)
		}
	case count == 0:
		return
	case mode == modeReconcile && requestID != "":
		if epoch, ok := markerEpoch(requestID); ok {
			e.mode, e.set, e.id = 'h', markerSetKey(at(0).Key, epoch), requestID
		} else {
			e.mode, e.marker = 'r', markerKey(at(0).Key, requestID)
		}
	}
	c.entry(owner, e, n, at)
}

// entry appends to c, for batch element owner, the entry e with the n
// deltas at(0) … at(n-1) (those of non-zero units unless c.zeroUnits):
// its shape, added when new, then its marker index, id and units.
func (c *mapReconcileCall) entry(owner int, e rcEntry, n int, at func(int) Delta) {
	sig := append(c.sig[:0], e.mode)
	set := 0
	switch {
	case e.mode == 'h':
		set = c.markerSet(e.set)
		c.sets[set-1].ids = append(c.sets[set-1].ids, e.id)
		sig = binary.AppendUvarint(sig, uint64(set))
	case e.set != "":
		set = c.key(e.set)
		sig = binary.AppendUvarint(sig, uint64(set))
	}
	voided := 0
	if e.mode == 'w' {
		voided = c.key(e.voided)
		sig = binary.AppendUvarint(sig, uint64(voided))
	}
	c.at = c.at[:0]
	for j := range n {
		dl := at(j)
		if dl.Units == 0 && !c.zeroUnits {
			continue
		}
		k, l := c.key(dl.Key), c.limit(dl.Limit)
		c.at = append(c.at, k, l)
		sig = binary.AppendUvarint(binary.AppendUvarint(sig, uint64(k)), uint64(l))
	}
	c.sig = sig
	shape, ok := c.shapeOf[string(sig)]
	if !ok {
		shape = len(c.shapeOf) + 1
		c.shapeOf[string(sig)] = shape
		c.shapes = append(c.shapes, string(e.mode))
		if e.set != "" {
			c.shapes = append(c.shapes, set)
		}
		if e.mode == 'w' {
			c.shapes = append(c.shapes, voided)
		}
		c.shapes = append(c.shapes, len(c.at)/2)
		for _, i := range c.at {
			c.shapes = append(c.shapes, i)
		}
	}
	c.owners = append(c.owners, owner)
	if shape == c.runOf {
		c.entries[c.run] = c.entries[c.run].(int) + 1
	} else {
		c.runOf, c.run = shape, len(c.entries)+1
		c.entries = append(c.entries, shape, 1)
	}
	if e.marker != "" {
		c.entries = append(c.entries, c.key(e.marker))
	}
	if e.mode == 'w' {
		c.entries = append(c.entries, e.id)
	}
	for j := range n {
		if dl := at(j); dl.Units != 0 || c.zeroUnits {
			c.entries = append(c.entries, dl.Units)
		}
	}
}

// markerSet returns the index (from 1) of the marker set key among c's
// sets of mode h, adding it.
func (c *mapReconcileCall) markerSet(key string) int {
	i, ok := c.setOf[key]
	if !ok {
		c.sets = append(c.sets, markerSet{key: c.key(key)})
		i = len(c.sets)
		c.setOf[key] = i
	}
	return i
}

// key returns the index (from 1) of key among c's KEYS, adding it.
func (c *mapReconcileCall) key(key string) int {
	i, ok := c.keyOf[key]
	if !ok {
		c.keys = append(c.keys, key)
		i = len(c.keys)
		c.keyOf[key] = i
	}
	return i
}

// limit returns the index (from 1) of l among c's limits, adding it.
func (c *mapReconcileCall) limit(l Limit) int {
	a := limitArgs(l)
	i, ok := c.limitOf[a]
	if !ok {
		c.limits = append(c.limits, limitText(a[0], a[1], a[2], a[3], a[4]))
		i = len(c.limitOf) + 1
		c.limitOf[a] = i
	}
	return i
}

// mapBatchArgs is batchArgs as it was at d920abb, its maps made on every
// call: it returns the KEYS and ARGV of takebatch.lua for takes, each
// given in take.lua's single layout (now, '1', marker TTL, then 6 per
// bucket: its 5 limit ARGV and its cost): every distinct bucket key, limit
// and shape (marker TTL, taken set, and the keys and limits of the buckets)
// sent once; consecutive takes of one shape are one run, which sends its
// shape's index and its length once, then each take its request id (with a
// taken set: an id of NewRequestID's form) and its costs (see the script's
// header). A take of an id of NewRequestID's sends no marker key: the
// taken and voided sets of its id's epoch go at the end of KEYS, once per
// batch; any other id's marker key is sent.
func mapBatchArgs(takes []*queuedTake) ([]string, []any) {
	keyOf := map[string]int{}
	limitOf := map[[5]any]int{}
	shapeOf := map[string]int{}
	epochOf := map[string]int{}
	var buckets, markers, sets []string
	var limits, shapes, entries []any
	var shape []byte
	prev, runAt := 0, 0
	for _, q := range takes {
		m, taken, id := 0, 0, ""
		if q.args[2] != "0" {
			m = 1
			var set string
			var ok bool
			if set, id, ok = takenSetOf(q.keys[0]); ok {
				e, seen := epochOf[set]
				if !seen {
					sets = append(sets, set, voidedSetOf(set))
					e = len(epochOf) + 1
					epochOf[set] = e
				}
				taken = e
			} else {
				markers = append(markers, q.keys[0])
			}
		}
		n := (len(q.args) - 3) / 6
		shape = fmt.Appendf(shape[:0], "%v %d %d", q.args[2], taken, n)
		at := len(shapes)
		shapes = append(shapes, q.args[2], taken, n)
		for j := range n {
			key := q.keys[m+j]
			k, ok := keyOf[key]
			if !ok {
				buckets = append(buckets, key)
				k = len(buckets)
				keyOf[key] = k
			}
			a := q.args[3+6*j:]
			spec := [5]any{a[0], a[1], a[2], a[3], a[4]}
			l, ok := limitOf[spec]
			if !ok {
				limits = append(limits, limitText(a[0].(int64), a[1].(int64), a[2].(int64), a[3].(int64), a[4].(int64)))
				l = len(limitOf) + 1
				limitOf[spec] = l
			}
			shape = strconv.AppendInt(append(shape, ' '), int64(k), 10)
			shape = strconv.AppendInt(append(shape, ' '), int64(l), 10)
			shapes = append(shapes, k, l)
		}
		s, ok := shapeOf[string(shape)]
		if !ok {
			s = len(shapeOf) + 1
			shapeOf[string(shape)] = s
		} else {
			shapes = shapes[:at]
		}
		if s == prev {
			entries[runAt] = entries[runAt].(int) + 1
		} else {
			runAt, prev = len(entries)+1, s
			entries = append(entries, s, 1)
		}
		if taken > 0 {
			entries = append(entries, id)
		}
		for j := range n {
			entries = append(entries, q.args[3+6*j+5])
		}
	}
	keys := append(append(buckets, markers...), sets...)
	args := make([]any, 0, 7+len(limits)+len(shapes)+len(entries))
	args = append(args, takes[0].args[0], "c", len(takes), len(buckets), len(limitOf), len(shapeOf), len(epochOf))
	args = append(args, limits...)
	args = append(args, shapes...)
	return keys, packNumbers(append(args, entries...)) // the numbers packed, as batchArgs sends them
}
