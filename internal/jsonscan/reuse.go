package jsonscan

import "github.com/llmguard/llmguard/internal/bytememo"

// Objects seen again ([Options.Reuse]). A client sends the same tool
// definitions with every request; a list whose descriptions change (a
// date, a nonce) is new to the weigher's count cache, which can vouch
// only for whole lists and elements (Known), but the JSON schema of each
// tool's parameters is not: its keys, strings and nested objects were the
// most structure a cold 1 KiB chat body's scan met (perf21). A scanner
// that checked such an object remembers its bytes and, meeting the same
// bytes again where the same checks apply, steps over them.
//
// Why that finds every problem a full scan finds: an object value is
// self-delimiting (it ends at the '}' that closes its '{', whatever
// follows), so a document whose bytes at i start with a remembered
// object's bytes holds that object at i. The checks inside an object
// depend on its bytes, the options (DuplicateKeys, FoldCase, UTF8, the
// depth limit) and the depth it opens at alone: key comparisons are among
// its own objects' keys, the depth limit counts from its container's
// depth, and nothing is recorded inside it (Layout records members at
// depth 1 to 3; a remembered object's container is at depth 3 or more, so
// its own keys are at 4 or more). An entry keeps the options and the
// container's depth, and is found only under the same ones. An object is
// remembered only once it closed with its checks passed.
//
// The memo (a bytememo.Memo: 32 objects of 64 bytes to 4 KiB, 128 KiB
// held at most, one slot an object's bytes) belongs to its scanner (one
// check at a time); it is kept across checks with the scanner (pooled,
// or kept with a Layout). An object met again under other options or at
// another depth is checked and then replaces its slot's mark.
type objectMemo = bytememo.Memo[objMark]

// objMark is what a remembered object passed under: the options
// (objOptions) and its container's depth.
type objMark struct {
	opts  uint64
	depth int
}

// objOptions packs what the checks inside an object depend on besides its
// bytes and depth: the depth limit and the three checks.
func (s *scanner) objOptions() uint64 {
	o := uint64(uint32(s.max)) << 3
	if s.dup {
		o |= 1
	}
	if s.fold {
		o |= 2
	}
	if s.utf8 {
		o |= 4
	}
	return o
}

// remembered returns the length of a remembered object that b starts
// with, remembered under s's options in a container at depth; 0 when
// there is none.
func (s *scanner) remembered(b []byte, depth int) int {
	if m, l := s.memo.Find(b); m != nil && *m == (objMark{s.objOptions(), depth}) {
		return l
	}
	return 0
}

// remember keeps obj, an object that passed its checks under s's options
// in a container at depth (bytememo.Memo.Keep: not when shorter than 64
// bytes or longer than 4 KiB).
func (s *scanner) remember(obj []byte, depth int) {
	if m := s.memo.Keep(obj); m != nil {
		*m = objMark{s.objOptions(), depth}
	}
}

// reusedAt reports whether the object value at b[i] (i ≥ 1, b[i-1] a
// colon) follows one of Options.Reuse's names written as a key right
// before it, with no whitespace (`"parameters":{`). It reads the bytes
// only: a longer key that ends so (`"x\"parameters"`) passes too, which
// costs a look-up and at worst a slot, never a wrong verdict (what the
// memo finds is an object's bytes, wherever they stand).
func (s *scanner) reusedAt(i int) bool {
	b := s.b
	if b[i-2] != '"' {
		return false
	}
	for _, name := range s.reuse {
		if q := i - 3 - len(name); q >= 0 && b[q] == '"' && string(b[q+1:i-2]) == name {
			return true
		}
	}
	return false
}
