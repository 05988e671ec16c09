// Package bytememo is a small fixed-size memo keyed by exact bytes and
// found by prefix: given the rest of a document from some offset, it finds
// a remembered key the document continues with there. Its users remember
// self-delimiting values (a JSON object, which ends at the brace that
// closes it whatever follows), so a key found at an offset is the value
// there, and the memo saves the walk that would find its end: the
// strict scan's (jsonscan.Options.Reuse: a checked object stepped over)
// and the weigher's count of a tool's parameters schema
// (weigher/schemamemo.go).
//
// Why not a general cache (otter, already the count cache's): a look-up
// here must not know the key's length, which is what the walk it saves
// would find; otter keys on whole comparable keys (a string copy and an
// allocation an entry) and pays for concurrent use, which neither user
// needs (each memo belongs to one goroutine at a time, pooled).
package bytememo

import (
	"encoding/binary"
	"unsafe"
)

// The memo's shape: Sets sets of Ways slots each; keys of MinKey to
// MaxKey bytes; the set of a key picked by a hash of its first MinKey
// bytes (so that a look-up can pick it before knowing the key's end).
// A memo holds at most Sets × Ways × MaxKey = 128 KiB of keys, about
// 8 KiB for a dozen typical tool schemas.
const (
	Sets   = 8
	Ways   = 4
	MinKey = 64
	MaxKey = 4 << 10
)

// setBits is log2(Sets).
const setBits = 3

// Memo remembers up to Sets × Ways keys, each with a value of type V,
// one slot a key: keeping a key again reuses its slot (one copy of its
// bytes). Keys that share a set replace each other in turn (the oldest
// first): a memo forgets, it never answers for other bytes. The zero
// value is an empty memo; a Memo is not safe for concurrent use, and its
// size is fixed (Sets × Ways × (24 + the size of V) bytes, plus the keys'
// copies, reused when a slot is replaced).
type Memo[V any] struct {
	sets [Sets][Ways]slot[V]
	next [Sets]uint8 // the way the next new key of a set replaces
}

// slot is one remembered key (empty: a free slot) and its value.
type slot[V any] struct {
	key []byte
	val V
}

// setOf is the set of a key or document starting b (at least MinKey
// bytes): its first MinKey bytes folded in four multiplied words, some 25
// instructions where maphash.Bytes took about 70 with its call. It is not
// seeded: keys aimed at one set make the memo forget, which any 32 keys
// do anyway (a memo a user shares with others, a pooled one, is emptied
// by anybody's 32 new keys), never answer wrongly.
func setOf(b []byte) int {
	b = b[:MinKey]
	le := binary.LittleEndian
	h := (le.Uint64(b[0:]) ^ le.Uint64(b[32:])) * 0x9e3779b97f4a7c15
	h ^= (le.Uint64(b[8:]) ^ le.Uint64(b[40:])) * 0xc2b2ae3d27d4eb4f
	h ^= (le.Uint64(b[16:]) ^ le.Uint64(b[48:])) * 0x165667b19e3779f9
	h ^= (le.Uint64(b[24:]) ^ le.Uint64(b[56:])) * 0x27d4eb2f165667c5
	return int((h * 0x9e3779b97f4a7c15) >> (64 - setBits))
}

// Find returns the value kept with the key that b starts with, and the
// key's length in bytes; nil and 0 when no key kept is a prefix of b.
// The value may be written through the pointer (until the next Keep).
func (m *Memo[V]) Find(b []byte) (*V, int) {
	if len(b) < MinKey {
		return nil, 0 // no key kept is this short
	}
	set := &m.sets[setOf(b)]
	for i := range set {
		sl := &set[i]
		if l := len(sl.key); l > 0 && l <= len(b) && string(sl.key) == string(b[:l]) {
			return &sl.val, l
		}
	}
	return nil, 0
}

// FindString is Find of s's bytes.
func (m *Memo[V]) FindString(s string) (*V, int) {
	return m.Find(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Keep returns the slot of key for its value to be written: the key's
// own when it is kept already (its value as it was), else the oldest of
// its set's, holding a copy of key and the zero V. It returns nil for a
// key shorter than MinKey or longer than MaxKey, which is not kept.
func (m *Memo[V]) Keep(key []byte) *V {
	if len(key) < MinKey || len(key) > MaxKey {
		return nil
	}
	k := setOf(key)
	set := &m.sets[k]
	for i := range set {
		if string(set[i].key) == string(key) {
			return &set[i].val
		}
	}
	w := m.next[k]
	m.next[k] = (w + 1) % Ways
	sl := &set[w]
	sl.key = append(sl.key[:0], key...)
	var zero V
	sl.val = zero
	return &sl.val
}

// KeepString is Keep of s's bytes (copied when kept).
func (m *Memo[V]) KeepString(s string) *V {
	return m.Keep(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// Len is the number of keys m holds (at most Sets × Ways).
func (m *Memo[V]) Len() int {
	n := 0
	for k := range m.sets {
		for i := range m.sets[k] {
			if len(m.sets[k][i].key) > 0 {
				n++
			}
		}
	}
	return n
}
