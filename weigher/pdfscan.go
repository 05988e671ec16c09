package weigher

import (
	"bytes"
	"compress/zlib"
	"io"
)

// The PDF page scan. A page object is a dictionary holding "/Type /Page"
// (PDF 32000-1:2008, 7.7.3.3); the page tree's root, a "/Type /Pages"
// dictionary, holds the page count as "/Count n" (7.7.3.2). A reader
// accepts any PDF whitespace (NUL, TAB, LF, FF, CR, SP; 7.2.2) and comments
// ("%" to the end of the line; 7.2.3) between a key and its value, and a
// name may spell any byte as "#xx" (7.3.5): "/Typ#65 %x\n\f/P#61ge" is
// "/Type /Page". pdfScan finds them all, whatever the bytes around them:
//
//   - every "/" starts a name, even inside a string, a stream or a comment
//     (a name found there can only add pages, never hide one);
//   - a comment is honoured only where it can hide a page: between /Type
//     (or /Count) and its value, and the bytes of that comment are still
//     scanned as if it were none (it may be inside a string, where "%"
//     starts nothing);
//   - /Count is read only in a dictionary that is also /Type /Pages, and
//     not when it is an indirect reference ("n 0 R").
//
// Page objects may sit in object streams (/Type /ObjStm, PDF 1.5; 7.5.7),
// most often Flate-compressed: the scan keeps the bytes of each such
// stream (from "stream" to "endstream", at most pdfMaxCaptureBytes in all),
// inflates them (at most pdfMaxInflateBytes in all) and scans the objects
// inside. An object stream it cannot read (another filter, bad data, over
// the bounds, a dictionary too deep to track) leaves the count unsure.

// pdfMaxDictDepth bounds the dictionaries tracked for /Count; deeper ones
// are not read (the count of page objects is unaffected).
const pdfMaxDictDepth = 32

// pdfMaxNameBytes is the longest name the scan tells apart; longer names
// match none it looks for.
const pdfMaxNameBytes = len("FlateDecode")

// pdfMaxCaptureBytes bounds the object stream bytes kept for inflating, in
// all, per PDF; pdfMaxInflateBytes bounds what they inflate to.
const (
	pdfMaxCaptureBytes = 16 << 20
	pdfMaxInflateBytes = 64 << 20
)

// A PDF's object streams inflate, in all, to at most pdfInflateRatio times
// the PDF's own size (at least pdfMinInflateBytes, at most
// pdfMaxInflateBytes): object streams of real PDFs inflate some 2–10
// times, a deflate bomb up to 1,032 times, and a body of many small bombs
// (each under the absolute bound) made llmguard inflate and scan hundreds
// of times the body's bytes before admission. Past it the count is unsure
// (partial), never low.
const (
	pdfInflateRatio    = 64
	pdfMinInflateBytes = 64 << 10
)

// pdfMaxObjectStreams bounds the object streams read per PDF: a PDF keeps
// up to some hundred objects in each (PDF writers use 100–200), so 1,024
// of them hold far more page objects than maxDocumentPages.
const pdfMaxObjectStreams = 1024

// pdfInflateLimit is the most a PDF of size decoded bytes may inflate.
func pdfInflateLimit(size int64) int64 {
	return min(pdfMaxInflateBytes, max(pdfMinInflateBytes, pdfInflateRatio*size))
}

type pdfLexState uint8

const (
	pdfLexSpace   pdfLexState = iota // between tokens
	pdfLexName                       // in a name, after "/"
	pdfLexNameHex                    // after "#" in a name, hexDigits read
	pdfLexRegular                    // in a run of regular bytes (number, keyword)
)

// pdfPrev is the last token that matters to what follows it.
type pdfPrev uint8

const (
	pdfPrevOther    pdfPrev = iota
	pdfPrevType             // the name /Type: its value may be /Page
	pdfPrevCount            // the name /Count: its value may be the page count
	pdfPrevCountNum         // /Count and a number: kept unless a number follows (n 0 R)
	pdfPrevFilter           // the name /Filter: its value may be /FlateDecode
)

