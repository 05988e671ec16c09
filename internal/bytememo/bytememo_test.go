package bytememo

import (
	"fmt"
	"strings"
	"testing"
)

// key is a key of MinKey bytes or more, distinct for each i, whose first
// MinKey bytes differ with i (so that keys spread over the sets).
func key(i int, tail string) string {
	k := fmt.Sprintf(`{"i":%d,"pad":"%s"`, i, strings.Repeat("x", MinKey))
	return k + tail + "}"
}

// sameSet returns n keys that fall in one set.
func sameSet(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	want := -1
	for i := 0; len(out) < n; i++ {
		k := key(i, "")
		if s := setOf([]byte(k)); want < 0 || s == want {
			want = s
			out = append(out, k)
		}
		if i > 1<<16 {
			t.Fatal("no keys share a set")
		}
	}
	return out
}

// TestFindExactBytes: a kept key is found at the start of any bytes that
// start with it (what follows is not its), with its value and length;
// bytes that differ in any one byte of the key, a key cut short and bytes
// too short to hold any key are not found.
func TestFindExactBytes(t *testing.T) {
	var m Memo[int]
	k := key(1, `,"more":"text"`)
	*m.KeepString(k) = 7
	for _, c := range []struct {
		name string
		b    string
		v, n int
	}{
		{"alone", k, 7, len(k)},
		{"followed", k + `,{"next":1}]`, 7, len(k)},
		{"cut", k[:len(k)-1], 0, 0},
		{"short", k[:MinKey-1], 0, 0},
		{"empty", "", 0, 0},
	} {
		v, n := m.FindString(c.b)
		got := 0
		if v != nil {
			got = *v
		}
		if got != c.v || n != c.n {
			t.Errorf("%s: %d, %d; want %d, %d", c.name, got, n, c.v, c.n)
		}
	}
	for i := range len(k) {
		b := []byte(k)
		b[i] ^= 1
		if v, _ := m.Find(b); v != nil {
			t.Fatalf("byte %d changed: found", i)
		}
	}
}

// TestKeepOneSlotAKey: keeping a key again returns its own slot with its
// value (one copy of its bytes), and the copy is the memo's own: changing
// the caller's bytes afterwards changes nothing.
func TestKeepOneSlotAKey(t *testing.T) {
	var m Memo[int]
	b := []byte(key(2, ""))
	*m.Keep(b) = 3
	v := m.Keep(b)
	if *v != 3 {
		t.Errorf("kept again: value %d, want 3 (its slot's)", *v)
	}
	*v = 4
	if m.Len() != 1 {
		t.Errorf("%d keys held after keeping one twice, want 1", m.Len())
	}
	orig := string(b)
	b[MinKey+1] = '!'
	if v, _ := m.FindString(orig); v == nil || *v != 4 {
		t.Error("the key's copy changed with the caller's bytes")
	}
	if v, _ := m.Find(b); v != nil {
		t.Error("found for bytes the memo never kept")
	}
}

// TestEvictionInTurn: keys that share a set replace each other oldest
// first, Ways at a time; the replaced key is no longer found, a new slot
// holds the zero value, and the other sets are untouched.
func TestEvictionInTurn(t *testing.T) {
	var m Memo[int]
	keys := sameSet(t, 2*Ways+1)
	other := key(-1, "")
	for setOf([]byte(other)) == setOf([]byte(keys[0])) {
		other += " "
	}
	*m.KeepString(other) = -1
	for i, k := range keys {
		v := m.KeepString(k)
		if *v != 0 {
			t.Fatalf("key %d: a new slot holds %d, want 0", i, *v)
		}
		*v = i + 1
		for j := range i + 1 {
			v, _ := m.FindString(keys[j])
			if found := v != nil; found != (j > i-Ways) {
				t.Fatalf("after key %d: key %d found %v, want %v", i, j, found, j > i-Ways)
			}
			if v != nil && *v != j+1 {
				t.Fatalf("after key %d: key %d holds %d, want %d", i, j, *v, j+1)
			}
		}
	}
	if v, _ := m.FindString(other); v == nil || *v != -1 {
		t.Error("a key of another set was replaced")
	}
	if m.Len() != Ways+1 {
		t.Errorf("%d keys held, want %d", m.Len(), Ways+1)
	}
}

// TestCollisionsKeptApart: keys of one set that share their first MinKey
// bytes (the hashed ones) and differ after them, or in length, are each
// found as themselves.
func TestCollisionsKeptApart(t *testing.T) {
	var m Memo[string]
	base := key(3, "")
	twins := []string{base[:len(base)-1] + `,"a":1}`, base[:len(base)-1] + `,"b":1}`, base[:len(base)-1] + `,"a":12}`, base}
	for _, k := range twins {
		*m.KeepString(k) = k
	}
	for _, k := range twins {
		if v, n := m.FindString(k + "]"); v == nil || *v != k || n != len(k) {
			t.Errorf("%s: not found as itself", k)
		}
	}
}

// TestKeepBounds: keys shorter than MinKey or longer than MaxKey are not
// kept; the bounds themselves are.
func TestKeepBounds(t *testing.T) {
	var m Memo[int]
	for _, c := range []struct {
		n    int
		kept bool
	}{{MinKey - 1, false}, {MinKey, true}, {MaxKey, true}, {MaxKey + 1, false}} {
		k := strings.Repeat(fmt.Sprint(c.n%10), c.n) // no key a prefix of another
		if v := m.KeepString(k); (v != nil) != c.kept {
			t.Errorf("%d bytes: kept %v, want %v", c.n, v != nil, c.kept)
		}
		if v, _ := m.FindString(k); (v != nil) != c.kept {
			t.Errorf("%d bytes: found %v, want %v", c.n, v != nil, c.kept)
		}
	}
}

// TestNoAllocs: a look-up, and keeping a key in a slot whose copy has
// the room, allocate nothing.
func TestNoAllocs(t *testing.T) {
	var m Memo[int]
	keys := sameSet(t, 2*Ways)
	for _, k := range keys {
		m.KeepString(k + strings.Repeat(" ", 64)) // room in every slot
	}
	i := 0
	if a := testing.AllocsPerRun(100, func() {
		m.KeepString(keys[i%len(keys)])
		m.FindString(keys[(i+3)%len(keys)])
		i++
	}); a != 0 {
		t.Errorf("%v allocations a keep and a find, want 0", a)
	}
}

// BenchmarkFind: a hit, the warm path of both users.
func BenchmarkFind(b *testing.B) {
	var m Memo[int]
	k := key(4, strings.Repeat(`,"p":{"type":"string"}`, 10))
	*m.KeepString(k) = 1
	doc := k + `}]`
	b.ReportAllocs()
	for b.Loop() {
		if v, _ := m.FindString(doc); v == nil {
			b.Fatal("not found")
		}
	}
}

// TestSetsSpread: tool schemas that share their first 31 bytes
// (`{"type":"object","properties":{"`) and differ in a property's name
// fall in every set.
func TestSetsSpread(t *testing.T) {
	var seen [Sets]int
	for i := range 64 {
		k := fmt.Sprintf(`{"type":"object","properties":{"field_%d":{"type":"string","description":"x"}}}`, i)
		seen[setOf([]byte(k))]++
	}
	for s, n := range seen {
		if n == 0 {
			t.Errorf("set %d: none of 64 schemas (%v)", s, seen)
		}
	}
}
