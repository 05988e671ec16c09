package weigher

import (
	"strings"
	"testing"
)

// allFields are the fields of every request kind and every fields value
// below them.
func allFields() []*fields {
	seen := map[*fields]bool{}
	var all []*fields
	var walk func(f *fields)
	walk = func(f *fields) {
		if f == nil || seen[f] {
			return
		}
		seen[f] = true
		all = append(all, f)
		walk(f.each)
		for _, n := range f.list {
			walk(n.sub)
		}
	}
	for _, f := range []*fields{chatFields, responsesFields, completionsFields, embeddingsFields, imagesFields, messagesFields} {
		walk(f)
	}
	return all
}

// lookupKeys are every field name of every fields value, and each with a
// byte changed, dropped or added, in another case, and keys no field has.
func lookupKeys() []string {
	keys := []string{"", "x", "\\", "é", "modeL", "MODEL", "max_tokens ", "tool_calls\x00"}
	for _, f := range allFields() {
		for _, n := range f.list {
			k := n.name
			keys = append(keys, k, strings.ToUpper(k), k+"s", "_"+k)
			if k != "" {
				keys = append(keys, k[1:], k[:len(k)-1], k[:len(k)/2]+"X"+k[len(k)/2+1:])
			}
		}
	}
	return keys
}

// lookupSameAsNames fails t unless every fields value's lookup of k is
// its names map's.
func lookupSameAsNames(t *testing.T, k string) {
	t.Helper()
	for _, f := range allFields() {
		if f.each != nil {
			continue
		}
		sub, ok := f.lookup(k)
		wantSub, want := f.names[k]
		if ok != want || sub != wantSub {
			t.Fatalf("fields %d: lookup(%q) = %p, %v; names give %p, %v", f.id, k, sub, ok, wantSub, want)
		}
	}
}

// TestLookupSameAsNames: lookup by slot finds what the names map holds,
// for every name of every fields value and for near misses.
func TestLookupSameAsNames(t *testing.T) {
	for _, k := range lookupKeys() {
		lookupSameAsNames(t, k)
	}
	shared := 0
	for _, f := range allFields() {
		for _, s := range f.slots {
			if s == slotShared {
				shared++
			}
		}
	}
	t.Logf("%d fields values, %d slots shared by two names or more", len(allFields()), shared)
}

// FuzzLookupSameAsNames: lookup against the names map on the fuzzer's
// keys.
func FuzzLookupSameAsNames(f *testing.F) {
	for _, k := range lookupKeys()[:40] {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		lookupSameAsNames(t, k)
	})
}

// TestFieldSlotsDistinct: every fields value of the request kinds gives
// each of its names a slot of its own, so that lookup compares one name
// (a shared slot walks the list: chat's "messages" and "max_tokens" so
// cost about 150 instructions of a warm 1 KiB body).
func TestFieldSlotsDistinct(t *testing.T) {
	for _, f := range allFields() {
		if len(f.list) > maxListedFields {
			continue
		}
		for _, n := range f.list {
			if f.slots[nameSlot(n.name, f.mix)] == slotShared {
				t.Errorf("fields %d (%d names): %q shares its slot", f.id, len(f.list), n.name)
			}
		}
	}
}
