package proxy

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// usageMaxBytes is the most bytes of a top-level "usage" value topUsage
// keeps: a usage with every detail OpenAI and Anthropic report is a few
// hundred. A longer one is not read (the answer is then charged its text).
const usageMaxBytes = 4 << 10

// tierMaxBytes is the most bytes of a service_tier value (or a Responses
// event's "type") topUsage keeps: a string of spec.MaxServiceTierBytes
// characters each written as a six-byte escape, and its quotes. A longer
// value names no tier llmguard takes as written (spec.TierUnread: the
// dearest).
const tierMaxBytes = 6*spec.MaxServiceTierBytes + 2

// Members topUsage reads: at the top level of each JSON value of the
// answer (the answer itself, or each event of an SSE stream passed
// unread), "usage", "service_tier", "type" and "response"; in the object
// "response" names, "service_tier" and "usage".
const (
	memberOther = iota
	memberUsage
	memberTier
	memberType
	memberResponse
)

// keyMaxBytes is the most bytes of a key, as written, that topUsage reads:
// the longest name it reads ("service_tier") with each character written
// as a six-byte \u escape. A longer key names no member it reads.
const keyMaxBytes = 6 * len("service_tier")

// memberOf is the member a key of depth names: key is its bytes as
// written (at most keyMaxBytes), escaped when esc. The key is read as the
// parsers an upstream's SDKs and gateways use would read it: its escapes
// decoded (encoding/json, Python's json and gjson all do:
// "service\u005ftier" is service_tier), and its case folded
// (jsonscan.FoldKey: encoding/json matches a key to a field ignoring case,
// "Service_Tier" and "ſervice_tier" among them). A reading can only add to
// the charge (a tier joined, a usage's dearer figures), so the widest is
// taken.
func memberOf(key []byte, esc bool, depth int) int {
	if esc || !jsonscan.Folded(key) {
		return memberOfWritten(key, esc, depth)
	}
	return memberNamed(string(key), depth)
}

// memberOfWritten is memberOf for a key written with an escape or a
// character that folds.
func memberOfWritten(key []byte, esc bool, depth int) int {
	var dec, fold [2 * keyMaxBytes]byte
	if esc {
		var ok bool
		if key, ok = unescapeKey(dec[:0], key); !ok {
			return memberOther // not a JSON string: no parser reads the answer
		}
	}
	if !jsonscan.Folded(key) {
		key = jsonscan.FoldKey(fold[:0], key)
	}
	return memberNamed(string(key), depth)
}

// memberNamed is the member the key k (decoded and folded) of depth names.
func memberNamed(k string, depth int) int {
	switch {
	case depth == 2:
		switch k {
		case "service_tier":
			return memberTier
		case "usage":
			return memberUsage
		}
	case k == "usage":
		return memberUsage
	case k == "service_tier":
		return memberTier
	case k == "type":
		return memberType
	case k == "response":
		return memberResponse
	}
	return memberOther
}

// unescapeKey appends to dst the text of the JSON string whose contents
// (between the quotes) are raw, its escapes decoded (RFC 8259 §7; a
// surrogate pair as one character, a lone surrogate as U+FFFD, as
// encoding/json decodes it); ok is false for a malformed escape.
func unescapeKey(dst, raw []byte) (text []byte, ok bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i+1 == len(raw) {
			return dst, false
		}
		if d, short := shortEscape(raw[i+1]); short {
			dst = append(dst, d)
			i++
			continue
		}
		r, n := escapedRune(raw[i:])
		if n == 0 {
			return dst, false
		}
		dst = utf8.AppendRune(dst, r)
		i += n - 1
	}
	return dst, true
}

// escapedRune reads the \uXXXX escape at the start of b (and the low half
// after a high surrogate): the character and the bytes read, 0 when b
// does not start with one.
func escapedRune(b []byte) (rune, int) {
	if len(b) < 6 || b[1] != 'u' || !isHex4(b[2:6]) {
		return 0, 0
	}
	r := jsonscan.Hex4(b[2:6])
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' && isHex4(b[8:12]) {
		if p := utf16.DecodeRune(r, jsonscan.Hex4(b[8:12])); p != utf8.RuneError {
			return p, 12
		}
	}
	return utf8.RuneError, 6
}

// isHex4 reports whether b's first four bytes are hex digits.
func isHex4(b []byte) bool {
	return jsonscan.IsHex(b[0]) && jsonscan.IsHex(b[1]) && jsonscan.IsHex(b[2]) && jsonscan.IsHex(b[3])
}

