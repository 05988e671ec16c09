package bucket

import (
	"fmt"
	"testing"
)

// TestSlotOf checks the hash slot rules against the examples of the Redis
// Cluster specification.
func TestSlotOf(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31C3", got)
	}
	for _, tc := range []struct{ key, sameAs string }{
		{"{user1000}.following", "user1000"},
		{"{user1000}.followers", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"}, // empty tag: the whole key
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"llmguard:{acme}:tpm:alice", "acme"},
		{"no tag", "no tag"},
		{"open{only", "open{only"},
	} {
		if got, want := slotOf(tc.key), crc16(tc.sameAs)%slots; got != want {
			t.Errorf("slotOf(%q) = %d, want %d (the slot of %q)", tc.key, got, want, tc.sameAs)
		}
	}
	if got := slotOf("foo"); got != 12182 {
		t.Errorf("slotOf(foo) = %d, want 12182", got)
	}
}

// TestMarkerKeySlot checks that a request's marker lands in its bucket's
// slot, whether the key has a hash tag or not.
func TestMarkerKeySlot(t *testing.T) {
	for i := range 2000 {
		for _, key := range []string{
			fmt.Sprintf("llmguard:{t%d}:tpm:u", i),
			fmt.Sprintf("untagged-%d", i),
			fmt.Sprintf("odd{}%d{x}", i),
		} {
			if m := markerKey(key, "req"); slotOf(m) != slotOf(key) {
				t.Fatalf("marker %q is in slot %d, its bucket %q in %d", m, slotOf(m), key, slotOf(key))
			}
		}
	}
}
