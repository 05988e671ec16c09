package weigher

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// A /Count that is an indirect reference, or that of an outline, is no
// page count; a larger /Pages /Count than the page objects wins.
func TestPDFCountCrossCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		want int64
	}{
		{"indirect count", "%PDF-1.4\n<< /Type /Pages /Count 900 0 R >>\n<< /Type /Page >>", 1},
		{"outline count", "%PDF-1.4\n<< /Type /Outlines /Count 40 >>\n<< /Type /Page >>", 1},
		{"count before type", "%PDF-1.4\n<< /Count 7 /Kids [] /Type /Pages >>\n<< /Type /Page >>", 7},
		{"nested dict", "%PDF-1.4\n<< /Type /Pages /Resources << /Count 3 >> /Count 5 >>", 5},
		{"comment before count", "%PDF-1.4\n<< /Type /Pages /Count %x\n 6 >>", 6},
		{"larger objects", "%PDF-1.4\n<< /Type /Pages /Count 1 >><</Type/Page>><</Type/Page>>", 2},
	} {
		if got := pdfPages(b64([]byte(c.doc))); got != c.want {
			t.Errorf("%s: %d pages, want %d", c.name, got, c.want)
		}
	}
}

// Pages in a Flate-compressed object stream are counted; an object stream
// that cannot be read (another filter, a predictor, bad or cut data) leaves
// the count unsure, even beside pages in the open.
func TestPDFObjectStreams(t *testing.T) {
	stm := objStmPDF(100)
	mixed := append(objStmPDF(99), "900 0 obj\n<< /Type /Page >>\nendobj\n"...)
	for _, c := range []struct {
		name  string
		doc   []byte
		pages int64 // 0: unsure
	}{
		{"flate", stm, 100},
		{"flate and a page in the open", mixed, 100},
		{"unfiltered", objStmPDFOf(100, rawStream, ""), 100},
		{"LZW", bytes.Replace(stm, []byte("/FlateDecode"), []byte("/LZWDecode"), 1), 0},
		{"filter chain", bytes.Replace(stm, []byte("/FlateDecode"), []byte("[/FlateDecode]"), 1), 0},
		{"predictor", bytes.Replace(stm, []byte("/FlateDecode"), []byte("/FlateDecode /DecodeParms << /Predictor 12 >>"), 1), 0},
		{"corrupt", bytes.Replace(stm, []byte("stream\nx"), []byte("stream\ny"), 1), 0},
		// A stored (uncompressed) deflate block may hold "endstream":
		// the bytes kept stop there, short of the stream's end.
		{"endstream inside", objStmPDFOf(100, zlib.NoCompression, "% endstream\n"), 0},
		{"corrupt beside a page", bytes.Replace(mixed, []byte("stream\nx"), []byte("stream\ny"), 1), 0},
		{"deep", append(bytes.Repeat([]byte("<<"), pdfMaxDictDepth), stm...), 0},
		{"deep beside a page", append(bytes.Repeat([]byte("<<"), pdfMaxDictDepth), mixed...), 0},
		{"CRLF after stream", bytes.Replace(stm, []byte("stream\n"), []byte("stream\r\n"), 1), 100},
	} {
		pages, sure, _ := pdfPageCount(b64(c.doc))
		if c.pages == 0 && sure || c.pages > 0 && (!sure || pages != c.pages) {
			t.Errorf("%s: %d pages, sure %v; want %d (0: unsure)", c.name, pages, sure, c.pages)
		}
	}
}

// The streaming path (over 32 KiB of base64) counts what the one-shot
// path counts, whatever the chunk boundaries cut.
func TestPDFPageCountStreaming(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	gaps := []string{" ", "%c\r\n", "\x00\x00", " /P#61ge"}
	for shift := range 40 {
		doc := pdfOf(pdfSpec{pages: 400, count: 0, gap: func(i int) string { return gaps[(i+shift)%len(gaps)] },
			junk: func(int) []byte { return bytes.Repeat([]byte{'x'}, shift) }})
		doc = bytes.ReplaceAll(doc, []byte(" /P#61ge/Page"), []byte(" /P#61ge"))
		if got, sure, _ := pdfPageCount(b64(doc)); got != 400 || !sure {
			t.Fatalf("shift %d: %d pages (sure %v), want 400", shift, got, sure)
		}
	}
}

