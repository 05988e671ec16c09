package weigher

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"unicode/utf8"
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
	// maxPDFScanBytes bounds the decoded bytes scanned for page objects.
	maxPDFScanBytes = 64 << 20
)

// guessPages is the page count guessed for a document of n decoded bytes
// whose pages cannot be read: one per bytesPerPageGuess, at least 1, at
// most maxDocumentPages.
func guessPages(n int64) int64 {
	return max(1, min(ceilDiv(n, bytesPerPageGuess), maxDocumentPages))
}

// pdfPageCount reads the page count of a base64-encoded PDF with pdfScan:
// the larger of its "/Type /Page" objects and its page tree's /Count; when
// none is found, decoded size / bytesPerPageGuess capped at
// maxDocumentPages, at least 1. sure is false when the count may be low:
// no page found, or compressed object streams that may hide pages. text
// is true when the decoded bytes are all valid UTF-8 (an upstream may read
// them as a text file). It scans at most maxPDFScanBytes decoded bytes, in
// 32 KiB reads; undecodable data counts what decoded before it, and is
// never sure.
func pdfPageCount(b64 string) (pages int64, sure, text bool) {
	s := pdfScan{inflateMax: pdfInflateLimit(int64(base64.StdEncoding.DecodedLen(len(b64))))}
	var total int64
	text = true
	corrupt := false // bytes outside base64: an upstream that skips them (Python's b64decode does) reads more than decoded here
	if len(b64) <= 32<<10 {
		// Small enough to decode at once: no streaming decoder and no
		// 32 KiB buffer, which a body of many tiny documents would pay for
		// each of them.
		data, err := base64.StdEncoding.DecodeString(b64)
		corrupt = err != nil
		s.feed(data)
		total, text = int64(len(data)), utf8.Valid(data)
	} else {
		dec := base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64))
		buf := make([]byte, utf8.UTFMax+32<<10)
		carry := 0 // bytes of a rune cut by the previous read
		for total < maxPDFScanBytes {
			n, err := io.ReadFull(dec, buf[carry:])
			total += int64(n)
			s.feed(buf[carry : carry+n])
			end := carry + n
			if text {
				// Check whole runes; a rune cut at the end waits for the
				// next read.
				cut := end
				for i := 1; i < utf8.UTFMax && end-i >= 0; i++ {
					if utf8.RuneStart(buf[end-i]) {
						if !utf8.FullRune(buf[end-i : end]) {
							cut = end - i
						}
						break
					}
				}
				if err != nil {
					cut = end
				}
				text = utf8.Valid(buf[:cut])
				carry = copy(buf, buf[cut:end])
			}
			if err != nil {
				_, corrupt = err.(base64.CorruptInputError)
				break
			}
		}
	}
	s.end()
	pages, sure = s.result()
	sure = sure && !corrupt
	if pages == 0 {
		pages = guessPages(total)
	}
	return pages, sure, text
}

// documentTokens is the estimate of one PDF of pages pages, with
// imageTokensPerPage the largest page image of the model's rule.
// It saturates at maxTokens: a page count read from a caller's /Count can be
// near 2^63, whose product wrapped to a small figure.
func documentTokens(pages, imageTokensPerPage int64) int64 {
	per := pageTextTokens + imageTokensPerPage
	if pages > maxTokens/per {
		return maxTokens
	}
	return min(pages*per, maxTokens)
}

// pdfMagicWindow is how far into a file its "%PDF-" header may start: PDF
// readers look for it in the first 1,024 bytes (PDF 32000-1:2008, annex
// H.3, note 3; Acrobat's implementation note).
const pdfMagicWindow = 1024

// fileTokens weighs one file sent inline (b64, its base64 data) and read
// by the upstream: Anthropic document blocks, OpenAI Responses input_file
// and chat file parts. A PDF (a "%PDF-" header in its first
// pdfMagicWindow bytes) is weighed by its pages, each pageTextTokens plus
// page (tokens, the model's largest page image); a file of valid UTF-8
// text with no NUL byte by its text, counted as text (OpenAI extracts a
// text file's text and bills it as input); a PDF that is also valid UTF-8
// by the larger of the two. hidden is true when the bill cannot be known
// from the bytes: a PDF whose pages may be in compressed object streams or
// that shows none; a spreadsheet (see inlineFile.spreadsheet), even as
// text; and any other file (.docx, .xlsx, .pptx are compressed
// zip archives; unknown formats) whose extracted text is not in the body.
// The caller then reserves the model's largest input (Estimate.ServerContext);
// n is then the old guess, bytesPerPageGuess bytes a page.
func fileTokens(enc counter, f inlineFile, page int64) (n int64, hidden bool) {
	pages, text, hidden := fileParts(enc, f, page)
	return max(pages, text), hidden
}