// pdfScan counts page objects and reads the page tree's /Count over bytes
// fed in pieces (a PDF decoded in chunks): feed may be called any number of
// times, then end. The zero value is ready to use; not safe for concurrent
// use.
type pdfScan struct {
	// Results.
	pages    int64 // "/Type /Page" objects
	maxCount int64 // the largest /Count of a /Type /Pages dictionary
	// objStmNames counts the /ObjStm names seen (each object stream has
	// one), objStmRead the object streams read; failed is set when one
	// could not be.
	objStmNames, objStmRead int
	failed                  bool
	inner                   bool // scanning an object stream's objects: no streams here

	// Object streams.
	after     pdfDict // the dictionary just closed (afterDict)
	afterDict bool    // the last token closed a tracked dictionary
	capturing bool    // keeping an object stream's bytes
	capture   []byte  // its bytes so far
	captured  int     // bytes kept in all
	inflated  int64   // bytes inflated in all
	// inflateMax bounds inflated (pdfInflateLimit of the PDF's size; 0:
	// pdfMaxInflateBytes).
	inflateMax int64
	zr         io.ReadCloser // the zlib reader, reset for each object stream

	// Lexer.
	state   pdfLexState
	name    [pdfMaxNameBytes]byte
	nameLen int  // bytes of name held, up to pdfMaxNameBytes
	long    bool // the name is longer than pdfMaxNameBytes
	hex     byte // value of the hex digits read after "#"
	hexN    int  // hex digits read after "#" (0 or 1)
	num     int64
	numOK   bool                   // the regular run is all digits (after an optional +)
	numLen  int                    // bytes of the regular run
	digits  int                    // digits of the regular run
	kw      [len("endstream")]byte // the regular run's first bytes
	lt, gt  bool                   // the previous byte was '<' ('>') not yet paired

	// Parser.
	prev pdfPrev
	// keep is the prev a comment started in, restored at the line's end:
	// a comment between a key and its value does not separate them.
	keep     pdfPrev
	inLine   bool  // a comment started on this line (keep holds)
	countNum int64 // the number after /Count (pdfPrevCountNum)
	depth    int   // dictionaries open
	dicts    [pdfMaxDictDepth]pdfDict
}

// pdfDict is what the scan knows of one open dictionary.
type pdfDict struct {
	pages  bool  // it holds /Type /Pages
	objStm bool  // it holds /Type /ObjStm
	filter bool  // it holds a /Filter key
	flate  bool  // its /Filter is /FlateDecode
	parms  bool  // it holds a /DecodeParms key (a predictor, perhaps)
	count  int64 // its /Count, -1 when none was read
}

// pdfSpace reports whether c is PDF whitespace (7.2.2).
func pdfSpace(c byte) bool {
	return c == 0 || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '
}