// legacyPageObjects is the page scan before pdfScan, kept as an oracle: the
// "/Type /Page" matches of b with up to 4 blanks (SP, CR, LF, TAB) between;
// one change, "/Page" must end at whitespace, a delimiter or the end
// (the old scan took "/PageX" for a page; no reader does).
func legacyPageObjects(b []byte) int64 {
	var n int64
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte("/Type"))
		if i < 0 {
			return n
		}
		j := off + i + len("/Type")
		for k := 0; k < 4 && j < len(b) && (b[j] == ' ' || b[j] == '\r' || b[j] == '\n' || b[j] == '\t'); k++ {
			j++
		}
		if bytes.HasPrefix(b[j:], []byte("/Page")) {
			if k := j + len("/Page"); k >= len(b) || pdfSpace(b[k]) || pdfDelim(b[k]) {
				n++
			}
		}
		off = j
	}
}

// pdfGaps are legal separators between "/Type" and "/Page".
var pdfGaps = []string{"", " ", "\x00", "\t", "\n", "\f", "\r", "\r\n", "     ", "%c\n", "%\r", " %x y\r\n\t"}

// escapeName spells name with some bytes as #xx, as rng picks.
func escapeName(rng *rand.Rand, name string) string {
	var b strings.Builder
	for i := range len(name) {
		switch rng.IntN(3) {
		case 0:
			fmt.Fprintf(&b, "#%02X", name[i])
		case 1:
			fmt.Fprintf(&b, "#%02x", name[i])
		default:
			b.WriteByte(name[i])
		}
	}
	return b.String()
}

// FuzzPDFPageCount checks pdfScan against two oracles. Legal respellings
// (whitespace and comments between /Type and /Page, #xx escapes) never
// change the count of a PDF, whatever junk lies between its objects, and
// it is at least its page count; and the count is never below the old
// scan's on any bytes.
func FuzzPDFPageCount(f *testing.F) {
	f.Add([]byte(""), uint8(3), uint64(1))
	f.Add([]byte("(%) << /Type /Pages /Count 5 >> [ % /Type"), uint8(10), uint64(7))
	f.Add([]byte("/Type /Page /Type\t/Page#20 <</Type/Pages/Count 2 0 R>>"), uint8(1), uint64(9))
	f.Add([]byte("stream\x00\xff%\r/Typ#65 /P#61ge"), uint8(40), uint64(3))
	f.Add(objStmPDF(3), uint8(2), uint64(5))
	f.Add([]byte("<< /Type /ObjStm /Filter /FlateDecode >>\nstream\nx\x9c"), uint8(4), uint64(11))
	f.Fuzz(func(t *testing.T, junk []byte, n uint8, seed uint64) {
		if len(junk) > 4096 {
			return
		}
		checkSkip(t, "junk", junk)
		if got, old := pdfPages(b64(junk)), legacyPageObjects(junk); got < old {
			t.Fatalf("junk %q: %d pages, the old scan %d", junk, got, old)
		}
		pages := int(n%30) + 1
		rng := rand.New(rand.NewPCG(seed, 0))
		junkAt := func(i int) []byte { return junk[:(i*7)%(len(junk)+1)] }
		plain := pdfOf(pdfSpec{pages: pages, count: 0, junk: junkAt})
		gaps := make([]string, pages)
		for i := range gaps {
			gaps[i] = pdfGaps[rng.IntN(len(pdfGaps))] + pdfGaps[rng.IntN(len(pdfGaps))]
		}
		respelled := pdfOf(pdfSpec{pages: pages, count: 0, junk: junkAt, gap: func(i int) string { return gaps[i] }})
		respelled = bytes.ReplaceAll(respelled, []byte("/Type"), []byte("/"+escapeName(rng, "Type")))
		respelled = bytes.ReplaceAll(respelled, []byte("/Page "), []byte("/"+escapeName(rng, "Page")+" "))
		p, r := pdfPages(b64(plain)), pdfPages(b64(respelled))
		if p < int64(pages) || r != p {
			t.Fatalf("%d pages: plain counts %d, respelled %d\n%q", pages, p, r, respelled)
		}
	})
}

// Object streams past the bounds are not read: more than
// pdfMaxCaptureBytes of stream bytes, or a zlib bomb inflating past
// pdfMaxInflateBytes. Both leave the count unsure.
func TestPDFObjectStreamBounds(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	if testing.Short() {
		t.Skip("builds and scans ~20 MiB")
	}
	page := "900 0 obj\n<< /Type /Page >>\nendobj\n"
	big := append(objStmPDFOf(1, zlib.NoCompression, strings.Repeat("% filler\n", pdfMaxCaptureBytes/9+1)), page...)
	bomb := append(objStmPDFOf(1, zlib.BestCompression, strings.Repeat(" ", pdfMaxInflateBytes)), page...)
	for name, doc := range map[string][]byte{"capture": big, "inflate": bomb} {
		if pages, sure, _ := pdfPageCount(b64(doc)); sure {
			t.Errorf("%s past its bound: %d pages, sure", name, pages)
		}
	}
}

// feedBytewise scans b one byte at a time, with no skipping: the oracle of
// pdfScan.feed's skip over idle bytes.
func (s *pdfScan) feedBytewise(b []byte) {
	for _, c := range b {
		s.byte(c)
	}
}

