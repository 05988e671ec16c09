package proxy

import (
	"strings"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// An answer relayed unread is counted as text as it passes (passingCount):
// every byte of it once, an upper bound of its output. An honest answer
// whose bytes are mostly not output — a chat completion with logprobs
// (tens of bytes a token beside the content), a Responses answer echoing
// long instructions or tools — was so charged several times its usage
// (its bytes outran weigher.OutputCheckBytes, and its text floored the
// output). answerText leaves out of the count the values of the members
// its kind's API defines to hold no output (weigher.Kind.AnswerNotOutput:
// logprobs, the echoed request, identifiers); every other byte is counted
// as before, members llmguard does not know included, so a hostile shape
// is never counted below its output text.

// notOutputMaxDepth is the deepest container whose members answerText
// matches against the paths: the deepest path of the table has five
// segments (output.*.content.*.logprobs). Deeper members are counted.
const notOutputMaxDepth = 6

// notOutputKeyMax is the most bytes of a key, as written, answerText
// reads: the longest name of the table with each character a six-byte
// \u escape. A longer key names no member of the table.
const notOutputKeyMax = 6 * 24

// answerText passes on the bytes of a JSON answer relayed unread but the
// values of the members that hold no output text (see above), with
// bounded state: the depth, whether it is in a string, a key's first
// notOutputKeyMax bytes and, per container up to notOutputMaxDepth, the
// paths it may still match (a bit set). A key is matched as written, its
// escapes decoded (every JSON parser reads "log\u0070robs" as logprobs);
// a key in other capitals ("Logprobs") is not left out: a parser that
// matches exact names reads it as a member it does not know, which may
// hold output. An answer whose first byte is not "{" (an SSE stream, not
// JSON) is passed on whole, as are the bytes after a JSON value cut
// where it cannot be, as before. The zero value passes everything; not
// safe for concurrent use.
type answerText struct {
	paths [][]string // the kind's paths, split at the dots; at most 64
	mode  int        // framingUnknown, framingJSON, or framingSSE: everything passes

	depth      int
	inStr, esc bool
	readingKey bool
	wantKey    [notOutputMaxDepth + 1]bool // the next string in the object at depth d is a key
	// arr: the container at depth d is an array.
	arr [notOutputMaxDepth + 1]bool
	// in[d]: the paths the container at depth d may still match (all
	// its earlier segments matched); next: the paths the value after the
	// key just read continues.
	in   [notOutputMaxDepth + 1]uint64
	next uint64
	// skip: the value of the member read at skipDepth is left out; it
	// ends at a comma or closing brace at that depth.
	skip      bool
	skipDepth int
	key       [notOutputKeyMax]byte
	keyLen    int
	keyEsc    bool

	// roots are the top-level members whose elements are the answer's
	// output (weigher.Kind.AnswerOutputRoots); root is where the value of
	// one stands (rootNone…); output: a root held an element (a non-empty
	// array, object or string).
	roots  []string
	root   int8
	output bool
}

// Where answerText stands in the value of a root member (answerText.roots).
const (
	rootNone  = iota
	rootKey   // its key was read: its value is next
	rootOpen  // its array or object opened: an element or its end is next
	rootFirst // its string opened: a character or its end is next
)

// newAnswerText returns the filter of an answer whose members at paths
// (weigher.Kind.AnswerNotOutput) hold no output text, and which notes
// whether a top-level member named in roots (weigher.Kind.AnswerOutputRoots)
// holds an element (answerText.output); more than 64 paths pass
// everything, and nil or empty paths and roots too.
func newAnswerText(paths, roots []string) answerText {
	var a answerText
	if len(paths) == 0 && len(roots) == 0 || len(paths) > 64 {
		a.mode = framingSSE
		return a
	}
	a.roots = roots
	a.paths = make([][]string, len(paths))
	for i, p := range paths {
		a.paths[i] = strings.Split(p, ".")
	}
	return a
}

// feed passes on b, the answer's next bytes, calling pass with each run of
// them to count (in order; runs alias b).
func (a *answerText) feed(b []byte, pass func([]byte)) {
	if a.mode == framingUnknown {
		i := 0
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
			i++
		}
		switch {
		case i == len(b):
			pass(b)
			return
		case b[i] == '{':
			a.mode = framingJSON
		default:
			a.mode = framingSSE
		}
	}
	if a.mode != framingJSON {
		pass(b)
		return
	}
	start := 0  // the first byte of b not yet passed or left out
	quote := -1 // the index of the next quote in b from i on, len(b) for none; -1 unknown
	for i := 0; i < len(b); i++ {
		c := b[i]
		if a.root == rootFirst { // a root's string: empty or not
			a.output = a.output || c != '"'
			a.root = rootNone
		}
		if a.inStr && !a.esc && !a.readingKey {
			// A value string's bytes (nearly all of an answer's): to
			// the next quote or backslash, as topUsage.scanJSON skips.
			i, quote = skipStringText(b, i, quote)
			if i == len(b) {
				break
			}
			c = b[i]
		}
		if a.inStr {
			switch {
			case a.esc:
				a.esc = false
				a.keyByte(c)
			case c == '\\':
				a.esc = true
				a.keyEsc = a.keyEsc || a.readingKey
				a.keyByte(c)
			case c == '"':
				a.inStr = false
				if a.readingKey {
					a.readingKey = false
					a.next = a.match()
					if a.depth == 1 && a.isRoot() {
						a.root = rootKey
					}
				}
			default:
				a.keyByte(c)
			}
			continue
		}
		if a.root != rootNone && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			a.rootValue(c)
		}
		switch c {
		case '"':
			a.inStr = true
			if !a.skip && a.depth <= notOutputMaxDepth && a.depth > 0 && !a.arr[a.depth] && a.wantKey[a.depth] {
				a.readingKey, a.keyLen, a.keyEsc, a.wantKey[a.depth] = true, 0, false, false
				a.next = 0
			}
		case ':':
			if !a.skip && a.next == skipValue {
				if i+1 > start {
					pass(b[start : i+1])
				}
				a.skip, a.skipDepth, a.next = true, a.depth, 0
			}
		case '{', '[':
			d := a.depth + 1
			a.depth = d
			if a.skip || d > notOutputMaxDepth {
				continue
			}
			a.arr[d], a.wantKey[d] = c == '[', c == '{'
			switch {
			case d == 1:
				a.in[d] = a.all()
			case a.arr[d-1]:
				a.in[d] = a.elements(d - 1)
			default:
				a.in[d] = a.next
			}
			a.next = 0
		case ',', '}', ']':
			if a.skip && a.depth == a.skipDepth && c != ']' {
				a.skip, start = false, i
			}
			if c != ',' {
				a.depth = max(a.depth-1, 0)
			} else if !a.skip && a.depth > 0 && a.depth <= notOutputMaxDepth {
				a.wantKey[a.depth] = !a.arr[a.depth]
			}
			a.next = 0
		}
	}
	if !a.skip && start < len(b) {
		pass(b[start:])
	}
}