// fileParts is fileTokens in its two parts: pages, the page estimate
// (documentTokens: page images already in the model's own tokens), and
// text, the file's text counted in enc (to be scaled by a Claude model's
// safety factor); the file weighs the larger. A part that does not apply
// is 0.
func fileParts(enc counter, f inlineFile, page int64) (pages, text int64, hidden bool) {
	b64 := f.b64
	headB64 := b64[:min(len(b64), (pdfMagicWindow+2)/3*4)]
	head, _ := base64.StdEncoding.DecodeString(headB64)
	if bytes.Contains(head[:min(len(head), pdfMagicWindow)], []byte("%PDF-")) || f.declaresPDF() {
		// A PDF by its header, or by its media type or name: readers in
		// their lenient modes (pypdf by default, pdf.js) read a PDF whose
		// header is missing or late.
		n, sure, isText := pdfPageCount(b64)
		if isText {
			data, _ := base64.StdEncoding.DecodeString(b64)
			text = countText(enc, bytesString(data))
		}
		return documentTokens(n, page), text, !sure
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		// Bytes outside base64: an upstream that skips them (Python's
		// b64decode does by default) reads a file this decoding cut
		// short. Partial.
		return documentTokens(guessPages(int64(len(data))), page), 0, true
	}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		text = countText(enc, bytesString(data))
		if bytes.Contains(data, []byte("/Page")) {
			// Text that holds PDF page objects: a lenient reader may read
			// it as a PDF with no header, page by page.
			n, sure, _ := pdfPageCount(b64)
			return documentTokens(n, page), text, f.spreadsheet() || !sure
		}
		return 0, text, f.spreadsheet()
	}
	guess := guessPages(int64(len(data)))
	return documentTokens(guess, page), 0, true
}

// inlineFile is a file sent in the body: b64 its base64 data, name its
// filename and mime its declared media type ("" when not given).
type inlineFile struct {
	b64, name, mime string
}

// splitDataURL splits a "data:<mime>;base64,<data>" URL into its media type
// and data; any other string is all data, of no media type.
func splitDataURL(s string) (mime, b64 string) {
	i := strings.Index(s, ";base64,")
	if i < 0 {
		return "", s
	}
	return strings.TrimPrefix(s[:i], "data:"), s[i+len(";base64,"):]
}

// declaresPDF reports whether f's media type or name says PDF.
func (f inlineFile) declaresPDF() bool {
	return strings.Contains(strings.ToLower(f.mime), "pdf") || strings.HasSuffix(strings.ToLower(f.name), ".pdf")
}

// spreadsheetExts are the file types OpenAI reads with its spreadsheet
// flow (first 1,000 rows a sheet plus a model-written summary and header
// metadata; https://platform.openai.com/docs/guides/file-inputs): a bill the
// bytes do not show.
var spreadsheetExts = []string{".csv", ".tsv", ".xls", ".xlsx", ".iif"}

// spreadsheet reports whether f is named or typed as a spreadsheet.
func (f inlineFile) spreadsheet() bool {
	name := strings.ToLower(f.name)
	for _, e := range spreadsheetExts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	mime := strings.ToLower(f.mime)
	return strings.Contains(mime, "csv") || strings.Contains(mime, "tab-separated") || strings.Contains(mime, "spreadsheet") || strings.Contains(mime, "excel")
}

// imageAsDocument weighs an image part's URL that is not an image: a data
// URL of another media type (a PDF, a video, audio), weighed as an inline
// file (fileTokens: a PDF by its pages, anything else partial), or a URL
// whose path ends in ".pdf", weighed as a document of unknown pages and
// partial. Gateways such as LiteLLM send PDFs to Anthropic, Bedrock and
// Vertex as image_url parts
// (https://docs.litellm.ai/docs/completion/document_understanding), which
// were weighed as one image. ok is false for an image (or a data URL
// naming no type), weighed as before.
func imageAsDocument(enc counter, model, url string) (n int64, hidden, ok bool) {
	if strings.HasPrefix(url, "data:") {
		mime, data := splitDataURL(url)
		if mime == "" || strings.HasPrefix(strings.ToLower(mime), "image/") {
			return 0, false, false
		}
		n, hidden = fileTokens(enc, inlineFile{b64: data, mime: mime}, imageTokens(model, "high", 0, 0))
		return n, hidden, true
	}
	path := url
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if len(path) >= 4 && strings.EqualFold(path[len(path)-4:], ".pdf") {
		return 0, true, true // fetched by the upstream: the window bounds it (hidden)
	}
	return 0, false, false
}
