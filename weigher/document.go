package weigher

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
)

// PDF documents (Anthropic "document" blocks, OpenAI "input_file" parts) are
// read by the model as each page's extracted text plus an image of the page:
// Anthropic's PDF guide
// (https://platform.claude.com/docs/en/build-with-claude/pdf-support,
// "Estimate your costs") puts the text at "typically 1,500-3,000 tokens per
// page" plus the page image at the vision rule; OpenAI's file-input guide
// (https://platform.openai.com/docs/guides/pdf-files) describes the same
// text-plus-page-image input. The estimate is conservative: pageTextTokens
// per page plus the largest image the model's rule allows.
const (
	pageTextTokens = 3000 // tokens, the top of Anthropic's published range
	// bytesPerPageGuess is the assumed PDF size per page, in bytes, when the
	// page count cannot be read (pages in compressed object streams): small
	// enough that text PDFs are not under-estimated (text pages take a few
	// KB to a few tens of KB).
	bytesPerPageGuess = 32 << 10
	// maxDocumentPages caps a guessed page count: Anthropic accepts at most
	// 100 pages per request on most models (PDF guide, "Check PDF
	// requirements").
	maxDocumentPages = 100
	// unknownDocumentPages is the page count assumed for a document the body
	// does not hold (a URL or a stored file id): an assumption, no published
	// figure exists.
	unknownDocumentPages = 10
	// maxPDFScanBytes bounds the decoded bytes scanned for page objects.
	maxPDFScanBytes = 64 << 20
)

// pageMarkerSpan is the longest "/Type /Page" match plus the byte after it
// that tells "/Page" from "/Pages": "/Type", up to 4 blanks, "/Page", 1.
const pageMarkerSpan = len("/Type") + 4 + len("/Page") + 1

var (
	pageMarker     = []byte("/Type")
	pageMarkerPage = []byte("/Page")
)

// pdfPages estimates the page count of a base64-encoded PDF: the number of
// "/Type /Page" objects (not "/Pages") when the page tree is readable, else
// decoded size / bytesPerPageGuess, capped at maxDocumentPages; at least 1.
// It scans at most maxPDFScanBytes decoded bytes, in 32 KiB reads.
func pdfPages(b64 string) int64 {
	if len(b64) <= 32<<10 {
		// Small enough to decode at once: no streaming decoder and no
		// 32 KiB buffer, which a body of many tiny documents would pay for
		// each of them. Undecodable data counts what decoded before it.
		data, _ := base64.StdEncoding.DecodeString(b64)
		if pages := countPageObjects(data, len(data)); pages > 0 {
			return pages
		}
		return max(1, min(ceilDiv(int64(len(data)), bytesPerPageGuess), maxDocumentPages))
	}
	dec := base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64))
	buf := make([]byte, pageMarkerSpan+32<<10)
	var pages, total int64
	tail := 0 // bytes carried over from the previous read
	for {
		n, err := io.ReadFull(dec, buf[tail:])
		total += int64(n)
		end := tail + n
		final := err != nil || total >= maxPDFScanBytes
		if final {
			pages += countPageObjects(buf[:end], end)
			break
		}
		// Count matches starting before the last pageMarkerSpan bytes; the
		// rest are counted next round, once their bytes are all read.
		limit := end - pageMarkerSpan
		pages += countPageObjects(buf[:end], limit)
		tail = copy(buf, buf[limit:end])
	}
	if pages > 0 {
		return pages
	}
	return max(1, min(ceilDiv(total, bytesPerPageGuess), maxDocumentPages))
}

// countPageObjects counts the "/Type /Page" matches of b (up to 4 blanks
// between, "/Pages" excluded) that start before limit.
func countPageObjects(b []byte, limit int) int64 {
	var n int64
	for off := 0; off < limit; {
		i := bytes.Index(b[off:], pageMarker)
		if i < 0 || off+i >= limit {
			return n
		}
		j := off + i + len(pageMarker)
		for k := 0; k < 4 && j < len(b) && (b[j] == ' ' || b[j] == '\r' || b[j] == '\n' || b[j] == '\t'); k++ {
			j++
		}
		if bytes.HasPrefix(b[j:], pageMarkerPage) {
			if k := j + len(pageMarkerPage); k >= len(b) || b[k] != 's' {
				n++
			}
		}
		off = j
	}
	return n
}

// documentTokens is the estimate of one PDF of pages pages, with
// imageTokensPerPage the largest page image of the model's rule.
func documentTokens(pages, imageTokensPerPage int64) int64 {
	return min(pages*(pageTextTokens+imageTokensPerPage), maxTokens)
}
