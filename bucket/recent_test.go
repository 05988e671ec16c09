package bucket

import (
	"strings"
	"testing"
)

// TestRecentIDsTellLongIDsApart: ids are kept inline (up to 24 bytes whole,
// longer ones by prefix and hash); ids that share a prefix, or differ only
// in length, are still different ids.
func TestRecentIDsTellLongIDsApart(t *testing.T) {
	var r recentIDs
	const window = 1_000_000
	long := strings.Repeat("x", 30)
	ids := []string{"", "a", "a\x00", strings.Repeat("y", 24), strings.Repeat("y", 25), long + "a", long + "b", long + "ab"}
	for i, id := range ids {
		if r.seen(id, 0, window, 100) {
			t.Errorf("id %d (%q) seen before it was recorded", i, id)
		}
	}
	for i, id := range ids {
		if !r.seen(id, 1, window, 100) {
			t.Errorf("id %d (%q) not remembered", i, id)
		}
	}
	if r.len() != len(ids) {
		t.Errorf("%d ids remembered, want %d", r.len(), len(ids))
	}
}