// tierValue is a short member value topUsage keeps (service_tier, type):
// its bytes up to tierMaxBytes, over when it was longer.
type tierValue struct {
	b    [tierMaxBytes]byte
	n    int
	over bool
	set  bool
}

func (v *tierValue) start() { v.n, v.over, v.set = 0, false, true }

func (v *tierValue) add(c byte) {
	if v.n == len(v.b) {
		v.over = true
		return
	}
	v.b[v.n] = c
	v.n++
}

// tier is the service tier v names (weigher.ServedTierOf), "" when unset.
func (v *tierValue) tier() string {
	switch {
	case !v.set:
		return ""
	case v.over:
		return spec.TierUnread
	}
	return weigher.ServedTierOf(v.b[:v.n])
}

// terminalEvents are the Responses streaming events whose "response"
// names the tier the answer was served at
// (https://platform.openai.com/docs/api-reference/responses-streaming;
// response.created names the tier asked for, "auto" for none).
var terminalEvents = [...]string{"response.completed", "response.incomplete", "response.failed"}

// terminal reports whether v, a "type" value, names a terminal event: a
// JSON string whose text (escapes decoded: "response.complete\u0064" is
// response.completed) is one of terminalEvents.
func (v *tierValue) terminal() bool {
	if !v.set || v.over {
		return false
	}
	t := bytes.Trim(v.b[:v.n], " \t\r\n")
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return false
	}
	t = t[1 : len(t)-1]
	var dec [tierMaxBytes]byte
	if bytes.IndexByte(t, '\\') >= 0 {
		var ok bool
		if t, ok = unescapeKey(dec[:0], t); !ok {
			return false
		}
	}
	return isTerminalEvent(t)
}

// isTerminalEvent reports whether t, an event type's text, is one of
// terminalEvents.
func isTerminalEvent(t []byte) bool {
	for _, e := range terminalEvents {
		if string(t) == e {
			return true
		}
	}
	return false
}

// topUsage finds the value of the key "usage" of the top-level object(s)
// of a JSON answer that passes in pieces (a whole answer, or the events of
// an SSE stream passed unread), with bounded state: the depth, whether it
// is inside a string, the key being read (its first keyMaxBytes bytes),
// the usage's value, up to usageMaxBytes, the service tier values, up to
// tierMaxBytes, and an SSE stream's framing (sseFraming). Keys are
// read as parsers read them, escapes decoded and case folded (memberOf).
// Each usage value found is handed to found: a top-level "usage", and a
// Responses terminal event's response.usage (a Responses stream's bill,
// hidden reasoning included), when the event ends. The service tier named (tier)
// is the join (weigher.JoinServedTiers) of each top-level value's: every
// top-level "service_tier" it has (a chat completion, a chunk, a Responses
// response), and, for a Responses terminal event (a "type" of its naming
// response.completed, response.incomplete or response.failed), every
// service_tier of every "response" it has. A member named twice is read
// both times: parsers keep the first (gjson) or the last (encoding/json,
// Python's json), so the upstream may have billed either. The zero value
// is ready; not safe for concurrent use.
type topUsage struct {
	// framing is the framing of an answer that is an SSE stream.
	framing sseFraming

	depth      int
	inStr, esc bool
	wantKey    bool // the next string at keyDepth is a key
	readingKey bool
	key        [keyMaxBytes]byte
	keyLen     int  // bytes of the key read; over len(key): none read
	keyEsc     bool // the key holds an escape
	// next is the member whose value follows the key just read; member
	// the top-level member whose value is being read.
	next, member int
	// inResponse: the depth-2 object is the value of the top-level
	// "response" (its keys are read).
	inResponse bool
	// capturing is the member whose value is being kept (memberOther:
	// none), from capDepth on.
	capturing, capDepth int
	val                 []byte
	// topTier, respTier and typ are the service_tier, response.service_tier
	// and type being read.
	topTier, respTier, typ tierValue
	// terminal: a "type" of the current top-level value named a terminal
	// event; respTiers is the join of its response.service_tier values.
	terminal  bool
	respTiers string
	// respUsage holds the usages of the current value's response, kept
	// until the value ends: a terminal event's are handed on (a Responses
	// stream's usage is its response.completed's).
	respUsage keptUsages
	// tier is the service tier the values ended so far name.
	tier string
}

// keyDepth reports whether keys are read at depth d.
func (s *topUsage) keyDepth(d int) bool { return d == 1 || d == 2 && s.inResponse }

