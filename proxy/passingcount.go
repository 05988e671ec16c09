package proxy

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// An uncompressed non-streamed answer relayed unread (no room in
// max_inflight_response_bytes, or over max_response_bytes) is counted as
// it passes to its client, in the pieces fasthttp reads, never held whole:
// its bytes, JSON string escapes decoded (jsonUnescaper), are counted as
// text (pendingText, as a stream's text is), and it is charged at least
// that, beside its reservation. Its raw bytes hold all of its output text
// and its framing besides, so the count is an upper bound of the text the
// upstream generated, never below it. Settled at the reservation alone, a
// caller who filled the answer budget on purpose (large answers read
// slowly) had its other answers, of any length, charged the 256-token
// default (TestUnread32AnswerWithoutRoomChargesItsText).

// passingCount counts the text of x's answer of status as it is relayed
// unread (upstreamBody), and settles x once, when the answer has ended or
// its body is closed. Not safe for concurrent use: fasthttp reads and
// closes the body on one goroutine.
type passingCount struct {
	p      *Proxy
	x      *exchange
	status int
	esc    jsonUnescaper
	text   pendingText
	// usage reads the answer's top-level usage as it passes (found, u);
	// its text is counted before and after one, so that settle can check
	// the usage against it.
	usage topUsage
	found bool
	u     spec.Usage
	// bytes is the answer's bytes relayed.
	bytes int64
	// filter leaves out of the text the values of the members that hold
	// no output (answerText); textBytes are the bytes it passed, which a
	// usage is checked against (settle); pass counts a run it passes.
	filter    answerText
	textBytes int64
	pass      func(run []byte)
	// broken: counting panicked (contained); the answer is settled at its
	// reservation, or refunded under an error status.
	broken bool
	done   bool
	// refund: the answer's status is an error status (meter.SourceOf):
	// refunded unless it shows the upstream generated it (settle).
	refund bool
	// head is the answer's first bytes (headLen of them), which tell an
	// SSE stream (sseBody) from an error body.
	head    [passingHead]byte
	headLen int
	// tap reads an answer to a stream request under an error status that
	// is an SSE stream (sseBody of its head) as a relayed stream is read,
	// from its first byte, so that it is settled as one is
	// (settleStream): refunded when it carried no output (an error event
	// alone), charged when it did. nil: not such an answer, or not yet
	// decided (decided). tapMem is what its scanner took of the answer
	// budget.
	tap     *usageTap
	tapMem  decoderMemory
	decided bool
}

// passingHead is the most bytes of an answer passingCount keeps to tell an
// SSE stream from an error body: the longest first line sseBody decides on
// at once ("retry:") and the whitespace and byte order mark before it,
// with room to spare.
const passingHead = 64

// newPassingCount returns the counter of x's answer of status, a weighed
// answer whose text is its output (not an image's). The caller settles x
// through it alone.
func newPassingCount(p *Proxy, x *exchange, status int) *passingCount {
	wg, model := x.live.weigher, x.est.Model
	c := &passingCount{p: p, x: x, status: status, refund: meter.SourceOf(status) == spec.SourceRefund}
	c.tapMem.p = p
	c.decided = !c.refund || !x.est.Stream // only a stream request's error answer may be read as a stream
	var roots []string
	if c.refund { // only an error status asks whether the answer holds output
		roots = x.kind.AnswerOutputRoots()
	}
	c.filter = newAnswerText(x.kind.AnswerNotOutput(), roots)
	c.text = pendingText{count: func(text string) int64 { return wg.CountText(model, text) }, countAt: tapCountEvery}
	c.pass = c.passText
	return c
}

// countsPassing reports whether x's unread answer, in the content coding
// encoding, is counted as it passes (passingCount): an uncompressed answer
// of a weighed kind whose output is text, under any status (one under an
// error status is refunded unless it shows output: passingCount.settle).
// A compressed one is not read (unreadSettlement).
func countsPassing(x *exchange, encoding []byte) bool {
	return x.kind.Weighed() && !x.kind.OutputUncountable() && uncoded(encoding) && x.live != nil
}

