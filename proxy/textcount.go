package proxy

import "unicode/utf8"

// tapTextMax is the most streamed output text, in bytes, a stream holds
// uncounted: when more arrives, the held text's prefix up to a safe cut is
// counted and let go, so that a stream of any length holds at most this
// much of its text.
const tapTextMax = 64 << 10

// tapCountEvery is the held text, in bytes, at which a stream that will not
// report its usage counts its prefix as it goes, so that little is left to
// count when it ends.
const tapCountEvery = 8 << 10

// pendingText is the streamed output text of one stream that is not counted
// yet, and the tokens of the text already counted and let go. Text is
// counted only in pieces cut where the tokenizer's pre-tokenizer cuts too
// (see safeCut), so the pieces' counts add up to the count of the whole
// text. The zero value holds nothing and counts when tapTextMax is reached;
// it is not safe for concurrent use.
type pendingText struct {
	buf []byte
	// added is the bytes of text added in all, counted or not.
	added int64
	// counted is the tokens of the text counted and let go.
	counted int64
	// count counts text in the request's model's tokens; nil counts
	// nothing (the text is still bounded).
	count func(text string) int64
	// countAt is the held bytes at which a prefix is counted: tapTextMax
	// when the stream is expected to report its usage (counting is then
	// only a bound on memory), smaller when it is not. Zero: tapTextMax.
	countAt int
}

// add appends streamed text, counting and letting go a prefix whenever the
// held text reaches countAt; it never holds more than tapTextMax bytes.
func (p *pendingText) add(s string) {
	p.added += int64(len(s))
	at := p.countAt
	if at <= 0 || at > tapTextMax {
		at = tapTextMax
	}
	for len(s) > 0 {
		n := min(len(s), tapTextMax-len(p.buf))
		if len(p.buf)+n > cap(p.buf) { // grow within tapTextMax (append could pass it)
			nb := make([]byte, len(p.buf), min(tapTextMax, max(2*cap(p.buf), len(p.buf)+n, 512)))
			copy(nb, p.buf)
			p.buf = nb
		}
		p.buf = append(p.buf, s[:n]...)
		s = s[n:]
		if len(p.buf) >= at {
			p.countPrefix()
		}
	}
}

// tokens counts the text still held and returns the tokens of all the text
// added. The held text is let go.
func (p *pendingText) tokens() int64 {
	if len(p.buf) > 0 && p.count != nil {
		p.counted += p.count(string(p.buf))
	}
	p.buf = p.buf[:0]
	return p.counted
}

// countPrefix counts the held text up to its last safe cut and keeps the
// rest; with no safe cut in the text (one run of letters, digits or
// symbols: base64, a language written without spaces), up to the last
// character boundary, where the pieces count at least as the whole does up
// to a token or two.
func (p *pendingText) countPrefix() {
	cut := safeCut(p.buf)
	if cut <= 0 {
		cut = len(p.buf)
		for cut > 0 && !utf8.RuneStart(p.buf[cut-1]) {
			cut--
		}
		if cut > 0 {
			cut-- // before the last (possibly incomplete) character
		}
		if cut <= 0 {
			cut = len(p.buf) // a single broken character: count it whole
		}
	}
	if p.count != nil {
		p.counted += p.count(string(p.buf[:cut]))
	}
	p.buf = p.buf[:copy(p.buf, p.buf[cut:])]
}

// safeCut returns the last offset in b, 0 when none, where the
// pre-tokenizers of the BPE encodings llmguard counts with (cl100k_base,
// o200k_base, and GPT-2's) always end a piece, so that counting b[:cut] and
// b[cut:] apart gives the count of b: right after a newline, or right before
// an ASCII space, when the next byte is a printable ASCII character (not a
// space of any kind, and after a newline not '/'). Their patterns join a
// newline only to the whitespace and symbols before it (`\s*[\r\n]+`,
// ` ?[^\s\p{L}\p{N}]+[\r\n]*`; o200k_base's `[\r\n/]*` also takes slashes
// after it, hence the exception), never to what follows; a space followed
// by anything but whitespace starts a piece (` ?\p{L}+`,
// ` ?[^\s\p{L}\p{N}]+`) or is one (`\s+` before a digit), and
// no pattern ends with a space unless whitespace follows it (`\s+(?!\S)`).
// Source: the encodings' pat_str in OpenAI's tiktoken (tiktoken_ext/
// openai_public.py).
func safeCut(b []byte) int {
	for i := len(b) - 1; i > 0; i-- {
		if c := b[i]; c <= ' ' || c > '~' {
			continue
		}
		// b[i] is printable ASCII, not a space.
		// After a newline, unless the next byte is '/': o200k_base's
		// symbol pieces take "[\r\n/]*" after them, so a piece may run
		// on past a newline into a slash.
		if b[i-1] == '\n' && b[i] != '/' {
			return i
		}
		if b[i-1] == ' ' && i-1 > 0 {
			return i - 1
		}
	}
	return 0
}