// scan reads b, calling found with each complete top-level usage value.
func (s *topUsage) scan(b []byte, found func(val []byte)) {
	if s.framing.mode == framingJSON {
		s.scanJSON(b, found)
		return
	}
	s.scanFramed(b, found)
}

// skipStringText is where a scan inside a JSON string's text goes from
// index i of b: the next quote or backslash at or after i, len(b) for
// none. quote is the next quote's index from i on as the caller keeps it
// (below i: not known yet; len(b): none), returned updated, so that a text
// of many escapes is not searched again for its quote at each one.
func skipStringText(b []byte, i, quote int) (next, nextQuote int) {
	if quote < i {
		quote = bytes.IndexByte(b[i:], '"')
		if quote < 0 {
			quote = len(b)
		} else {
			quote += i
		}
	}
	if j := bytes.IndexByte(b[i:quote], '\\'); j >= 0 {
		return i + j, quote
	}
	return quote, quote
}

// scanJSON reads b, JSON text, calling found with each complete top-level
// usage value. The bytes of a string it neither keeps nor reads as a key
// (an answer's text, nearly all of its bytes) are skipped to the next quote
// or backslash with bytes.IndexByte, the next quote's place kept (quote)
// so that a text of many escapes is not searched again for each: about 39
// instructions a byte before (BenchmarkProxyPathUnread under callgrind).
func (s *topUsage) scanJSON(b []byte, found func(val []byte)) {
	quote := -1 // the index of the next quote in b from i on, len(b) for none; -1 unknown
	for i := 0; i < len(b); i++ {
		c := b[i]
		if s.inStr && !s.esc && !s.readingKey && s.capturing == memberOther {
			i, quote = skipStringText(b, i, quote)
			if i == len(b) {
				return
			}
			c = b[i]
		}
		if s.inStr {
			s.keep(c)
			switch {
			case s.esc:
				s.esc = false
				if s.readingKey {
					s.keyByte(c)
				}
			case c == '\\':
				s.esc = true
				if s.readingKey {
					s.keyEsc = true
					s.keyByte(c)
				}
			case c == '"':
				s.inStr = false
				if s.readingKey {
					s.readingKey = false
					if s.keyLen <= len(s.key) {
						s.next = memberOf(s.key[:s.keyLen], s.keyEsc, s.depth)
					}
				}
			case s.readingKey:
				s.keyByte(c)
			}
			continue
		}
		switch c {
		case '"':
			s.inStr = true
			if s.keyDepth(s.depth) && s.wantKey {
				s.readingKey, s.keyLen, s.keyEsc, s.wantKey, s.next = true, 0, false, false, memberOther
			}
		case ':':
			if s.keyDepth(s.depth) && s.capturing == memberOther {
				m := s.next
				s.next = memberOther
				if s.depth == 1 {
					s.member = m
				}
				switch {
				case m == memberUsage:
					s.capturing, s.capDepth, s.val = m, s.depth, s.val[:0]
					continue
				case m == memberTier && s.depth == 1:
					s.capturing, s.capDepth = m, 1
					s.topTier.start()
					continue
				case m == memberTier:
					s.capturing, s.capDepth = m, 2
					s.respTier.start()
					continue
				case m == memberType:
					s.capturing, s.capDepth = m, 1
					s.typ.start()
					continue
				}
			}
		case '{', '[':
			s.depth++
			switch {
			case s.depth == 1:
				s.wantKey, s.member = c == '{', memberOther
				s.startValue()
			case s.depth == 2 && s.member == memberResponse && s.capturing == memberOther:
				s.inResponse, s.wantKey = c == '{', c == '{'
			}
		case '}', ']':
			if s.depth == s.capDepth {
				s.end(found)
			}
			if s.depth == 2 {
				s.inResponse = false
			}
			if s.depth == 1 {
				s.endValue(found)
			}
			s.depth = max(s.depth-1, 0)
		case ',':
			if s.depth == s.capDepth {
				s.end(found)
			}
			if s.keyDepth(s.depth) {
				s.wantKey = true
				if s.depth == 1 {
					s.member = memberOther
				}
			}
		}
		s.keep(c)
	}
}

// keyByte adds c, the next byte of the key being read, as written.
func (s *topUsage) keyByte(c byte) {
	if s.keyLen < len(s.key) {
		s.key[s.keyLen] = c
	}
	s.keyLen++
}

