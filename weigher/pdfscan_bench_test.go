package weigher

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"testing"
)

// The page scan before pdfScan, kept verbatim (names prefixed legacy) as
// the baseline of BenchmarkPDFPageCount.

// legacyMarkerSpan is the longest "/Type /Page" match plus the byte after it
// that tells "/Page" from "/Pages": "/Type", up to 4 blanks, "/Page", 1.
const legacyMarkerSpan = len("/Type") + 4 + len("/Page") + 1

var (
	legacyMarker     = []byte("/Type")
	legacyMarkerPage = []byte("/Page")
)

// legacyPDFPages estimates the page count of a base64-encoded PDF: the number of
// "/Type /Page" objects (not "/Pages") when the page tree is readable, else
// decoded size / bytesPerPageGuess, capped at maxDocumentPages; at least 1.
// It scans at most maxPDFScanBytes decoded bytes, in 32 KiB reads.
func legacyPDFPages(b64 string) int64 {
	if len(b64) <= 32<<10 {
		// Small enough to decode at once: no streaming decoder and no
		// 32 KiB buffer, which a body of many tiny documents would pay for
		// each of them. Undecodable data counts what decoded before it.
		data, _ := base64.StdEncoding.DecodeString(b64)
		if pages := legacyCountPageObjects(data, len(data)); pages > 0 {
			return pages
		}
		return max(1, min(ceilDiv(int64(len(data)), bytesPerPageGuess), maxDocumentPages))
	}
	dec := base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64))
	buf := make([]byte, legacyMarkerSpan+32<<10)
	var pages, total int64
	tail := 0 // bytes carried over from the previous read
	for {
		n, err := io.ReadFull(dec, buf[tail:])
		total += int64(n)
		end := tail + n
		final := err != nil || total >= maxPDFScanBytes
		if final {
			pages += legacyCountPageObjects(buf[:end], end)
			break
		}
		// Count matches starting before the last legacyMarkerSpan bytes; the
		// rest are counted next round, once their bytes are all read.
		limit := end - legacyMarkerSpan
		pages += legacyCountPageObjects(buf[:end], limit)
		tail = copy(buf, buf[limit:end])
	}
	if pages > 0 {
		return pages
	}
	return max(1, min(ceilDiv(total, bytesPerPageGuess), maxDocumentPages))
}

// legacyCountPageObjects counts the "/Type /Page" matches of b (up to 4 blanks
// between, "/Pages" excluded) that start before limit.
func legacyCountPageObjects(b []byte, limit int) int64 {
	var n int64
	for off := 0; off < limit; {
		i := bytes.Index(b[off:], legacyMarker)
		if i < 0 || off+i >= limit {
			return n
		}
		j := off + i + len(legacyMarker)
		for k := 0; k < 4 && j < len(b) && (b[j] == ' ' || b[j] == '\r' || b[j] == '\n' || b[j] == '\t'); k++ {
			j++
		}
		if bytes.HasPrefix(b[j:], legacyMarkerPage) {
			if k := j + len(legacyMarkerPage); k >= len(b) || b[k] != 's' {
				n++
			}
		}
		off = j
	}
	return n
}

// benchBinary is 20 KiB of pseudo-random bytes, like the compressed
// content streams and images that make up most of a real PDF's size.
func benchBinary(seed int) []byte {
	b := make([]byte, 20<<10)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// BenchmarkPDFPageCount compares the page count of pdfScan (new) with the
// old scan (old) in one run, on a plain 100-page PDF (~16 KiB, the one-shot
// path) and a 2,000-page one (~330 KiB, streamed), on a PDF with its
// pages in a Flate object stream, and on 100 pages of 20 KiB binary data
// each (~2 MiB, streamed).
func BenchmarkPDFPageCount(b *testing.B) {
	for _, c := range []struct {
		name string
		doc  []byte
	}{
		{"plain100", pdfOf(pdfSpec{pages: 100, count: -1})},
		{"plain2000", pdfOf(pdfSpec{pages: 2000, count: -1})},
		{"objstm100", objStmPDF(100)},
		{"binary100", pdfOf(pdfSpec{pages: 100, count: -1, junk: func(i int) []byte { return benchBinary(i) }})},
	} {
		data := base64.StdEncoding.EncodeToString(c.doc)
		b.Run(c.name+"/old", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				legacyPDFPages(data)
			}
		})
		b.Run(c.name+"/new", func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				pdfPageCount(data)
			}
		})
	}
}
