package sse

import (
	"bytes"
	"strings"
	"testing"
)

// scanCase is one named input, given as the chunks fed in order, with the
// events and buffered tail expected for exactly that chunking.
type scanCase struct {
	name     string
	chunks   []string
	want     []rec
	buffered string
}

var scanCases = []scanCase{
	{
		name:   "LF",
		chunks: []string{"data: hello\n\n"},
		want:   []rec{{Raw: "data: hello\n\n", Data: "hello", HasData: true}},
	},
	{
		name:   "CRLF",
		chunks: []string{"data: a\r\ndata: b\r\n\r\n"},
		want:   []rec{{Raw: "data: a\r\ndata: b\r\n\r\n", Data: "a\nb", HasData: true}},
	},
	{
		name:   "CR only",
		chunks: []string{"event: x\rdata: y\r\rdata: z\r\r"},
		want: []rec{
			{Raw: "event: x\rdata: y\r\r", Type: "x", Data: "y", HasData: true},
			{Raw: "data: z\r\r", Data: "z", HasData: true},
		},
	},
	{
		name:   "mixed endings",
		chunks: []string{"data: 1\r\ndata: 2\rdata: 3\n\r\ndata: 4\n\r"},
		want: []rec{
			{Raw: "data: 1\r\ndata: 2\rdata: 3\n\r\n", Data: "1\n2\n3", HasData: true},
			{Raw: "data: 4\n\r", Data: "4", HasData: true},
		},
	},
	{
		name:   "CR|LF split inside an event is one line ending",
		chunks: []string{"data: a\r", "\ndata: b\r", "\n\r\n"},
		want:   []rec{{Raw: "data: a\r\ndata: b\r\n\r\n", Data: "a\nb", HasData: true}},
	},
	{
		name:   "CR|LF split after the blank line: event at once, LF starts the next raw",
		chunks: []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"},
		want: []rec{
			{Raw: "data: a\r\n\r", Data: "a", HasData: true},
			{Raw: "\ndata: b\r\n\r\n", Data: "b", HasData: true},
		},
	},
	{
		name:     "CR|LF split after the last blank line: LF is buffered",
		chunks:   []string{"data: a\r\n\r", "\n"},
		want:     []rec{{Raw: "data: a\r\n\r", Data: "a", HasData: true}},
		buffered: "\n",
	},
	{
		name:   "comments",
		chunks: []string{": ping\n\n: c\ndata: x\n:\n\n"},
		want: []rec{
			{Raw: ": ping\n\n"},
			{Raw: ": c\ndata: x\n:\n\n", Data: "x", HasData: true},
		},
	},
	{
		name:   "multi-line data",
		chunks: []string{"data: {\"a\":\ndata: 1}\ndata: \n\n"},
		want:   []rec{{Raw: "data: {\"a\":\ndata: 1}\ndata: \n\n", Data: "{\"a\":\n1}\n", HasData: true}},
	},
	{
		name:   "data without colon",
		chunks: []string{"data\ndata\ndata: x\n\n"},
		want:   []rec{{Raw: "data\ndata\ndata: x\n\n", Data: "\n\nx", HasData: true}},
	},
	{
		name:   "BOM skipped for parsing, kept in raw",
		chunks: []string{"\xEF\xBB\xBFdata: x\n\n"},
		want:   []rec{{Raw: "\xEF\xBB\xBFdata: x\n\n", Data: "x", HasData: true}},
	},
	{
		name:   "BOM split across feeds",
		chunks: []string{"\xEF", "\xBB", "\xBFdata: x\n\n"},
		want:   []rec{{Raw: "\xEF\xBB\xBFdata: x\n\n", Data: "x", HasData: true}},
	},
	{
		name:   "BOM alone then blank line",
		chunks: []string{"\xEF\xBB\xBF", "\ndata: y\n\n"},
		want: []rec{
			{Raw: "\xEF\xBB\xBF\n"},
			{Raw: "data: y\n\n", Data: "y", HasData: true},
		},
	},
	{
		name:   "only one BOM is skipped",
		chunks: []string{"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"},
		want:   []rec{{Raw: "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", Stray: true}},
	},
	{
		name:   "BOM after the first line is a field name byte",
		chunks: []string{"\n\xEF\xBB\xBFdata: x\n\n"},
		want:   []rec{{Raw: "\n"}, {Raw: "\xEF\xBB\xBFdata: x\n\n", Stray: true}},
	},
	{
		name:   "field with no space, or two",
		chunks: []string{"data:x\ndata:  y\n\n"},
		want:   []rec{{Raw: "data:x\ndata:  y\n\n", Data: "x\n y", HasData: true}},
	},
	{
		name:   "empty data line still dispatches",
		chunks: []string{"data:\n\ndata\n\n"},
		want: []rec{
			{Raw: "data:\n\n", HasData: true},
			{Raw: "data\n\n", HasData: true},
		},
	},
	{
		name:   "colon inside the value",
		chunks: []string{"data: a: b\n\n"},
		want:   []rec{{Raw: "data: a: b\n\n", Data: "a: b", HasData: true}},
	},
	{
		name:   "id and retry",
		chunks: []string{"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"},
		want: []rec{
			{Raw: "id: 7\nretry: 1500\ndata: a\n\n", Data: "a", HasData: true, ID: "7", IDSet: true, Retry: 1500, HasRetry: true},
			{Raw: "data: b\n\n", Data: "b", HasData: true, ID: "7"},
			{Raw: "id\ndata: c\n\n", Data: "c", HasData: true, IDSet: true},
		},
	},
	{
		name:   "invalid retry values ignored",
		chunks: []string{"retry: 1x\nretry:\nretry: 12 \nretry: -1\n\n"},
		want:   []rec{{Raw: "retry: 1x\nretry:\nretry: 12 \nretry: -1\n\n"}},
	},
	{
		name:   "huge retry saturates",
		chunks: []string{"retry: 99999999999999999999999\n\n"},
		want:   []rec{{Raw: "retry: 99999999999999999999999\n\n", Retry: 1<<63 - 1, HasRetry: true}},
	},
	{
		name:   "id with NUL ignored",
		chunks: []string{"id: 1\n\nid: a\x00b\ndata\n\n"},
		want: []rec{
			{Raw: "id: 1\n\n", ID: "1", IDSet: true},
			{Raw: "id: a\x00b\ndata\n\n", ID: "1", HasData: true},
		},
	},
	{
		name:   "event type",
		chunks: []string{"event: add\ndata: x\n\nevent: \ndata: y\n\n"},
		want: []rec{
			{Raw: "event: add\ndata: x\n\n", Type: "add", Data: "x", HasData: true},
			{Raw: "event: \ndata: y\n\n", Data: "y", HasData: true},
		},
	},
	{
		name:   "unknown fields and space before colon ignored",
		chunks: []string{"data : x\nfoo: bar\nDATA: y\n\n"},
		want:   []rec{{Raw: "data : x\nfoo: bar\nDATA: y\n\n", Stray: true}},
	},
	{
		name:   "lone blank lines are events without data",
		chunks: []string{"\n\r\n\r"},
		want:   []rec{{Raw: "\n"}, {Raw: "\r\n"}, {Raw: "\r"}},
	},
	{
		name:     "incomplete tail is buffered",
		chunks:   []string{"data: x\n\ndata: par", "tial\n"},
		want:     []rec{{Raw: "data: x\n\n", Data: "x", HasData: true}},
		buffered: "data: partial\n",
	},
	{
		name:   "UTF-8 split mid-rune",
		chunks: []string{"data: h\xC3", "\xA9llo \xE2\x82", "\xAC\n\n"},
		want:   []rec{{Raw: "data: h\xC3\xA9llo \xE2\x82\xAC\n\n", Data: "héllo €", HasData: true}},
	},
	{
		name:   "empty feeds",
		chunks: []string{"", "data: x\n", "", "\n", ""},
		want:   []rec{{Raw: "data: x\n\n", Data: "x", HasData: true}},
	},
}

func chunksOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for k, s := range ss {
		out[k] = []byte(s)
	}
	return out
}

func TestScannerCases(t *testing.T) {
	for _, tc := range scanCases {
		t.Run(tc.name, func(t *testing.T) {
			var s Scanner
			got, buf := feedAll(t, &s, chunksOf(tc.chunks))
			if d := sameScan(got, buf, tc.want, tc.buffered); d != "" {
				t.Fatalf("as given: %s", d)
			}
			// Every other split, including one shot and byte by byte,
			// yields the same normalized scan.
			in := []byte(strings.Join(tc.chunks, ""))
			want, wbuf := normalize(tc.want, tc.buffered)
			splits := [][]int{nil, {1}, {2}, {3}, {1, 2, 5}}
			for cut := range len(in) + 1 {
				splits = append(splits, []int{cut, len(in)})
			}
			for _, sizes := range splits {
				s.Reset()
				got, buf := feedAll(t, &s, splitBy(in, sizes))
				if c := concat(got, buf); c != string(in) {
					t.Fatalf("split %v: concatenation %q, want %q", sizes, c, in)
				}
				g, gbuf := normalize(got, buf)
				if d := sameScan(g, gbuf, want, wbuf); d != "" {
					t.Fatalf("split %v: %s", sizes, d)
				}
			}
		})
	}
}

