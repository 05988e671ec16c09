package sse

import (
	"bytes"
	"testing"
)

// TestDataOutlivesTheRead: an event with one data line hands that line in
// place, so a caller reading into one buffer again and again sees the next
// read's bytes in a Data it kept; a copy taken in the callback is what
// outlives the read. An event whose data line arrived in an earlier read
// than its end still has its data whole (the scanner copied it before that
// read was overwritten).
func TestDataOutlivesTheRead(t *testing.T) {
	var s Scanner
	read := []byte("data: {\"n\":1}\n\n")
	var kept, copied []byte
	s.Feed(read, func(_ []byte, ev Event) {
		kept, copied = ev.Data, bytes.Clone(ev.Data)
	})
	if string(copied) != `{"n":1}` {
		t.Fatalf("data %q", copied)
	}
	if &kept[0] != &read[len("data: ")] {
		t.Errorf("one data line was copied, want it in place")
	}
	copy(read, "data: {\"n\":2}\n\n") // the next read, into the same buffer
	if string(kept) != `{"n":2}` || string(copied) != `{"n":1}` {
		t.Errorf("after the next read: kept %q (the buffer's new bytes), copy %q (want the first event's)", kept, copied)
	}

	// An event split across reads of the same buffer.
	var got []byte
	feed := func(chunk string) {
		read = append(read[:0], chunk...)
		s.Feed(read, func(_ []byte, ev Event) { got = bytes.Clone(ev.Data) })
		for i := range read {
			read[i] = '#'
		}
	}
	feed("data: split\n")
	feed("\n")
	if string(got) != "split" {
		t.Errorf("an event ended in a later read: data %q, want %q", got, "split")
	}
}