// The skip over idle bytes in feed gives the scan byte by byte, whatever
// the bytes: the differential check, on generated PDFs and on fuzz input.
func TestPDFScanSkipsIdleBytes(t *testing.T) {
	docs := [][]byte{
		pdfOf(pdfSpec{pages: 30, count: -1}),
		pdfOf(pdfSpec{pages: 30, count: 0, gap: func(i int) string { return pdfGaps[i%len(pdfGaps)] }, junk: func(i int) []byte { return []byte("( % << /Count 3 >> [ stream") }}),
		objStmPDF(20),
		[]byte("<< /Type /Pages /Count 5 %c\n 0 R >> << /Count\n9 /Type /Pages >>"),
	}
	for i, doc := range docs {
		checkSkip(t, fmt.Sprint("doc ", i), doc)
	}
}

// checkSkip fails when feed and feedBytewise end in different results.
func checkSkip(t *testing.T, name string, doc []byte) {
	t.Helper()
	var fast, slow pdfScan
	fast.feed(doc)
	slow.feedBytewise(doc)
	fast.end()
	slow.end()
	fp, fs := fast.result()
	sp, ss := slow.result()
	if fp != sp || fs != ss || fast.maxCount != slow.maxCount {
		t.Fatalf("%s: feed %d pages (sure %v, count %d), byte by byte %d (sure %v, count %d)", name, fp, fs, fast.maxCount, sp, ss, slow.maxCount)
	}
}

// A PDF's object streams inflate to at most pdfInflateRatio times its
// size: a small deflate bomb (1 MiB of blanks in about a kilobyte) leaves
// the count unsure instead of being inflated and scanned whole, which let a
// body of many small bombs cost hundreds of times its bytes; object streams
// within the bound are read as before.
func TestPDFInflateBoundBySize(t *testing.T) {
	page := "900 0 obj\n<< /Type /Page >>\nendobj\n"
	bomb := append(objStmPDFOf(1, zlib.BestCompression, strings.Repeat(" ", 1<<20)), page...)
	if int64(len(bomb))*pdfInflateRatio >= 1<<20 {
		t.Fatalf("the bomb is %d bytes: not past its ratio", len(bomb))
	}
	if pages, sure, _ := pdfPageCount(b64(bomb)); sure {
		t.Errorf("a %d-byte PDF inflating 1 MiB: %d pages, sure", len(bomb), pages)
	}
	small := append(objStmPDFOf(1, zlib.BestCompression, strings.Repeat(" ", 32<<10)), page...)
	if pages, sure, _ := pdfPageCount(b64(small)); !sure || pages < 2 {
		t.Errorf("a PDF inflating 32 KiB (under pdfMinInflateBytes): %d pages, sure %v; want its 2 pages, sure", pages, sure)
	}
	if got := pdfInflateLimit(10 << 20); got != pdfMaxInflateBytes {
		t.Errorf("pdfInflateLimit(10 MiB) = %d, want the absolute bound", got)
	}
}

// A PDF of more object streams than pdfMaxObjectStreams (each a zlib
// reader's set-up: 85,000 tiny ones cost a second of CPU) is unsure past
// the bound; one within it is read.
func TestPDFObjectStreamCount(t *testing.T) {
	one := objStmPDFOf(1, zlib.BestSpeed, "")
	start := bytes.Index(one, []byte("\n3 0 obj\n"))
	if start < 0 {
		start = bytes.Index(one, []byte("4 0 obj"))
	}
	end := bytes.Index(one, []byte("endobj\n%%EOF"))
	if start < 0 || end < 0 {
		t.Fatalf("unexpected object stream PDF:\n%q", one)
	}
	stm := one[start : end+len("endobj\n")]
	pdf := func(n int) []byte {
		var b bytes.Buffer
		b.Write(one[:start])
		for range n {
			b.Write(stm)
		}
		b.WriteString("%%EOF\n")
		return b.Bytes()
	}
	if _, sure, _ := pdfPageCount(b64(pdf(pdfMaxObjectStreams + 1))); sure {
		t.Errorf("%d object streams: sure", pdfMaxObjectStreams+1)
	}
	if pages, sure, _ := pdfPageCount(b64(pdf(8))); !sure || pages < 1 {
		t.Errorf("8 object streams: %d pages, sure %v; want read", pages, sure)
	}
}

// pdfPages is, for the tests, the page count of a base64-encoded PDF, as pdfPageCount
// reads it, else (no page found) decoded size / bytesPerPageGuess, capped at
// maxDocumentPages; at least 1.
func pdfPages(b64 string) int64 {
	pages, _, _ := pdfPageCount(b64)
	return pages
}
