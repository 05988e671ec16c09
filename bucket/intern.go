package bucket

// internScan is how many items an index holds before it builds a map:
// up to it, a lookup compares them in turn, which costs less than making
// a map (a lone Reconcile or take names a few keys, one or two limits and
// one shape).
const internScan = 8

// index numbers the distinct values added to it, from 1 in order of
// first use: the keys, limits and shapes of one script call. Its zero
// value is empty and ready; it keeps no map until it holds more than
// internScan values. Its items may point into the index itself: an index
// must not be copied once used. It is not safe for concurrent use.
type index[K comparable] struct {
	items []K
	of    map[K]int // nil while len(items) <= internScan
	buf   [4]K      // items' first backing array: a few values cost no allocation
}

// add returns the number of v (from 1), adding it when new (added true).
func (x *index[K]) add(v K) (i int, added bool) {
	if x.of != nil {
		if i, ok := x.of[v]; ok {
			return i, false
		}
	} else {
		for j, w := range x.items {
			if w == v {
				return j + 1, false
			}
		}
	}
	if x.items == nil {
		x.items = x.buf[:0]
	}
	x.items = append(x.items, v)
	i = len(x.items)
	switch {
	case x.of != nil:
		x.of[v] = i
	case i > internScan:
		x.of = make(map[K]int, 2*i)
		for j, w := range x.items {
			x.of[w] = j + 1
		}
	}
	return i, true
}

// len is the number of distinct values added.
func (x *index[K]) len() int { return len(x.items) }

// interner numbers what the calls of reconcile.lua and takebatch.lua send
// once however many entries name it: the distinct keys (KEYS), limits (as
// both scripts read them, limitArgs) and shapes (a script's signature of
// what its entries of one kind share), each from 1 in order of first use.
// Its zero value is empty and ready; it is not safe for concurrent use.
type interner struct {
	keys   index[string]
	limits index[[5]int64]
	shapes index[string]
}

// key returns the number of key among the KEYS, adding it when new.
func (in *interner) key(key string) int {
	i, _ := in.keys.add(key)
	return i
}

// limit returns the number of a limit's ARGV, and whether it is new.
func (in *interner) limit(a [5]int64) (int, bool) { return in.limits.add(a) }

// shape returns the number of a shape's signature, and whether it is new.
// A lookup of a known signature does not allocate; a new one is copied.
func (in *interner) shape(sig []byte) (int, bool) {
	x := &in.shapes
	if x.of != nil {
		if i, ok := x.of[string(sig)]; ok {
			return i, false
		}
	} else {
		for j, w := range x.items {
			if w == string(sig) {
				return j + 1, false
			}
		}
	}
	return x.add(string(sig))
}