// keep adds c to the value being read, if any: the usage's, dropped when
// it grows past usageMaxBytes; a tier's or type's, marked over past
// tierMaxBytes.
func (s *topUsage) keep(c byte) {
	switch s.capturing {
	case memberOther:
	case memberUsage:
		if len(s.val) >= usageMaxBytes {
			s.capturing, s.capDepth, s.val = memberOther, 0, nil
			return
		}
		s.val = append(s.val, c)
	case memberTier:
		if s.capDepth == 1 {
			s.topTier.add(c)
		} else {
			s.respTier.add(c)
		}
	case memberType:
		s.typ.add(c)
	}
}

// end ends the value being read at capDepth, handing a usage to found
// (nil: a value cut, not handed). A top-level service_tier joins the
// answer's at once, so that an answer cut after it is priced at it too;
// a response's joins the value's (respTiers), and a type marks it
// terminal, each time the member is named.
func (s *topUsage) end(found func(val []byte)) {
	m, d := s.capturing, s.capDepth
	s.capturing, s.capDepth = memberOther, 0
	switch {
	case m == memberUsage && d == 2:
		s.respUsage.add(s.val)
	case m == memberUsage:
		if found != nil {
			found(s.val)
		}
	case m == memberTier && d == 1:
		if t := s.topTier.tier(); t != "" {
			s.tier = weigher.JoinServedTiers(s.tier, t)
		}
		s.topTier.set = false
	case m == memberTier:
		if t := s.respTier.tier(); t != "" {
			s.respTiers = weigher.JoinServedTiers(s.respTiers, t)
		}
		s.respTier.set = false
	case m == memberType:
		s.terminal = s.terminal || s.typ.terminal()
		s.typ.set = false
	}
}

// startValue starts a top-level value.
func (s *topUsage) startValue() {
	s.topTier.set, s.respTier.set, s.typ.set = false, false, false
	s.respUsage.n = 0
	s.terminal, s.respTiers = false, ""
}

// endValue ends a top-level value: the tiers a Responses terminal event's
// response names join the answer's, and its response's usage is handed to
// found (nil: not handed, the value was cut); the tiers of an SSE event
// whose data names no terminal type wait for its event field
// (sseFraming.respTiers, and its response's usage, respUsage), or join
// at once when it has named one.
func (s *topUsage) endValue(found func(val []byte)) {
	if s.respUsage.n > 0 && (s.terminal || s.framing.evTerminal) && found != nil {
		s.respUsage.hand(found)
	}
	if f := &s.framing; s.respUsage.n > 0 && !s.terminal && !f.evTerminal && f.mode == framingSSE {
		for _, v := range s.respUsage.v[:s.respUsage.n] {
			f.respUsage.add(v)
		}
	}
	switch f := &s.framing; {
	case s.respTiers == "":
	case s.terminal || f.evTerminal:
		s.tier = weigher.JoinServedTiers(s.tier, s.respTiers)
	case f.mode == framingSSE:
		f.respTiers = weigher.JoinServedTiers(f.respTiers, s.respTiers)
	}
	s.startValue()
}

// cut ends the value being read where it stands (an SSE event whose data
// ended inside it): a service tier or type being read ends there (a tier
// cut short is no string: spec.TierUnread), the top-level value too, and
// the reading starts afresh. A usage cut short is not handed on.
func (s *topUsage) cut() {
	if s.capturing != memberOther {
		s.end(nil)
	}
	if s.depth > 0 {
		s.endValue(nil)
	}
	s.depth, s.inStr, s.esc, s.readingKey, s.wantKey, s.inResponse = 0, false, false, false, false, false
	s.next, s.member = memberOther, memberOther
}

// keptUsages are the usage values a Responses response names, kept until
// its event ends: the first and the last (parsers keep one or the other:
// gjson the first, encoding/json and Python's json the last; one between
// them is no parser's reading), each at most usageMaxBytes. Named twice,
// both are handed on, and read at their dearer figures. The zero value
// holds none.
type keptUsages struct {
	v [2][]byte
	n int // values held: v[:n]
}

// add keeps val (copied) as the first usage, or as the last.
func (k *keptUsages) add(val []byte) {
	i := min(k.n, 1)
	k.v[i] = append(k.v[i][:0], val...)
	k.n = i + 1
}

// hand calls found with each usage held, then holds none.
func (k *keptUsages) hand(found func(val []byte)) {
	n := k.n
	k.n = 0
	for _, v := range k.v[:n] {
		found(v)
	}
}