// rootValue moves on where a is in a root's value (answerText.root), c
// being the next byte of the answer outside a string that is not
// whitespace.
func (a *answerText) rootValue(c byte) {
	switch {
	case a.root == rootKey && c == ':':
	case a.root == rootKey && (c == '[' || c == '{'):
		a.root = rootOpen
	case a.root == rootKey && c == '"':
		a.root = rootFirst
	case a.root == rootOpen:
		a.output = a.output || c != ']' && c != '}'
		a.root = rootNone
	default: // null, a number, true or false; or JSON no parser reads
		a.root = rootNone
	}
}

// isRoot reports whether the key just read names a root (answerText.roots):
// its escapes decoded and its case folded, as encoding/json matches a
// field (the widest reading: it can only charge an answer its output).
func (a *answerText) isRoot() bool {
	if len(a.roots) == 0 || a.keyLen > len(a.key) {
		return false
	}
	key := a.key[:a.keyLen]
	var dec, fold [2 * notOutputKeyMax]byte
	if a.keyEsc {
		var ok bool
		if key, ok = unescapeKey(dec[:0], key); !ok {
			return false
		}
	}
	if !jsonscan.Folded(key) {
		key = jsonscan.FoldKey(fold[:0], key)
	}
	for _, r := range a.roots {
		if string(key) == r {
			return true
		}
	}
	return false
}

// skipValue is the match of a key whose value is left out: a path ends
// at it.
const skipValue = ^uint64(0)

// keyByte adds c to the key being read, as written.
func (a *answerText) keyByte(c byte) {
	if !a.readingKey {
		return
	}
	if a.keyLen < len(a.key) {
		a.key[a.keyLen] = c
	}
	a.keyLen++
}

// all is the set of every path.
func (a *answerText) all() uint64 {
	if len(a.paths) == 64 {
		return ^uint64(0)
	}
	return uint64(1)<<len(a.paths) - 1
}

// elements is the set of paths an element of the array at depth d
// continues: those in[d] whose segment for it is "*".
func (a *answerText) elements(d int) uint64 {
	var m uint64
	for i, p := range a.paths {
		if a.in[d]&(1<<i) != 0 && len(p) > d && p[d-1] == "*" {
			m |= 1 << i
		}
	}
	return m
}

// match is what the key just read, in the object at depth, continues of
// the paths the object may match: skipValue when one ends at it, else
// those that go on past it.
func (a *answerText) match() uint64 {
	d := a.depth
	if a.keyLen > len(a.key) || a.in[d] == 0 {
		return 0
	}
	key := a.key[:a.keyLen]
	var dec [notOutputKeyMax]byte
	if a.keyEsc {
		var ok bool
		if key, ok = unescapeKey(dec[:0], key); !ok {
			return 0
		}
	}
	var m uint64
	for i, p := range a.paths {
		if a.in[d]&(1<<i) == 0 || len(p) < d || p[d-1] != string(key) {
			continue
		}
		if len(p) == d {
			return skipValue
		}
		m |= 1 << i
	}
	return m
}