// unreadSettlement is the settlement of x's answer of status relayed
// unread and not counted as it passes (countsPassing: compressed, or a
// kind whose output is not text): its reservation, refunded under an
// error status (meter.SourceOf) unless the answer was over
// max_response_bytes (tooLarge) for a weighed kind. No provider's error
// body comes near that size (64 MiB by default; OpenAI's and Anthropic's
// are a few hundred bytes): an answer so large under an error status is
// output a gateway or a lenient upstream relayed under it, generated and
// billed (left by adv44: it was refunded).
func unreadSettlement(x *exchange, status int, tooLarge bool) meter.Settlement {
	if tooLarge && x.kind.Weighed() {
		return meter.Settlement{Source: spec.SourceReserved}
	}
	return meter.Settlement{Source: meter.SourceOf(status)}
}

// passingPiece is the most bytes of an answer relayed unread decoded and
// added to its text at once.
const passingPiece = 4 << 10

// see counts b, the answer's next bytes as relayed.
func (c *passingCount) see(b []byte) {
	if c == nil || c.broken || c.done || len(b) == 0 {
		return
	}
	ok := false
	had := c.headLen
	c.headLen += copy(c.head[c.headLen:], b)
	c.bytes += int64(len(b))
	c.p.contain(meter.StageSettle, c.x, func() {
		switch {
		case c.tap != nil:
			c.tap.feed(b)
		case !c.decided && c.headLen == passingHead:
			c.decide(b[c.headLen-had:])
		}
		c.usage.scan(b, c.foundUsage)
		// Counted after a usage too: a usage that came first (before
		// "choices", or a stream's usage chunk before its text) is checked
		// against the text that follows it (settle). All but the values
		// of the members that hold no output (answerText).
		c.filter.feed(b, c.pass)
		ok = true
	})
	c.broken = !ok
}

// decide decides, once, whether the answer is an SSE stream to be read
// by a tap (passingCount.tap), from its head; rest is the bytes seen
// after the head, fed to the tap after it.
func (c *passingCount) decide(rest []byte) {
	c.decided = true
	if !sseBody(c.head[:c.headLen]) {
		return
	}
	x := c.x
	wg, model := x.live.weigher, x.est.Model
	tap := newUsageTap(wg.NewStream(x.kind), false, expectsUsage(x), func(text string) int64 { return wg.CountText(model, text) })
	tap.mem = &c.tapMem
	c.tap = &tap
	c.tap.feed(c.head[:c.headLen])
	if len(rest) > 0 {
		c.tap.feed(rest)
	}
}

// passText counts run, bytes of the answer that may hold output text, in
// pieces, so that the buffers an answer keeps while its upstream stalls
// stay small: the decoded piece (passingPiece and an escape's bytes) and
// the text held uncounted (tapCountEvery and a piece).
func (c *passingCount) passText(run []byte) {
	c.textBytes += int64(len(run))
	for len(run) > 0 {
		n := min(len(run), passingPiece)
		d := c.esc.decode(run[:n])
		// add copies the text and keeps no reference to it.
		c.text.add(unsafe.String(unsafe.SliceData(d), len(d)))
		run = run[n:]
	}
}

// foundUsage takes val, a top-level usage value of the answer, when its
// kind reads it as a usage (Weigher.ParseUsage of a document holding it
// alone); of two, their dearer reading (weigher.UpperUsage: each figure
// at its larger, the cached input at its smaller). A parser keeps the
// first of two "usage" members (gjson) or the last (encoding/json,
// Python's json), so the upstream may have billed either; the larger
// total taken before could be the cheaper bill (9 input and 6,000 output
// tokens beside 3,000 and 10: the second's input was lost).
func (c *passingCount) foundUsage(val []byte) {
	doc := make([]byte, 0, len(val)+len(`{"usage":}`))
	doc = append(append(append(doc, `{"usage":`...), val...), '}')
	u, ok := c.x.live.weigher.ParseUsage(c.x.kind, doc, &c.x.est)
	switch {
	case !ok:
	case c.found:
		c.u = weigher.UpperUsage(c.u, u)
	default:
		c.found, c.u = true, u
	}
}