// pdfDelim reports whether c is a PDF delimiter (7.2.2).
func pdfDelim(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

// hexVal is c's value as a hex digit, or -1.
func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// feed scans the next bytes of the PDF.
func (s *pdfScan) feed(b []byte) {
	for i := 0; i < len(b); i++ {
		if s.idle() {
			// Nothing pending: only a name or a dictionary's bounds can
			// change the scan, so the bytes before the next '/', '<' or
			// '>' (runs, strings, comments, binary data) are skipped.
			j := bytes.IndexAny(b[i:], "/<>")
			if j < 0 {
				return
			}
			i += j
		}
		s.byte(b[i])
	}
}

// idle reports whether no token is open and nothing waits for the next
// token: any byte but '/', '<' and '>' then leaves the scan's state as it is
// (TestPDFScanSkipsIdleBytes checks this against byte-by-byte scanning).
func (s *pdfScan) idle() bool {
	return s.state == pdfLexSpace && s.prev == pdfPrevOther && !s.afterDict && !s.capturing && !s.inLine && !s.lt && !s.gt
}

// end finishes the scan: a token still open at the end of the bytes counts.
func (s *pdfScan) end() {
	s.byte(' ')
	if s.prev == pdfPrevCountNum {
		s.commitCount()
	}
}

// Write scans p: a pdfScan is the io.Writer an inflated object stream is
// copied to. It never fails.
func (s *pdfScan) Write(p []byte) (int, error) {
	s.feed(p)
	return len(p), nil
}

// byte scans one byte.
func (s *pdfScan) byte(c byte) {
	if s.capturing {
		if s.captured++; s.captured > pdfMaxCaptureBytes {
			s.capturing, s.failed, s.capture = false, true, nil
		} else {
			s.capture = append(s.capture, c)
		}
	}
	switch s.state {
	case pdfLexName:
		if c == '#' {
			s.state, s.hex, s.hexN = pdfLexNameHex, 0, 0
			return
		}
		if !pdfSpace(c) && !pdfDelim(c) {
			s.nameByte(c)
			return
		}
		s.endName()
	case pdfLexNameHex:
		if v := hexVal(c); v >= 0 {
			if s.hexN == 1 {
				s.nameByte(s.hex<<4 | byte(v))
				s.state = pdfLexName
				return
			}
			s.hex, s.hexN = byte(v), 1
			return
		}
		// Not an escape: "#" (and a lone digit) stand for themselves, as
		// lenient readers take them.
		s.state = pdfLexName
		s.nameByte('#')
		if s.hexN == 1 {
			s.nameByte("0123456789ABCDEF"[s.hex])
		}
		s.byte(c)
		return
	case pdfLexRegular:
		if !pdfSpace(c) && !pdfDelim(c) {
			s.regularByte(c)
			return
		}
		s.endRegular()
	}
	// Between tokens.
	if c != '<' {
		s.lt = false
	}
	if c != '>' {
		s.gt = false
	}
	switch {
	case c == '\n' || c == '\r':
		if s.inLine {
			s.prev, s.inLine = s.keep, false
		}
	case pdfSpace(c):
	case c == '%':
		// A comment, if it is one, ends at the line's end and separates
		// nothing; its bytes are scanned as tokens all the same.
		if s.prev == pdfPrevType || s.prev == pdfPrevCount {
			s.keep, s.inLine = s.prev, true
		}
	case c == '/':
		s.state, s.nameLen, s.long = pdfLexName, 0, false
	case c == '<':
		if s.lt {
			s.lt = false
			s.token(pdfPrevOther)
			s.open()
			return
		}
		s.lt = true
	case c == '>':
		if s.gt {
			s.gt = false
			s.token(pdfPrevOther)
			s.close()
			return
		}
		s.gt = true
	case pdfDelim(c):
		s.token(pdfPrevOther)
	default:
		s.state, s.num, s.numOK, s.numLen, s.digits = pdfLexRegular, 0, true, 0, 0
		s.regularByte(c)
	}
}

// nameByte adds a decoded byte to the name being read.
func (s *pdfScan) nameByte(c byte) {
	if s.nameLen == pdfMaxNameBytes {
		s.long = true
		return
	}
	s.name[s.nameLen] = c
	s.nameLen++
}

// regularByte adds a byte to the regular run being read.
func (s *pdfScan) regularByte(c byte) {
	if s.numLen < len(s.kw) {
		s.kw[s.numLen] = c
	}
	s.numLen++
	switch {
	case c >= '0' && c <= '9':
		s.digits++
		if s.num < 1e15 {
			s.num = s.num*10 + int64(c-'0')
		}
	case c == '+' && s.numLen == 1:
	default:
		s.numOK = false
	}
}

// endName closes a name token and acts on it.
func (s *pdfScan) endName() {
	s.state = pdfLexSpace
	name := ""
	if !s.long {
		name = string(s.name[:s.nameLen]) // no allocation: compared only
	}
	switch {
	case s.prev == pdfPrevType && name == "Page":
		s.pages++
		s.token(pdfPrevOther)
	case s.prev == pdfPrevType && name == "Pages":
		if d := s.dict(); d != nil {
			d.pages = true
		}
		s.token(pdfPrevOther)
	case name == "ObjStm":
		s.objStmNames++
		if d := s.dict(); d != nil && s.prev == pdfPrevType {
			d.objStm = true
		}
		s.token(pdfPrevOther)
	case name == "Filter":
		if d := s.dict(); d != nil {
			d.filter = true
		}
		s.token(pdfPrevFilter)
	case name == "FlateDecode" && s.prev == pdfPrevFilter:
		if d := s.dict(); d != nil {
			d.flate = true
		}
		s.token(pdfPrevOther)
	case name == "DecodeParms":
		if d := s.dict(); d != nil {
			d.parms = true
		}
		s.token(pdfPrevOther)
	case name == "Type":
		s.token(pdfPrevType)
	case name == "Count":
		s.token(pdfPrevCount)
	default:
		s.token(pdfPrevOther)
	}
}

// endRegular closes a run of regular bytes: a number or a keyword.
func (s *pdfScan) endRegular() {
	s.state = pdfLexSpace
	isNum := s.numOK && s.digits > 0
	switch {
	case s.prev == pdfPrevCount && isNum:
		s.countNum = s.num
		s.prev = pdfPrevCountNum
	case s.prev == pdfPrevCountNum && isNum:
		// "/Count n g R": an indirect reference, not a count.
		s.prev = pdfPrevOther
	default:
		kw := string(s.kw[:min(s.numLen, len(s.kw))])
		if s.numLen == len("stream") && kw == "stream" && s.afterDict && s.after.objStm && !s.inner {
			s.objStmStream()
		} else if s.numLen == len("endstream") && kw == "endstream" && s.capturing {
			s.capturing = false
			s.inflate()
		}
		s.token(pdfPrevOther)
	}
}

// objStmStream starts an object stream's data. An unfiltered one holds its
// objects in the open, scanned as they are; a /FlateDecode one (no
// /DecodeParms) is kept to be inflated at its "endstream"; any other is
// not read.
func (s *pdfScan) objStmStream() {
	if s.objStmRead >= pdfMaxObjectStreams {
		// More than real PDFs hold: each one read costs a zlib reader's
		// set-up, and 85,000 tiny ones cost a second of CPU for a few
		// hundred kilobytes. Unsure past it.
		s.failed = true
		return
	}
	if !s.after.filter {
		s.objStmRead++
		return
	}
	if s.capturing || !s.after.flate || s.after.parms {
		// Another filter (or a chain, or a predictor to undo), or an
		// object stream inside one: not read.
		s.failed = true
		return
	}
	s.capturing, s.capture = true, s.capture[:0]
}

// inflate reads the kept object stream as zlib (FlateDecode, 7.4.4) and
// scans the objects inside; failed is set when it cannot.
func (s *pdfScan) inflate() {
	data := bytes.TrimLeft(s.capture, "\r\n") // the EOL after "stream"
	var err error
	if s.zr == nil {
		s.zr, err = zlib.NewReader(bytes.NewReader(data))
	} else {
		err = s.zr.(zlib.Resetter).Reset(bytes.NewReader(data), nil)
	}
	zr := s.zr
	if err != nil {
		s.zr = nil // a failed reset leaves the reader unusable
		s.failed = true
		return
	}
	inner := pdfScan{inner: true}
	limit := s.inflateMax
	if limit <= 0 {
		limit = pdfMaxInflateBytes
	}
	left := limit - s.inflated
	n, err := io.Copy(&inner, io.LimitReader(zr, left+1))
	s.inflated += n
	inner.end()
	if err != nil || n > left || inner.objStmNames > 0 || inner.failed {
		s.failed = true
	} else {
		s.objStmRead++
	}
	s.pages += inner.pages
	s.maxCount = max(s.maxCount, inner.maxCount)
}

// token records a token that is not a number after /Count: a pending
// /Count n is committed first.
func (s *pdfScan) token(p pdfPrev) {
	if s.prev == pdfPrevCountNum {
		s.commitCount()
	}
	s.prev = p
	s.afterDict = false
}

// commitCount records the pending /Count in the open dictionary.
func (s *pdfScan) commitCount() {
	if d := s.dict(); d != nil {
		d.count = max(d.count, s.countNum)
	}
}

// dict is the innermost open dictionary, nil when none is tracked.
func (s *pdfScan) dict() *pdfDict {
	if s.depth == 0 || s.depth > pdfMaxDictDepth {
		return nil
	}
	return &s.dicts[s.depth-1]
}

// open opens a dictionary ("<<").
func (s *pdfScan) open() {
	s.depth++
	if d := s.dict(); d != nil {
		*d = pdfDict{count: -1}
	}
}

// close closes a dictionary (">>"): a /Pages dictionary's /Count counts.
func (s *pdfScan) close() {
	d := s.dict()
	if d != nil && d.pages {
		s.maxCount = max(s.maxCount, d.count)
	}
	if d != nil {
		s.after, s.afterDict = *d, true
	}
	if s.depth > 0 {
		s.depth--
	}
}

// result is the page count: the larger of the page objects and the page
// tree's /Count, those in object streams included; sure is false when an
// object stream could not be read or no page was found.
func (s *pdfScan) result() (pages int64, sure bool) {
	pages = max(s.pages, s.maxCount)
	return pages, pages > 0 && !s.failed && !s.capturing && s.objStmRead == s.objStmNames
}
