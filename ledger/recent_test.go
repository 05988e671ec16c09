package ledger

import "testing"

// recentLines reads an entry again only when it was not read within
// dedupeWindow of stream-id time, and what it holds stays bounded by the
// entries of one window however long the stream: a month of entries one
// minute apart keeps about 66 hashes, not 43,200.
func TestRecentLinesWindow(t *testing.T) {
	var r recentLines
	win := dedupeWindow.Milliseconds()
	if r.repeat(1, 0) {
		t.Fatal("first entry read as a repeat")
	}
	if !r.repeat(1, win) {
		t.Error("the same bytes dedupeWindow later: read twice, want once")
	}
	const minute = 60_000
	most := 0
	for i := int64(1); i <= 30*24*60; i++ {
		if r.repeat(uint64(1000+i), i*minute) {
			t.Fatalf("entry %d read as a repeat", i)
		}
		if i%1000 == 0 && r.repeat(uint64(1000+i-1), i*minute) == false {
			t.Fatalf("entry %d's predecessor, a minute old, not found", i)
		}
		most = max(most, len(r.at), len(r.order)-r.head)
	}
	if bound := int(win/minute) + 2; most > bound || len(r.order) > 2*bound+1024 {
		t.Errorf("held up to %d hashes (order slice %d), want at most %d: one window's entries", most, len(r.order), bound)
	}
	if r.repeat(1, 30*24*60*minute) {
		t.Error("bytes read a month earlier: still remembered, want forgotten (the window bounds memory)")
	}
}