// settle settles x, once; ended: the answer ended (its upstream's end
// read), rather than its body closed before (its charge is the same
// either way: what passed, at least the reservation). With a top-level
// usage found, each of its input and output at least the reservation's,
// settled partial; its output, for a kind whose held answers are checked
// so (weigher.Kind.OutputTextChecked: not embeddings, whose answers are
// numbers), is checked against the answer's bytes as a held answer's is
// (Weigher.ParseUsage): a usage reporting 0 output
// tokens, or fewer than weigher.OutputCheckBytes allows for the bytes
// that may hold its text (c.textBytes), is charged at least the text
// counted, wherever the usage came (first, before a long text, or last).
// That count is of every byte of the answer but the values of the members
// that hold no output (answerText: logprobs, a Responses answer's echoed
// instructions and tools), framing included (an upper bound of its
// text), so an honest answer (about 4.5 bytes a token and a few hundred
// of framing) stays within the bound and is charged its usage, logprobs
// or echoed request beside its text or not
// (TestUnread38HonestAnswersChargedTheirUsage). Without a usage, at least
// the output counted, when that is more than the reservation (settled
// partial: the estimate's input, the output counted), else the
// reservation. Either
// way at the service tier the answer named as served (topUsage.tier),
// when it named one: the meter charges the dearer of it and the tier
// asked. Read only at the tier asked, an answer served at priority to a
// request that named no tier was charged half its bill (gpt-5) whenever
// the answer budget was full (TestUnreadAnswerChargedAtTheServedTier).
// It ends x's observation after.
func (c *passingCount) settle(ended bool) {
	if c == nil || c.done {
		return
	}
	c.done = true
	x := c.x
	if !c.broken && !c.decided {
		c.p.contain(meter.StageSettle, x, func() { c.decide(nil) }) // an answer shorter than the head
	}
	if c.tap != nil && !c.broken {
		// An SSE stream answering a stream request under an error
		// status: settled as the same stream held is (settleHeldStream)
		// and as a relayed one is, by what it carried: refunded for an
		// error event alone, charged its text or usage otherwise.
		c.tap.cut = !ended
		c.p.contain(meter.StageSettle, x, func() { c.p.settleStream(x, c.tap, c.status) })
		c.tapMem.release()
		if x.obs != nil {
			c.p.settled(x, x.status)
		}
		return
	}
	c.tapMem.release()
	s := meter.Settlement{Source: spec.SourceReserved}
	if c.refund {
		s.Source = spec.SourceRefund
	}
	c.p.contain(meter.StageSettle, x, func() {
		if c.broken {
			return
		}
		if c.refund && !c.found && !c.filter.output {
			// An error status whose answer holds no usage and no element
			// of its kind's output (choices, content, output…): an error
			// body, however long. Refunded, as a held one is. (An SSE
			// stream answering a stream request was read by c.tap.)
			return
		}
		// Any other is settled as a 2xx answer is: the upstream generated
		// what it carries (adv45; a held answer: adv44).
		s.Source = spec.SourceReserved
		// The tier the answer names as served (topUsage.tier) prices its
		// charge, whatever the tokens: served at priority, a request that
		// asked for none costs priority's prices (meter: the dearer of
		// the two).
		tier := c.usage.tier
		d := c.esc.end()
		c.text.add(unsafe.String(unsafe.SliceData(d), len(d)))
		if c.found {
			// A usage its own answer's bytes contradict is not taken at its
			// word (as Weigher.ParseUsage does for a held answer): its output
			// is at least the text counted, for a kind whose held answers are
			// checked so (not an embeddings answer's numbers). Never below the
			// reservation either, as before the text was checked.
			u := c.u
			if x.kind.OutputTextChecked() && (u.OutputTokens == 0 || c.textBytes > weigher.OutputCheckBytes(u.OutputTokens)) {
				u.OutputTokens = max(u.OutputTokens, c.text.tokens())
			}
			if u.InputTokens <= x.est.InputTokens && u.OutputTokens <= x.est.OutputTokens && tier == "" {
				return // the reservation
			}
			u.InputTokens = max(u.InputTokens, x.est.InputTokens)
			u.OutputTokens = max(u.OutputTokens, x.est.OutputTokens)
			u.WebSearches = max(u.WebSearches, x.est.WebSearches)
			u.ServiceTier = tier
			s = meter.Settlement{Source: spec.SourcePartial, Usage: u}
			return
		}
		if n := c.text.tokens(); n > x.est.OutputTokens || tier != "" {
			s = meter.Settlement{Source: spec.SourcePartial, Usage: spec.Usage{
				InputTokens: x.est.InputTokens, OutputTokens: max(n, x.est.OutputTokens), WebSearches: x.est.WebSearches, ServiceTier: tier}}
		}
	})
	c.p.contain(meter.StageSettle, x, func() { x.settle(s) })
	if x.obs != nil {
		c.p.settled(x, x.status)
	}
}

