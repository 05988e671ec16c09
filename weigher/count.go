package weigher

import "unicode/utf8"

// maxRunBytes bounds, in bytes, the longest run of same-class characters
// (letters, whitespace, or punctuation/symbols) handed to tiktoken-go (the
// legacy encodings) in one piece. tiktoken's byte-pair merge is quadratic in the length of one
// pre-tokenized piece, so a hostile 1 MB run of one letter would stall the
// hot path for minutes; cutting such runs every maxRunBytes bounds the work
// at O(n × maxRunBytes) (a 1 MiB run counts in about 0.2 s) and moves the
// count by about one token per cut. Natural text has no runs this long, so
// its counts are exact.
const maxRunBytes = 256

// charClass is the pre-tokenizer class of a character, as far as run length
// matters: both split patterns merge runs of letters (and marks), of
// whitespace and of other symbols into single pieces; digits come in groups
// of at most 3.
type charClass uint8

const (
	classLetter charClass = iota
	classDigit
	classSpace
	classOther
)

func classOf(f uint8) charClass {
	switch {
	case f&(fUpper|fLower) != 0:
		return classLetter
	case f&fNumber != 0:
		return classDigit
	case f&fSpace != 0:
		return classSpace
	default:
		return classOther
	}
}

// classOfFlags is classOf of every flag set, so the run scan of countText
// costs one table load per rune.
var classOfFlags = func() (t [256]charClass) {
	for f := range t {
		t[f] = classOf(uint8(f))
	}
	return t
}()

// maxPieceBytes is the longest pre-tokenizer piece the fast counter merges
// whole: a longer one (only a hostile or degenerate text makes one: a
// megabyte of one letter, of spaces, of punctuation) is merged in segments
// of at most this many bytes, cut at rune starts, moving its count by about
// one token per cut. The merge of a long piece is O(n log n) (heapMerge),
// so this bounds its memory, not its time; cutting pieces as the counter
// meets them spares natural text the pass over every byte that cutting
// runs (maxRunBytes) takes, and keeps its count exact up to this length.
const maxPieceBytes = 256

// segmented is the sum of one over the segments of p of at most
// maxPieceBytes, cut at rune starts. A segment the same as the one before
// it (a run of one character makes nothing else) is not merged again.
func segmented(p string, one func(string) int64) int64 {
	var n, lastN int64
	last := ""
	for len(p) > 0 {
		e := min(len(p), maxPieceBytes)
		for e < len(p) && e > 1 && !utf8.RuneStart(p[e]) {
			e--
		}
		if seg := p[:e]; seg != last {
			last, lastN = seg, one(seg)
		}
		n += lastN
		p = p[e:]
	}
	return n
}

// countText is the number of tokens of text in enc, special-token text such
// as "<|endoftext|>" counted as ordinary text. Invalid UTF-8 counts as
// U+FFFD per bad byte, as in tiktoken-go. The fast counter cuts long pieces
// itself (maxPieceBytes); tiktoken-go's text is cut at long runs
// (maxRunBytes) first.
func countText(enc counter, text string) int64 {
	switch c := enc.(type) {
	case *bpeCounter:
		return c.count(text)
	case *memoCounter:
		return c.count(text)
	case budgetCounter:
		if c.bpe != nil {
			return c.count(text)
		}
	}
	if len(text) <= maxRunBytes { // no run can reach a cut
		if text == "" {
			return 0
		}
		return enc.count(text)
	}
	var n int64
	chunk, runStart := 0, 0
	prev := charClass(255)
	for i := 0; i < len(text); {
		var c charClass
		size := 1
		if b := text[i]; b < utf8.RuneSelf {
			c = classOfFlags[asciiFlags[b]]
		} else {
			var f uint8
			f, size = at(text, i)
			c = classOfFlags[f]
		}
		if c != prev || c == classDigit {
			prev, runStart = c, i
		} else if i-runStart >= maxRunBytes {
			n += enc.count(text[chunk:i])
			chunk, runStart = i, i
		}
		i += size
	}
	return n + enc.count(text[chunk:])
}

// CountText returns the number of tokens text takes in model's encoding
// ([Weigher.EncodingFor]), counting special-token text as ordinary text. It
// is used to charge the streamed output of a stream the client abandons.
func (w *Weigher) CountText(model, text string) int64 {
	return countText(w.encoder(model), text)
}