func TestScannerLongLine(t *testing.T) {
	const size = 1 << 20
	value := bytes.Repeat([]byte("abcdefgh"), size/8)
	in := append(append([]byte("data: "), value...), "\n\ndata: after\n\n"...)
	var s Scanner
	got, buf := feedAll(t, &s, splitBy(in, []int{4096}))
	if len(got) != 2 || buf != "" {
		t.Fatalf("got %d events, buffered %d bytes; want 2 and 0", len(got), len(buf))
	}
	if got[0].Data != string(value) || got[0].Truncated {
		t.Fatalf("event 0: data of %d bytes (truncated %v), want %d", len(got[0].Data), got[0].Truncated, len(value))
	}
	if got[1].Data != "after" {
		t.Fatalf("event 1: data %q, want %q", got[1].Data, "after")
	}
	if c := concat(got, buf); c != string(in) {
		t.Fatal("concatenation differs from input")
	}
}

// TestScannerLinear would take minutes if a Feed rescanned buffered bytes or
// searched past the next line ending for every line.
func TestScannerLinear(t *testing.T) {
	t.Run("1 MiB line byte by byte", func(t *testing.T) {
		in := append(append([]byte("data: "), bytes.Repeat([]byte{'x'}, 1<<20)...), "\n\n"...)
		var s Scanner
		n := 0
		for k := range in {
			s.Feed(in[k:k+1], func(raw []byte, ev Event) {
				n++
				if len(raw) != len(in) || len(ev.Data) != 1<<20 {
					t.Errorf("raw %d bytes, data %d", len(raw), len(ev.Data))
				}
			})
		}
		if n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
	})
	t.Run("4 MiB of CR-only lines in one feed", func(t *testing.T) {
		in := bytes.Repeat([]byte("a\r"), 2<<20)
		in = append(in, '\r')
		var s Scanner
		n := 0
		s.Feed(in, func(raw []byte, ev Event) { n++ })
		if n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
	})
}

func TestScannerBytewiseEqualsOneShot(t *testing.T) {
	in := openAIStream(200)
	in = append([]byte("\xEF\xBB\xBF: keep-alive\r\n\r\nretry: 3000\r\nid: 0\r\n\r\n"), in...)
	in = append(in, "event: done\rdata\r\r"...)
	var s Scanner
	one, obuf := feedAll(t, &s, [][]byte{in})
	if len(one) != 205 {
		t.Fatalf("one shot: %d events, want 205", len(one))
	}
	s.Reset()
	each, ebuf := feedAll(t, &s, bytewise(in))
	if c := concat(each, ebuf); c != string(in) {
		t.Fatal("byte by byte: concatenation differs from input")
	}
	o, obuf := normalize(one, obuf)
	e, ebuf := normalize(each, ebuf)
	if d := sameScan(e, ebuf, o, obuf); d != "" {
		t.Fatal(d)
	}
}