// jsonUnescaper decodes the escapes of JSON strings (RFC 8259 §7: \" \\ \/
// \b \f \n \r \t and \uXXXX, a UTF-16 surrogate pair as one character) in
// bytes that arrive in pieces, an escape possibly split between two; every
// other byte passes as it is. A malformed escape (an unknown letter, too
// few hex digits, a lone surrogate) passes as its raw bytes, which are at
// least as many as any character it could stand for. Escapes pair up left
// to right as a JSON parser pairs them, inside strings or not (valid JSON
// has no backslash outside a string). The zero value is ready; not safe
// for concurrent use.
type jsonUnescaper struct {
	pend [12]byte // an escape begun and not yet decided: at most a surrogate pair
	n    int
	out  []byte
}

// decode returns b with its escapes decoded, an escape left unfinished at
// its end held for the next call. The result is valid until the next call.
func (u *jsonUnescaper) decode(b []byte) []byte {
	u.out = u.out[:0]
	for len(b) > 0 {
		if u.n > 0 {
			u.push(b[0])
			b = b[1:]
			continue
		}
		i := bytes.IndexByte(b, '\\')
		if i < 0 {
			u.out = append(u.out, b...)
			break
		}
		u.out = append(u.out, b[:i]...)
		u.push('\\')
		b = b[i+1:]
	}
	return u.out
}

// end returns the raw bytes of an escape left unfinished (the answer ended
// inside it). The result is valid until the next call.
func (u *jsonUnescaper) end() []byte {
	u.out = append(u.out[:0], u.pend[:u.n]...)
	u.n = 0
	return u.out
}

// push adds c to the escape pending (or starts one) and decides it when it
// can.
func (u *jsonUnescaper) push(c byte) {
	if u.n == 0 {
		if c == '\\' {
			u.pend[0], u.n = c, 1
		} else {
			u.out = append(u.out, c)
		}
		return
	}
	u.pend[u.n] = c
	u.n++
	p := u.pend[:u.n]
	if len(p) == 2 {
		if d, ok := shortEscape(p[1]); ok {
			u.out = append(u.out, d)
			u.n = 0
		} else if p[1] != 'u' {
			u.reject(1) // not an escape: the backslash as it is
		}
		return
	}
	if len(p) <= 6 { // \uXXXX
		if !jsonscan.IsHex(c) {
			u.reject(len(p) - 1)
			return
		}
		if len(p) < 6 {
			return
		}
		r := jsonscan.Hex4(p[2:6])
		switch {
		case !utf16.IsSurrogate(r):
			u.out = utf8.AppendRune(u.out, r)
			u.n = 0
		case r >= 0xdc00: // a low surrogate alone
			u.reject(6)
		}
		return // a high surrogate waits for its low half
	}
	// The low half of a pair: \uYYYY after \uXXXX.
	switch {
	case len(p) == 7 && c != '\\', len(p) == 8 && c != 'u', len(p) > 8 && !jsonscan.IsHex(c):
		u.reject(6) // the high surrogate alone, as it came
		return
	case len(p) < 12:
		return
	}
	r := utf16.DecodeRune(jsonscan.Hex4(p[2:6]), jsonscan.Hex4(p[8:12]))
	if r == utf8.RuneError {
		u.reject(6)
		return
	}
	u.out = utf8.AppendRune(u.out, r)
	u.n = 0
}

// reject passes the pending escape's first k bytes raw and reads the rest
// again (they may begin another escape).
func (u *jsonUnescaper) reject(k int) {
	var rest [12]byte
	m := copy(rest[:], u.pend[k:u.n])
	u.out = append(u.out, u.pend[:k]...)
	u.n = 0
	for _, c := range rest[:m] {
		u.push(c)
	}
}

// shortEscape is the byte a two-byte escape \c stands for.
func shortEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}
