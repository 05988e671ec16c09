package weigher

import (
	"strings"
	"sync/atomic"
)

// modelNames holds copies of the model names bodies named lately, so that
// an Estimate's Model (which must not alias the body) is a copy made once
// per name, not one allocation per request: a warm 1 KiB chat body spent
// about 700 of its instructions copying "gpt-4o-mini". Direct-mapped, one
// name a slot, a name that lands on another's slot replacing it (a miss
// costs the copy it always cost, and one more allocation). Safe for
// concurrent use: a slot holds an immutable string, swapped atomically.
type modelNames struct {
	slots [modelNameSlots]atomic.Pointer[string]
}

// modelNameSlots is how many names the table holds at most.
const modelNameSlots = 32

// maxModelNameBytes is the longest name, in bytes, the table holds;
// longer names are copied each time.
const maxModelNameBytes = 64

// name returns a copy of s (one not aliasing s's bytes): the one held,
// when s is held, else a new one, held from then on. A nil table copies.
func (t *modelNames) name(s string) string {
	if s == "" {
		return ""
	}
	if t == nil || len(s) > maxModelNameBytes {
		return strings.Clone(s)
	}
	// The slot: a few bytes' mix (a name a caller aims at another's slot
	// costs the caller a copy, as before).
	h := uint(len(s))*0x9e37 ^ uint(s[0])*0x85eb ^ uint(s[len(s)-1])*0xc2b3 ^ uint(s[len(s)/2])*0x27d4
	slot := &t.slots[(h^h>>7)%modelNameSlots]
	if p := slot.Load(); p != nil && *p == s {
		return *p
	}
	c := strings.Clone(s)
	slot.Store(&c)
	return c
}
