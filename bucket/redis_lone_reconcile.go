package bucket

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
)

// rcFirst is the first entry of a reconcileCall as add was given it: its
// mode in reconcile.lua ('h', 'r', 'v', 'w' or 'n'), its marker set's key
// (modes h and w), its request id and its deltas (those at idx, when idx
// is not nil). The slices are the caller's, not copied: a call is built
// and sent within one ReconcileBatch.
type rcFirst struct {
	mode   byte
	set    string
	id     string
	deltas []Delta
	idx    []int
}

// loneMaxDeltas bounds the deltas of a lone reconciliation; a call with
// more goes in the batch layout.
const loneMaxDeltas = 8

// loneArgs returns the KEYS and ARGV of c in reconcile.lua's lone layout
// (its reconcileLone), or nil ARGV when c does not fit it: c must hold one
// entry, of mode h (a reconciliation of an id of NewRequestID's form),
// whose deltas of non-zero units, at most loneMaxDeltas, are on distinct
// keys (none of them the marker set's), each a token bucket's or a
// quota's. KEYS are the marker set's key, then each delta's bucket key;
// ARGV the shape ("R <DedupFor ms>;<limit>;…", each limit's text as
// limitText writes it, which the library reads once per text and keeps),
// the request id, each delta's units and, with RedisOptions.Now, now
// (µs). Redis then stores what the batch layout would have stored, byte
// for byte: the same values, TTLs and marker set.
func (c *reconcileCall) loneArgs(r *Redis) ([]string, []any) {
	f := &c.first
	if len(c.owners) != 1 || f.mode != 'h' {
		return nil, nil
	}
	n := len(f.deltas)
	if f.idx != nil {
		n = len(f.idx)
	}
	var keys [loneMaxDeltas + 1]string
	var units [loneMaxDeltas]int64
	keys[0] = f.set
	shape := make([]byte, 0, 2+len(r.dedupFor)+48*2)
	shape = append(append(shape, "R "...), r.dedupFor...)
	count := 0
	for j := range n {
		d := f.deltas[j]
		if f.idx != nil {
			d = f.deltas[f.idx[j]]
		}
		if d.Units == 0 {
			continue
		}
		if count == loneMaxDeltas || d.Limit.Concurrent || d.Limit.IsWindow() || d.Key == f.set {
			return nil, nil
		}
		for _, k := range keys[1 : 1+count] {
			if k == d.Key {
				return nil, nil
			}
		}
		a := limitArgs(d.Limit)
		if a[4] < 0 || a[4] == 0 && a[1] == 0 { // a window counter or an in-flight limit (lua/core.lua kindOf)
			return nil, nil
		}
		shape = append(shape, ';')
		for i, v := range a {
			if i > 0 {
				shape = append(shape, ' ')
			}
			shape = strconv.AppendInt(shape, v, 10)
		}
		keys[1+count], units[count] = d.Key, d.Units
		count++
	}
	// The call's KEYS, the set then the buckets in order of first use, are
	// these when the keys are distinct, as checked.
	if count == 0 || !slices.Equal(c.keys(), keys[:1+count]) {
		return nil, nil
	}
	args := make([]any, 0, count+3)
	args = append(args, string(shape), f.id)
	for _, u := range units[:count] {
		args = append(args, u)
	}
	if c.now != "" {
		args = append(args, c.now)
	}
	return c.keys(), args
}

// runArgs returns the KEYS and ARGV of c in reconcile.lua's run layout
// (its reconcileRun), or nil ARGV when c does not fit it: c must hold two
// entries or more, all of mode h in one marker set (ids of NewRequestID's
// form of one epoch and slot) and of one shape (the same deltas of
// non-zero units, at most loneMaxDeltas, on the same distinct keys, none
// of them the marker set's, under the same limits, each a token bucket's
// or a quota's), as one run. KEYS are the marker set's key, then each
// delta's bucket key; ARGV the shape ("N <DedupFor ms>;<limit>;…", as
// loneArgs writes it after its "R "), every entry's units packed (8 bytes
// a number, as the batch layout's last ARGV), each entry's request id
// and, with RedisOptions.Now, now (µs). Redis then stores what the batch
// layout would have stored, byte for byte, and replies alike. At
// concurrency 1 a node's reconciliations of 5 ms (DefaultLinger) are such
// a call: some 12 of them cost Redis some 60k instructions less so than
// in the batch layout (TestCallgrindScripts, "reconcile.lua, batches of
// 12" against its "…, batch layout": 208k against 267k).
func (c *reconcileCall) runArgs(r *Redis) ([]string, []any) {
	m := len(c.owners)
	if m < 2 || len(c.sets) != 1 || c.in.shapes.len() != 1 || c.first.mode != 'h' || len(c.shapes) < 3 {
		return nil, nil
	}
	n, ok := c.shapes[2].(int) // the shape: "h", its set, its delta count, then a key and a limit index a delta
	if !ok || n == 0 || n > loneMaxDeltas || len(c.shapes) != 3+2*n || len(c.entries) != 2+m*n || len(c.keys()) != 1+n {
		return nil, nil
	}
	f := &c.first
	shape := make([]byte, 0, 2+len(r.dedupFor)+48*n)
	shape = append(append(shape, "N "...), r.dedupFor...)
	count := 0
	all := len(f.deltas)
	if f.idx != nil {
		all = len(f.idx)
	}
	for j := range all {
		d := f.deltas[j]
		if f.idx != nil {
			d = f.deltas[f.idx[j]]
		}
		if d.Units == 0 {
			continue
		}
		// The KEYS are the set then the buckets in order of first use: each
		// delta's key is the next when the keys are distinct (which the
		// count of KEYS, checked above, already implies).
		if count == n || d.Limit.Concurrent || d.Limit.IsWindow() || c.shapes[3+2*count] != 2+count {
			return nil, nil
		}
		a := limitArgs(d.Limit)
		if a[4] < 0 || a[4] == 0 && a[1] == 0 { // a window counter or an in-flight limit (lua/core.lua kindOf)
			return nil, nil
		}
		shape = append(append(shape, ';'), c.limits[c.shapes[4+2*count].(int)-1].(string)...)
		count++
	}
	if count != n {
		return nil, nil
	}
	units := make([]byte, 0, 8*m*n)
	for _, u := range c.entries[2:] {
		v, ok := u.(int64)
		if !ok {
			return nil, nil
		}
		units = binary.LittleEndian.AppendUint64(units, math.Float64bits(float64(v)))
	}
	args := make([]any, 0, m+3)
	args = append(args, string(shape), string(units))
	args = append(args, c.sets[0].ids...)
	if c.now != "" {
		args = append(args, c.now)
	}
	return c.keys(), args
}