func TestScannerTruncated(t *testing.T) {
	big := strings.Repeat("y", 1000)
	in := "id: 1\ndata: head\ndata: " + big + "\nid: 2\n\ndata: after\r\n\r\n"
	for _, sizes := range [][]int{nil, {1}, {7}, {100}} {
		s := Scanner{MaxEventBytes: 100}
		got, buf := feedAll(t, &s, splitBy([]byte(in), sizes))
		if c := concat(got, buf); c != in {
			t.Fatalf("split %v: concatenation differs from input", sizes)
		}
		n, _ := normalize(got, buf)
		if len(n) != 2 {
			t.Fatalf("split %v: %d events after merging pieces, want 2: %v", sizes, len(n), got)
		}
		first := got[0]
		if !first.Truncated || !first.Partial || first.Data != "head" || first.ID != "1" || !first.IDSet {
			t.Fatalf("split %v: first piece %v", sizes, first)
		}
		if len(first.Raw) > 101 {
			t.Fatalf("split %v: first piece of %d bytes exceeds the limit", sizes, len(first.Raw))
		}
		last := got[len(got)-1]
		if last.Truncated || last.Data != "after" || last.ID != "1" {
			t.Fatalf("split %v: event after the oversized one %v (its id line is not parsed)", sizes, last)
		}
		end := got[len(got)-2]
		if !end.Truncated || end.Partial || !strings.HasSuffix(end.Raw, "\n\n") {
			t.Fatalf("split %v: final piece %v", sizes, end)
		}
	}
}

// TestScannerLimitBoundary checks events of exactly the limit and one byte
// more, with CRLF so that the uncounted LF is exercised.
func TestScannerLimitBoundary(t *testing.T) {
	const limit = 64
	for _, tc := range []struct {
		name      string
		size      int // counted bytes: up to and including the final CR
		truncated bool
	}{
		{name: "at limit", size: limit},
		{name: "one over", size: limit + 1, truncated: true},
		{name: "LF of an inner CRLF is one over", size: limit + 2, truncated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// "data: " + v + "\r\n" + "\r" is size bytes counted; the LF
			// after each CR but the last is counted too.
			v := strings.Repeat("v", tc.size-len("data: \r\n\r"))
			in := "data: " + v + "\r\n\r\n"
			for _, sizes := range [][]int{nil, {1}, {len(in) - 1}, {len(in) - 3}} {
				s := Scanner{MaxEventBytes: limit}
				got, buf := feedAll(t, &s, splitBy([]byte(in), sizes))
				if len(got) == 0 || got[0].Truncated != tc.truncated {
					t.Fatalf("split %v: %v, want truncated %v", sizes, got, tc.truncated)
				}
				if c := concat(got, buf); c != in {
					t.Fatalf("split %v: concatenation differs from input", sizes)
				}
			}
		})
	}
}

func TestScannerReset(t *testing.T) {
	s := Scanner{MaxEventBytes: 100}
	s.Feed([]byte("\xEF\xBB\xBFid: 9\n\ndata: x"), nil)
	s.Reset()
	if len(s.Buffered()) != 0 || s.MaxEventBytes != 100 {
		t.Fatalf("after Reset: buffered %q, MaxEventBytes %d", s.Buffered(), s.MaxEventBytes)
	}
	got, _ := feedAll(t, &s, [][]byte{[]byte("\xEF\xBB\xBFdata: y\n\n")})
	want := []rec{{Raw: "\xEF\xBB\xBFdata: y\n\n", Data: "y", HasData: true}}
	if d := sameScan(got, "", want, ""); d != "" {
		t.Fatal(d)
	}
}

func TestScannerLimitDefaults(t *testing.T) {
	for _, tc := range []struct{ set, want int }{
		{0, DefaultMaxEventBytes},
		{-5, DefaultMaxEventBytes},
		{1, MinMaxEventBytes},
		{MinMaxEventBytes, MinMaxEventBytes},
		{1000, 1000},
	} {
		s := Scanner{MaxEventBytes: tc.set}
		if got := s.limit(); got != tc.want {
			t.Errorf("MaxEventBytes %d: limit %d, want %d", tc.set, got, tc.want)
		}
	}
}
