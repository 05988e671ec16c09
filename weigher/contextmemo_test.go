package weigher

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// contextTuples are count-context fields as the weighers pass them, and
// tuples that differ from them in one field, by one byte or by where a
// field ends.
func contextTuples() [][4]string {
	tuples := [][4]string{
		{"chat.message", EncodingO200k, "gpt-4o-mini", ""}, {"chat.tools", EncodingO200k, "", ""},
		{"chat.message", EncodingO200k, "gpt-4o-mino", ""}, {"chat.message", EncodingCL100k, "gpt-4o-mini", ""},
		{"chat.message", EncodingO200k, "gpt-4o-mini", "x"}, {"chat.messag", EncodingO200k, "egpt-4o-mini", ""},
		{"", "", "", ""}, {"messages.message", EncodingCL100k, "claude-sonnet-4-5", "thinking"},
	}
	for i := range 150 {
		tuples = append(tuples, [4]string{"responses.item", EncodingO200k, fmt.Sprintf("model-%d", i), ""})
	}
	return tuples
}

// checkContext checks c.context against contextHash for t, and that the
// memo keeps no view of the caller's bytes.
func checkContext(t *testing.T, c *countCache, f [4]string) {
	t.Helper()
	want := c.contextHash(f[0], f[1], f[2], f[3])
	model := []byte(f[2])
	if got := c.context(f[0], f[1], bodyString(model), f[3]); got != want {
		t.Fatalf("context%q = %x, contextHash %x", f, got, want)
	}
	if len(model) > 0 {
		model[0] ^= 0x20 // (for 3 bytes or more, one the slot is not picked by)
	}
	changed := string(model)
	if got, want := c.context(f[0], f[1], changed, f[3]), c.contextHash(f[0], f[1], changed, f[3]); got != want {
		t.Fatalf("context of %q, the caller's bytes changed, = %x, contextHash %x", changed, got, want)
	}
	if got := c.context(f[0], f[1], f[2], f[3]); got != want {
		t.Fatalf("context%q after the caller's bytes changed = %x, contextHash %x", f, got, want)
	}
}

// TestContextMemoSameAsHash: a context, held or made, is the hash of its
// fields, for tuples that share slots and evict each other.
func TestContextMemoSameAsHash(t *testing.T) {
	c := newCountCache(1 << 20)
	for range 3 {
		for _, f := range contextTuples() {
			checkContext(t, c, f)
		}
	}
	var nilCache *countCache
	if got := nilCache.context("chat.message", EncodingO200k, "gpt-4o", ""); got != 0 {
		t.Errorf("caching off: context %x, want 0", got)
	}
}

// TestContextMemoConcurrent: goroutines making overlapping contexts (run
// with -race) each get the hash of their own fields.
func TestContextMemoConcurrent(t *testing.T) {
	c := newCountCache(1 << 20)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				model := fmt.Sprintf("m-%d", (i*5+g)%101)
				if got, want := c.context("chat.message", EncodingO200k, model, ""), c.contextHash("chat.message", EncodingO200k, model, ""); got != want {
					t.Errorf("%s: %x, want %x", model, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzContextMemoSameAsHash: context against contextHash on the fuzzer's
// fields, split from one string at '|', each asked twice and after a
// tuple with one byte changed.
func FuzzContextMemoSameAsHash(f *testing.F) {
	for _, t := range contextTuples()[:8] {
		f.Add(strings.Join(t[:], "|"))
	}
	c := newCountCache(1 << 20)
	f.Fuzz(func(t *testing.T, s string) {
		parts := strings.SplitN(s+"|||", "|", 4)
		parts[3] = strings.TrimSuffix(parts[3], "|||")
		tuple := [4]string{parts[0], parts[1], parts[2], parts[3]}
		checkContext(t, c, tuple)
		if tuple[2] != "" {
			other := tuple
			other[2] = other[2][:len(other[2])-1] + string(rune(other[2][len(other[2])-1]^1))
			checkContext(t, c, other)
		}
		checkContext(t, c, tuple)
	})
}

// TestContextMemoHoldsNoLongName: a context whose fields pass
// maxContextMemoBytes (a caller's model name can be as long as its body
// until the proxy refuses it) is hashed, right, and held in no slot, so
// that the memo holds at most contextSlots × maxContextMemoBytes of what
// callers named.
func TestContextMemoHoldsNoLongName(t *testing.T) {
	c := newCountCache(1 << 20)
	long := strings.Repeat("m", 1<<20)
	for range 2 {
		if got, want := c.context("chat.message", EncodingO200k, long, ""), c.contextHash("chat.message", EncodingO200k, long, ""); got != want {
			t.Fatalf("long model: %x, want %x", got, want)
		}
	}
	for i := range c.contexts {
		if m := c.contexts[i].Load(); m != nil && len(m.model) > maxContextMemoBytes {
			t.Fatalf("slot %d holds a %d-byte model name", i, len(m.model))
		}
	}
}
