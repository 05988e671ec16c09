package sse

import (
	"fmt"
	"strings"
	"testing"
)

// rec is a copy of one delivered event, safe to keep after the callback.
type rec struct {
	Raw       string
	Type      string
	Data      string
	ID        string
	HasData   bool
	IDSet     bool
	Retry     int64
	HasRetry  bool
	Truncated bool
	Partial   bool
	Stray     bool
}

func (r rec) String() string {
	return fmt.Sprintf("%+v", struct {
		Raw, Type, Data, ID                             string
		HasData, IDSet, HasRetry, Trunc, Partial, Stray bool
		Retry                                           int64
	}{
		fmt.Sprintf("%q", r.Raw), r.Type, fmt.Sprintf("%q", r.Data), r.ID,
		r.HasData, r.IDSet, r.HasRetry, r.Truncated, r.Partial, r.Stray, r.Retry,
	})
}

func recOf(raw []byte, ev Event) rec {
	return rec{
		Raw: string(raw), Type: string(ev.Type), Data: string(ev.Data), ID: string(ev.ID),
		HasData: ev.HasData, IDSet: ev.IDSet, Retry: ev.Retry, HasRetry: ev.HasRetry,
		Truncated: ev.Truncated, Partial: ev.Partial, Stray: ev.Stray,
	}
}

// feedAll feeds chunks to s in order and returns every delivered event plus
// Buffered at the end. Each chunk is fed from one read buffer, reused, and
// scribbled over after each Feed, as a reader's next read would: the
// scanner must keep nothing of it. It fails t if a raw slice is empty or if
// the scanner's buffer outgrows its limit.
func feedAll(t testing.TB, s *Scanner, chunks [][]byte) ([]rec, string) {
	t.Helper()
	var recs []rec
	var read []byte
	for k, c := range chunks {
		read = append(read[:0], c...)
		s.Feed(read, func(raw []byte, ev Event) {
			if len(raw) == 0 {
				t.Errorf("chunk %d: empty raw delivered", k)
			}
			if !ev.Truncated && ev.Partial {
				t.Errorf("chunk %d: Partial without Truncated", k)
			}
			recs = append(recs, recOf(raw, ev))
		})
		if n, lim := len(s.Buffered()), s.limit(); n > lim+1 {
			t.Fatalf("chunk %d: %d bytes buffered, limit %d", k, n, lim)
		}
		for i := range read {
			read[i] = '#'
		}
	}
	return recs, string(s.Buffered())
}

// splitBy cuts in into chunks whose lengths cycle through sizes (a zero
// size yields an empty Feed). An empty sizes means one chunk.
func splitBy(in []byte, sizes []int) [][]byte {
	if len(sizes) == 0 {
		return [][]byte{in}
	}
	var out [][]byte
	for k := 0; len(in) > 0; k++ {
		n := min(sizes[k%len(sizes)], len(in))
		if k > 4*len(sizes)+len(in) { // all-zero sizes: stop looping
			n = len(in)
		}
		out = append(out, in[:n])
		in = in[n:]
	}
	return out
}

// bytewise returns in as one-byte chunks.
func bytewise(in []byte) [][]byte {
	return splitBy(in, []int{1})
}

// concat joins every raw and the buffered tail.
func concat(recs []rec, buffered string) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.Raw)
	}
	b.WriteString(buffered)
	return b.String()
}

// normalize removes the split-dependent parts of a scan: it merges the
// pieces of each truncated event into one rec (fields from the first
// piece), and moves an LF that starts a raw (or the buffered tail) back to
// the previous raw when that one ends in CR.
func normalize(recs []rec, buffered string) ([]rec, string) {
	var out []rec
	open := false // the last rec in out is an unfinished truncated event
	for _, r := range recs {
		if open {
			out[len(out)-1].Raw += r.Raw
			open = r.Partial
			continue
		}
		out = append(out, r)
		open = r.Truncated && r.Partial
		if open {
			out[len(out)-1].Partial = false
		}
	}
	for k := 1; k <= len(out); k++ {
		next := &buffered
		if k < len(out) {
			next = &out[k].Raw
		}
		if strings.HasPrefix(*next, "\n") && strings.HasSuffix(out[k-1].Raw, "\r") {
			out[k-1].Raw += "\n"
			*next = (*next)[1:]
		}
	}
	return out, buffered
}

// sameScan reports the first difference between two normalized scans.
func sameScan(a []rec, abuf string, b []rec, bbuf string) string {
	for k := range max(len(a), len(b)) {
		switch {
		case k >= len(a):
			return fmt.Sprintf("event %d: missing, want %v", k, b[k])
		case k >= len(b):
			return fmt.Sprintf("event %d: extra %v", k, a[k])
		case a[k] != b[k]:
			return fmt.Sprintf("event %d:\n got %v\nwant %v", k, a[k], b[k])
		}
	}
	if abuf != bbuf {
		return fmt.Sprintf("buffered %q, want %q", abuf, bbuf)
	}
	return ""
}

// strayBySplit is Event.Stray written the plain way, over one event's raw
// bytes: every line end made LF, the lines split, each field name looked
// at (first: raw starts the stream, whose byte order mark is dropped).
func strayBySplit(raw string, first bool) bool {
	if first {
		raw = strings.TrimPrefix(raw, bom)
	}
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(raw, "\n") {
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		switch name, _, _ := strings.Cut(line, ":"); name {
		case "data", "event", "id", "retry":
		default:
			return true
		}
	}
	return false
}
