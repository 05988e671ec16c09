package proxy

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	brotli "github.com/molecule-man/go-brrr"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/contentcoding"
	"github.com/llmguard/llmguard/internal/monoclock"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// errClientGone aborts the upstream read when the client has disconnected.
var errClientGone = errors.New("proxy: client disconnected")

// http11 is the protocol of every answer llmguard writes (RFC 9112).
var http11 = []byte("HTTP/1.1")

// relay sends the upstream response to the client, reading usage on the way,
// and settles the exchange. It owns resp. An answer llmguard must give
// itself instead (the upstream refused the gateway, or its body was lost)
// is returned, for Handle to write.
func (p *Proxy) relay(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response) *refusal {
	if st := resp.StatusCode(); (st == fasthttp.StatusUnauthorized || st == fasthttp.StatusForbidden) && !x.principal.PassThrough {
		return p.gatewayCredentialRefused(ctx, x, resp)
	}
	if st := resp.StatusCode(); st < 200 {
		return p.informationalRefused(ctx, x, resp)
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	if !resp.Header.IsHTTP11() {
		// CopyTo carried the upstream's HTTP/1.0 over: its status line,
		// and fasthttp's mark that keeps a body stream unchunked. The
		// caller's answer is llmguard's own HTTP/1.1; the mark cannot be
		// cleared, so a streamed body ends by closing the connection
		// (without this, the caller waited for the idle timeout to learn
		// that the answer had ended: TestHTTP10UpstreamStreamEndsForTheCaller).
		ctx.Response.Header.SetProtocol(http11)
		ctx.Response.SetConnectionClose()
	}
	removeFields(&ctx.Response.Header, nil)
	setField(&ctx.Response.Header, requestIDField, []byte(x.id))
	setEstimateHeader(&ctx.Response.Header, &x.est) // the upstream's headers replaced it
	setCappedHeader(&ctx.Response.Header, x)
	setWaitHeader(&ctx.Response.Header, x.m) // likewise
	for _, w := range x.m.Warnings() {
		ctx.Response.Header.Add("x-llmguard-budget-warning", w)
	}
	status := resp.StatusCode()
	if x.kind.Weighed() || x.kind == weigher.KindUnmetered {
		// A free endpoint (models, moderations, count_tokens) and a read
		// (GET, HEAD…: weigher.Classify makes every one KindOther) spend
		// nothing: a cost header on one is not a bill, and nothing is held
		// for it (meter's unmeteredHoldMicroUSD).
		x.billed = reportedCost(&resp.Header)
	}
	if status == fasthttp.StatusTooManyRequests {
		// The upstream's limit refused the call: its rate-limit fields
		// say when it has room, not llmguard's
		// (TestAdv44UpstreamRateLimitFieldsPassOnIts429).
		setUpstreamRefusalHeaders(&ctx.Response.Header, x.rules(), x.live.ietf)
	} else {
		setLimitHeaders(&ctx.Response.Header, x.upstream.Flavor, x.rules(), x.live.ietf)
	}
	setShadowHeaders(&ctx.Response.Header, x.m.Shadow())
	x.status = status

	if streamedAnswer(resp.Header.ContentType()) && resp.BodyStream() != nil {
		p.count(x, x.m.Outcome(status), "")
		x.upstream.series.Record(status, x.upstreamTime)
		ctx.Response.Header.SetContentLength(-1)
		conn := ctx.Conn() // serves this response until the writer returns
		enc := string(bytes.ToLower(bytes.TrimSpace(resp.Header.ContentEncoding())))
		// Decoded or relayed as sent is decided here, before the headers
		// go out (fasthttp writes them once the handler returns): a
		// stream the upstream compressed although llmguard asked for
		// identity is relayed decoded, without its Content-Encoding, so
		// that the tap can read it; one llmguard cannot decode is relayed
		// as sent, with it, so that its client can.
		src := p.openStream(x, resp.BodyStream(), conn, enc)
		if src.opaque {
			x.stripUsage = false // opaque bytes: relay them untouched
		} else if enc != "" {
			ctx.Response.Header.Del("Content-Encoding") // decoded, or identity
		}
		x.held = nil // the stream writer owns resp and src now
		x.streaming = true
		if x.obs != nil {
			x.obs.overhead = overheadOf(x, monoclock.Now())
		}
		// On a kept goroutine (stackPool): fasthttp's own is new per stream.
		// resp first: NewStreamReader starts the writer at once. The writer
		// never reads body, which fasthttp reads once the handler returns.
		x.relayed.resp = resp
		x.relayed.body = fasthttp.NewStreamReader(x.writeStream)
		ctx.Response.SetBodyStream((*clientBody)(x), -1)
		return nil
	}

	st := resp.BodyStream()
	if st == nil { // fasthttp read it whole
		x.upstream.series.Record(status, x.upstreamTime)
		ctx.Response.SetBody(resp.Body())
		x.held = nil
		fasthttp.ReleaseResponse(resp)
		p.finish(ctx, x, status)
		return nil
	}
	t0 := monoclock.Now()
	// Held until fasthttp has written the answer (heldAnswer.Close), or
	// until an error path below gives it back first.
	x.answer.p = p
	ctx.SetUserValue(answerKey{}, &x.answer)
	// A JSON answer of no declared length ends after its value and a
	// grace of silence, whether or not its upstream ends it (answerend.go).
	var end answerEnd
	end.on(st, resp.Header.ContentType(), resp.Header.ContentLength(), p.streamEndGrace())
	full, err := x.answer.readFrom(st, p.opt.MaxResponseBytes+1, resp.Header.ContentLength(), &end)
	body := x.answer.buf
	x.upstreamTime += monoclock.Since(t0)
	x.upstream.series.Record(status, x.upstreamTime)
	if err != nil {
		end.stop()
		x.held = nil
		resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
		p.log.Warn("upstream body read failed", "upstream", x.upstream.Name, "err", err, "request_id", x.id)
		// The upstream may have billed an answer it failed to deliver:
		// keep the reservation unless it was an error status, and charge
		// the output text that did come when it is more (lostAnswer).
		x.settle(p.lostAnswer(x, status, ctx.Response.Header.ContentEncoding(), body))
		x.answer.release()
		ctx.Response.Header.Del("Content-Encoding")
		ctx.Response.ResetBody()
		return &refusal{err: apiError{status: fasthttp.StatusBadGateway, openAIType: "api_error", openAICode: "upstream_error",
			anthropicType: "api_error", message: "llmguard lost the upstream response (" + x.upstream.Name + ")."}, outcome: meter.OutcomeUpstreamError}
	}
	if full || len(body) > p.opt.MaxResponseBytes {
		// No room to hold it, or too large to hold for its usage: stream
		// it through, what was read first, and keep the reservation (a
		// refund here would let a caller who asks for a huge answer pay
		// nothing, or one who fills the budget pay less than billed). The
		// bytes read first stay held until the answer is written.
		if full {
			p.unread(x, unreadBudget)
		} else {
			p.unread(x, unreadTooLarge)
		}
		x.held = nil // fasthttp closes the body stream, which releases resp
		// The rest is followed on from where end stopped; ub stops it.
		ub := &upstreamBody{head: body, rest: st, end: end, resp: resp}
		if rc, ok := st.(fasthttp.ReadCloserWithError); ok && ctx.Conn() != nil {
			// fasthttp notices a client that left only at its next write,
			// which an upstream stalled mid-body never allows: watch the
			// client as a stream does, and cut the upstream when it has
			// left, so that the bytes read first come back.
			ub.watch = &p.watch
			p.watch.addAnswer(p, &ub.cut, x, ctx.Conn(), rc)
		}
		if countsPassing(x, ctx.Response.Header.ContentEncoding()) {
			// Counted as it passes, and settled when it has (passingCount):
			// the stream's way, its observation ended then too.
			ub.count = newPassingCount(p, x, status)
			x.streaming = true
			if x.obs != nil {
				x.obs.overhead = overheadOf(x, monoclock.Now())
			}
		} else {
			x.settle(unreadSettlement(x, status, !full))
		}
		ctx.Response.SetBodyStream(ub, -1)
		p.count(x, x.m.Outcome(status), "")
		return nil
	}
	end.stop() // before the body is closed
	x.held = nil
	resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
	ctx.Response.SetBodyRaw(body) // written from x.answer's buffer, given back once written
	p.finish(ctx, x, status)
	return nil
}

// reportedCost is what h, an upstream's answer header, says the request
// was charged, in micro-USD (weigher.HeaderCostMicroUSD): the largest
// figure of its weigher.CostHeader fields, the name in any letter case
// (the upstream client keeps names as sent); 0 when there is none.
// LiteLLM sends the field on every answer it prices; it is read from
// any upstream that sends it, since it can only raise a charge
// (meter.Settlement.BilledMicroUSD): a provider that does not know it
// does not send it. It is read on the calls that may spend, weighed and
// unmetered endpoints (not a read, GET, HEAD…, of an unmetered one), and
// charged at most the request's cost ceiling (meter's costCeiling,
// reported_cost_ceiling_usd).
func reportedCost(h *fasthttp.ResponseHeader) int64 {
	var billed int64
	for k, v := range h.All() {
		if len(k) == len(weigher.CostHeader) && (k[0]|0x20) == 'x' && bytes.EqualFold(k, []byte(weigher.CostHeader)) {
			billed = max(billed, weigher.HeaderCostMicroUSD(v))
		}
	}
	return billed
}

// lostAnswer is the settlement of x's held answer of status whose body
// broke off (a Content-Length longer than what came, a chunked body
// without its last chunk, a reset): its reservation, refunded for an error
// status (meter.SourceOf), as before; but for a weighed answer of a
// reserved status whose body, decoded as far as it goes when coded
// (encoding; tapView, its copy taken from the answer budget until this
// returns), shows more than the request reserved (Weigher.CutAnswerUsage:
// more output text, or a usage written before the break reporting more
// input or output), the larger of each (exchange.cutSettlement): the
// upstream generated what it sent before the break and bills it. Settled
// at the reservation, a 3,000-word answer cut before its usage was charged
// the 256-token default (TestAdv29CutAnswerChargesItsText), and so was a
// coded one until adv30 (TestAdv30CodedCutAnswerChargesItsText).
func (p *Proxy) lostAnswer(x *exchange, status int, encoding, body []byte) meter.Settlement {
	s := meter.Settlement{Source: meter.SourceOf(status)}
	if s.Source != spec.SourceReserved || !x.kind.Weighed() {
		return s
	}
	view := heldAnswer{p: p}
	defer view.release()
	if body, _ = tapView(encoding, body, p.opt.MaxResponseBytes, &view); len(body) == 0 {
		return s
	}
	if c, ok := x.cutSettlement(x.live.weigher.CutAnswerUsage(x.kind, body, x.est.Model)); ok {
		s = c
	}
	return s
}

// cutSettlement is the settlement of x's answer when seen, what its body
// shows it cost (its output text, and a usage's input when a cut body
// held one: Weigher.CutAnswerUsage), is more than x reserved in input or
// output: each the larger of the reservation's and seen's, counted
// (spec.SourceCounted), the reserved web searches kept; ok false, and the
// reservation stands, otherwise. A usage written before a cut reporting
// 50,000 input tokens for a 9-token estimate was settled at the estimate
// (TestAdv30CutAnswerUsageInputCounts).
//
// A tier the body names (seen.ServiceTier) goes with it, so that the
// meter charges the dearer of it and the tier asked; a body that names
// one shows what it cost even when its tokens are within the reservation.
func (x *exchange) cutSettlement(seen spec.Usage) (meter.Settlement, bool) {
	if seen.InputTokens <= x.est.InputTokens && seen.OutputTokens <= x.est.OutputTokens && seen.ServiceTier == "" {
		return meter.Settlement{}, false
	}
	return meter.Settlement{Source: spec.SourceCounted, Usage: spec.Usage{
		InputTokens:  max(x.est.InputTokens, seen.InputTokens),
		OutputTokens: max(x.est.OutputTokens, seen.OutputTokens),
		WebSearches:  x.est.WebSearches, ServiceTier: seen.ServiceTier}}, true
}

// readChunk is the size of the pooled buffers upstream bodies are read
// through, in bytes.
const readChunk = 16 << 10

// chunks are readChunk-byte buffers, shared by held answers (the first
// buffer of each: heldAnswer) and stream.
var chunks = sync.Pool{New: func() any { return new([readChunk]byte) }}

// dropAnswer discards the upstream's answer resp, which llmguard replaces
// with a 502 of its own: it releases resp, records the upstream's status
// in its series and sets x's status to 502. It returns the upstream's
// status.
func dropAnswer(x *exchange, resp *fasthttp.Response) int {
	status := resp.StatusCode()
	x.held = nil
	resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
	x.status = fasthttp.StatusBadGateway
	x.upstream.series.Record(status, x.upstreamTime)
	return status
}

// gatewayCredentialRefused answers an upstream 401 or 403 to a request that
// carried llmguard's own upstream credential: the upstream refused the
// gateway, not the caller, and its body may quote part of that credential
// (OpenAI's 401 names the key it refused, masked). The caller gets
// llmguard's own error in its flavor's shape, 502 with x-should-retry:
// false (retrying cannot fix the gateway's key); the operator gets a log
// line; nothing of the upstream's body or headers is passed on. The
// reservation is refunded, as for any upstream error.
func (p *Proxy) gatewayCredentialRefused(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response) *refusal {
	status := dropAnswer(x, resp)
	p.log.Error("the upstream rejected llmguard's upstream credential: check the upstream's api_key_env",
		"upstream", x.upstream.Name, "status", status, "request_id", x.id)
	x.settle(meter.Settlement{Source: spec.SourceRefund})
	setLimitHeaders(&ctx.Response.Header, x.upstream.Flavor, x.rules(), x.live.ietf)
	ctx.Response.Header.Set("x-should-retry", "false")
	return &refusal{err: errGatewayCredential, outcome: meter.OutcomeUpstreamError}
}

// informationalRefused answers an upstream that gave an informational
// status (1xx) as its final answer: fasthttp's client reads past 100 and
// the other interim answers (at most 100 of them) but hands on 101
// Switching Protocols, which no LLM API sends to a POST. Relayed, it left
// the caller waiting for a final answer that never came. The caller gets
// llmguard's own 502 upstream_error; the reservation stands (the upstream
// read the request and may have billed it), as when an answer is lost.
func (p *Proxy) informationalRefused(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response) *refusal {
	status := dropAnswer(x, resp)
	p.log.Warn("the upstream answered with an informational status in place of a final answer", "upstream", x.upstream.Name, "status", status, "request_id", x.id)
	x.settle(meter.Settlement{Source: spec.SourceReserved})
	setLimitHeaders(&ctx.Response.Header, x.upstream.Flavor, x.rules(), x.live.ietf)
	return &refusal{err: apiError{status: fasthttp.StatusBadGateway, openAIType: "api_error", openAICode: "upstream_error",
		anthropicType: "api_error", message: "llmguard got no final answer from the upstream (" + x.upstream.Name + "): it answered " + strconv.Itoa(status) + "."}, outcome: meter.OutcomeUpstreamError}
}

// finish reads the usage of a buffered response and settles the exchange.
// The body is decoded once (readable); a stream request's body that is an
// SSE stream is settled as one (settleHeldStream), any other is read for
// its usage.
func (p *Proxy) finish(ctx *fasthttp.RequestCtx, x *exchange, status int) {
	s := meter.Settlement{Source: meter.SourceOf(status)}
	if x.kind.Weighed() {
		view := heldAnswer{p: p}
		defer view.release() // a panic while parsing gives the copy back too
		b := p.readable(x, ctx.Response.Header.ContentEncoding(), ctx.Response.Body(), &view)
		if x.est.Stream && sseBody(b) {
			p.settleHeldStream(x, b, status)
			view.release()
			p.count(x, x.m.Outcome(status), "")
			return
		}
		u, ok, seen := p.usageOf(x, b, s.Source == spec.SourceReserved)
		if !ok && s.Source == spec.SourceRefund && len(b) > 0 {
			// An answer under an error status (400 and above) that
			// carries output (a chat choice's content, a Messages
			// text block…) but no usage: a gateway relaying the
			// provider's answer under its own status, or a lenient
			// upstream's. The provider generated it and bills it as
			// under 200, so it is settled as a 2xx answer is (the
			// reservation, or its text when more), as a stream of such
			// a status that carried output is (settleStream). A
			// 2,000-word answer under 500 was refunded
			// (TestAdv44ErrorStatusAnswerWithTextIsCharged). An error
			// body ({"error":…}) carries no output: refunded, as before.
			if n := x.live.weigher.AnswerOutputTokens(x.kind, b, x.est.Model); n > 0 {
				s.Source = spec.SourceReserved
				seen = weigher.Usage{OutputTokens: n, ServiceTier: weigher.AnswerServedTier(b)}
			}
		}
		view.release()
		if ok {
			s = meter.Settlement{Source: spec.SourceReported, Usage: u}
		} else if c, more := x.cutSettlement(seen); more {
			// No usage, but more output text than the request reserved
			// (a default reservation, a maximum the upstream ignored), or
			// a cut answer's usage that says more: the upstream generated
			// it, so it is charged, as a stream without usage is charged
			// its text.
			s = c
		}
	}
	p.count(x, x.m.Outcome(status), "")
	x.settle(s)
}

// settleHeldStream settles x, a request that asked to stream, from b, its
// held answer body as read (readable), an SSE stream its upstream did not
// label text/event-stream (application/json, text/plain, none: the OpenAI
// and Anthropic SDKs read a stream request's body as SSE whatever its
// label, so it reached the caller whole once it ended): read through a
// usage tap as a relayed stream is, and settled as one (settleStream), at
// least the output reservation when it ended without its terminal event.
// Such a body was taken for a JSON answer without usage and settled at the
// reservation: 256 output tokens for a usage of 6,000 (adv26's lead,
// TestAdv26StreamLabelledJSONIsRead). The usage-only chunk llmguard asked
// for on the client's behalf (stream_options.include_usage) is not dropped
// from such a body.
func (p *Proxy) settleHeldStream(x *exchange, b []byte, status int) {
	wg, model := x.live.weigher, x.est.Model
	tap := newUsageTap(wg.NewStream(x.kind), false, expectsUsage(x), func(text string) int64 { return wg.CountText(model, text) })
	mem := decoderMemory{p: p}
	defer mem.release()
	feedHeld(&tap, b, &mem)
	p.settleStream(x, &tap, status)
}

// feedHeld feeds tap the held stream body b as a relayed stream is fed,
// readChunk bytes at a time, with the scanner's buffers for an event past
// tapEventFree taken from mem (usageTap.bound), which the caller releases
// once the tap is settled. Fed whole and without mem, an unfinished event
// (a body cut mid-event, or one never ended) of up to
// sse.DefaultMaxEventBytes was copied into the scanner's buffer outside
// max_inflight_response_bytes before bound could look at it.
func feedHeld(tap *usageTap, b []byte, mem *decoderMemory) {
	tap.mem = mem
	for len(b) > 0 {
		n := min(len(b), readChunk)
		tap.feed(b[:n])
		b = b[n:]
	}
}

// sseBody reports whether b, an answer body, starts as an SSE stream does:
// after optional whitespace (and a UTF-8 byte order mark, which the SSE
// parsing rules skip: WHATWG HTML §9.2.6), a line of one of the fields the
// format defines (data, event, id, retry) or a comment (":"); or a line
// of a field it does not define ("name: value", a name of letters, digits
// and "-_." — the parsing rules ignore such a field, so a stream may open
// with one) in a body that has a data line further on (sseDataLine). Text
// whose first line merely looks like "name: value" without data lines (a
// plain-text error) is not a stream; JSON never is.
func sseBody(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] == ':' {
		return true
	}
	for _, f := range [...]string{"data", "event", "id", "retry"} {
		if len(b) > len(f) && string(b[:len(f)]) == f && (b[len(f)] == ':' || b[len(f)] == '\n' || b[len(f)] == '\r') {
			return true
		}
	}
	name := 0
	for name < len(b) && fieldNameByte(b[name]) {
		name++
	}
	return name > 0 && name < len(b) && b[name] == ':' && sseDataLine(b[name:])
}

// fieldNameByte reports whether c may be part of an SSE field name sseBody
// takes for one it does not know: an ASCII letter, digit, '-', '_' or '.'.
func fieldNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// sseDataLine reports whether b holds a line, after its first, that is a
// data field ("data:…", or "data" alone) as the SSE parsing rules split
// lines (LF, CR or CRLF).
func sseDataLine(b []byte) bool {
	for {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			return false
		}
		b = b[i+1:]
		if rest, ok := bytes.CutPrefix(b, []byte("data")); ok && (len(rest) == 0 || rest[0] == ':' || rest[0] == '\r' || rest[0] == '\n') {
			return true
		}
	}
}

// readable is x's answer body as llmguard reads it: body itself when
// uncoded (encoding), else its decoded copy (tapView) read into view,
// taken from the answer budget until the caller releases view; nil, its
// reason counted unread, when it cannot be decoded; its decoded prefix,
// counted unread too, when its coded data breaks off part way (a cut
// answer, whose text usageOf then counts).
func (p *Proxy) readable(x *exchange, encoding, body []byte, view *heldAnswer) []byte {
	if uncoded(encoding) {
		return body
	}
	b, why := tapView(encoding, body, p.opt.MaxResponseBytes, view)
	if why != "" {
		p.unread(x, why)
	}
	return b
}

// usageOf reads the usage of x's answer body b (as readable gives it).
// When it finds no usage and text is set, seen is what the answer shows
// it cost, in tokens: the output text it carries
// (Weigher.AnswerOutputTokens), or for a body cut short, its whole text
// and the input of a usage written before the cut (Weigher.CutAnswerUsage:
// an HTTP/1.0 or close-delimited answer whose upstream closed early reads
// as a whole answer at the transport); else zero. Either way seen
// carries the service tier the body names (weigher.AnswerServedTier).
func (p *Proxy) usageOf(x *exchange, b []byte, text bool) (u weigher.Usage, ok bool, seen weigher.Usage) {
	u, ok = x.live.weigher.ParseUsage(x.kind, b, &x.est)
	if !ok && text && len(b) > 0 {
		seen.OutputTokens = x.live.weigher.AnswerOutputTokens(x.kind, b, x.est.Model)
		if seen.OutputTokens > 0 {
			seen.ServiceTier = weigher.AnswerServedTier(b)
		} else {
			seen = x.live.weigher.CutAnswerUsage(x.kind, b, x.est.Model)
		}
	}
	return u, ok, seen
}

// streamedAnswer reports whether an upstream answer of Content-Type ct (as
// fasthttp gives it: "text/plain; charset=utf-8" when the upstream sent
// none) is relayed and read as a stream: a media type of text/event-stream
// in any case (RFC 9110 §8.3.1: case-insensitive). Any other answer is held
// and read whole, a stream request's included: the SDKs read a stream
// request's body as SSE whatever its label, and finish reads a held body
// that is SSE as a stream (settleHeldStream) and one that is JSON as JSON
// (an upstream that ignores "stream"). Relaying every such answer to a
// stream request as a stream (adv26) settled an unlabelled JSON answer at
// the reservation: 256 output tokens for a usage of 6,000 (review,
// TestReviewStreamRequestJSONAnswerUnlabelled). A stream sent without its
// label reaches the caller whole, once it ends, rather than event by event.
func streamedAnswer(ct []byte) bool {
	const sse = "text/event-stream"
	ct = bytes.TrimSpace(ct)
	return len(ct) >= len(sse) && bytes.EqualFold(ct[:len(sse)], []byte(sse))
}

// uncoded reports whether a Content-Encoding value names no coding.
func uncoded(encoding []byte) bool {
	enc := bytes.TrimSpace(encoding)
	return len(enc) == 0 || bytes.EqualFold(enc, []byte("identity"))
}

// upstreamBody relays an upstream body, the bytes read first (head) then
// the rest, and releases the response when fasthttp closes it; watch, when
// set, watches its client (clientWatch, cut its flag) until then, and end
// follows the rest of a JSON answer from where the read of head left it
// (answerEnd), stopped then too. count, when set, counts every byte
// relayed and settles the exchange when the body ends (before fasthttp
// writes its end, so that a client that has read it all finds it settled)
// or is closed.
type upstreamBody struct {
	head  []byte
	rest  io.Reader
	end   answerEnd
	resp  *fasthttp.Response
	watch *clientWatch
	cut   watchFlag
	count *passingCount
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.count.see(b.head[:n])
		b.head = b.head[n:]
		return n, nil
	}
	n, err := b.rest.Read(p)
	b.end.saw(p[:n])
	if err != nil && err != io.EOF && b.end.ended() {
		err = io.EOF // the answer had ended: its upstream's silence after it is no break
	}
	b.count.see(p[:n])
	if err == io.EOF {
		b.count.settle(true)
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	b.count.settle(false) // a body cut short (a no-op after its end)
	if b.watch != nil {
		b.watch.remove(&b.cut)
		b.watch = nil
	}
	b.end.stop()
	err := b.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(b.resp)
	return err
}

// tapView returns body decoded for the usage tap when the upstream
// compressed it although llmguard asked for identity; the client still
// receives the bytes as sent. The decoded copy is read into into, whose
// bytes are taken from the answer budget as it grows (the caller gives them
// back with into.release once the usage is read), as is a zstd or Brotli
// decoder's window while it decodes (see decoder: each stage's of a stack
// of codings); decoding stops at limit bytes (a compressed answer must not
// expand without bound). An encoding it does not decode (a stack deeper
// than maxStackedCodings among them), a broken one, a zstd window over answerWindowMax, or no room
// in the budget gives nil, and unread says why (an unread reason): no usage
// is read and the reservation stands. A body whose coded data breaks off
// or goes wrong after it decoded to something (an upstream that closed
// part way through its answer) gives what it decoded to, its decoded
// prefix, with unread undecodable: the caller reads a cut answer's text
// from it (Weigher.CutAnswerUsage), as from an uncoded cut body.
// Before, that prefix was dropped, and a 4,000-word gzip answer cut at two
// thirds of its bytes was charged the 256-token default reservation
// (TestAdv30CodedCutAnswerChargesItsText).
func tapView(encoding, body []byte, limit int, into *heldAnswer) (view []byte, unread string) {
	if uncoded(encoding) {
		return body, ""
	}
	enc := string(bytes.ToLower(bytes.TrimSpace(encoding)))
	mem := decoderMemory{p: into.p}
	defer mem.release()
	r, err := decoder(enc, bytes.NewReader(body), &mem)
	if err != nil {
		return nil, undecodedReason(err)
	}
	full, err := into.readFrom(r, limit, -1, nil)
	if full {
		return nil, unreadDecodeBudget
	}
	if err != nil {
		if len(into.buf) == 0 {
			return nil, unreadUndecodable
		}
		return into.buf, unreadUndecodable
	}
	return into.buf, ""
}

// undecodedReason is the unread reason of an answer relayed as sent
// because decoder refused it with err.
func undecodedReason(err error) string {
	switch {
	case errors.Is(err, errWindowBudget):
		return unreadDecodeBudget
	case errors.Is(err, errWindowTooLarge):
		return unreadWindow
	}
	return unreadUndecodable
}

// maxStackedCodings is the most content codings an answer may be sent in
// for llmguard to decode it (identity not counted): three. A CDN that
// compresses an answer its server compressed already sends two ("gzip,
// br"); a longer stack is relayed as sent, unread. Each stage holds a
// decoder (gzip's and deflate's 32 KiB window, RFC 1951 §2; a Brotli or
// zstd window from the budget), so the stack's depth is bounded.
const maxStackedCodings = 3

// decoder reads r, sent in the content codings enc lists (lowercase, comma
// separated, in the order they were applied: RFC 9110 §8.4), undoing them
// in reverse order, the last applied first, each with decodeOne and each
// decoder's memory (a Brotli or zstd window) taken from the answer budget
// through the one mem. Empty list elements (RFC 9110 §5.6.1) and identity
// are skipped (a list of nothing else reads r as it is). Errors: more than
// maxStackedCodings codings; decodeOne's, for the first coding it cannot read (an
// unknown coding, a stage whose data does not start as its coding says,
// no room in the budget), after which mem holds nothing.
func decoder(enc string, r io.Reader, mem *decoderMemory) (io.Reader, error) {
	if !strings.Contains(enc, ",") {
		return decodeOne(strings.TrimSpace(enc), r, mem)
	}
	var stack [maxStackedCodings]string
	n := 0
	for rest := enc; rest != ""; {
		c, after, _ := strings.Cut(rest, ",")
		rest = after
		c = strings.Trim(c, " \t")
		if c == "" || c == "identity" {
			continue
		}
		if n == maxStackedCodings {
			return nil, errTooManyCodings
		}
		stack[n] = c
		n++
	}
	for i := n - 1; i >= 0; i-- {
		d, err := decodeOne(stack[i], r, mem)
		if err != nil {
			mem.release() // an earlier stage's window too: none is read now
			return nil, err
		}
		r = d
	}
	return r, nil
}

// errTooManyCodings: an answer's Content-Encoding lists more codings than
// maxStackedCodings; it is relayed as sent, unread.
var errTooManyCodings = errors.New("proxy: content codings stacked deeper than llmguard decodes")

// decodeOne reads the content coding enc of r (RFC 9110 §8.4.1: gzip,
// deflate meaning zlib, and zstd). A zstd decoder allocates the window its
// first frame's header asks for: that header is read first, and the window
// (with the decoder's state, contentcoding.ZstdStateBytes) taken from the
// answer budget through mem before the decoder exists, to be given back
// with mem.release once decoding is over; a later frame asking for a larger
// window is a read error. Errors: an unknown coding; a stream that does not
// start as its coding says (for zstd, with a skippable frame, or cut within
// its first frame's header); a zstd window over answerWindowMax
// (errWindowTooLarge); no room in the budget for the window
// (errWindowBudget).
func decodeOne(enc string, r io.Reader, mem *decoderMemory) (io.Reader, error) {
	switch enc {
	case "", "identity":
		return r, nil
	case "gzip", "x-gzip":
		return gzip.NewReader(r)
	case "deflate":
		// Raw deflate data without the zlib wrapper, which some servers
		// send and clients read (urllib3 and undici fall back to it), is
		// read too, as a request body's is (contentcoding.Deflate).
		br := bufio.NewReaderSize(r, 32)
		if h, err := br.Peek(2); err == nil && !zlibHeader(h) {
			return flate.NewReader(br), nil
		}
		return zlib.NewReader(br)
	case "br":
		// Brotli (RFC 7932), which httpx, undici and browsers decode: an
		// upstream may send it whatever llmguard asked for. Its window
		// (at most 16 MiB, read from the stream's first bytes) and state
		// are taken from the answer budget first, as a zstd window is.
		br := bufio.NewReaderSize(r, 32)
		h, err := br.Peek(2) // the window is in the first one or two bytes
		if len(h) == 0 {
			return nil, err
		}
		window, ok := contentcoding.BrotliWindow(h)
		if !ok {
			return nil, errors.New("proxy: brotli stream with a large window or none")
		}
		if !mem.take(int64(window) + contentcoding.BrotliStateBytes) {
			return nil, errWindowBudget
		}
		// Brotli has no magic number to check: its first output is read
		// now, so that data that is not Brotli is relayed as sent (the
		// bytes read kept by the caller's headRecorder), not decoded into
		// an error after the Content-Encoding was dropped.
		// That first output must come within brotliFirstInput bytes: the
		// caller keeps every byte read until then (openStream's
		// headRecorder), and a stream may hold any number of metadata
		// blocks, which decode to nothing.
		in := &firstInput{r: br, left: brotliFirstInput}
		d := brotli.NewReader(in)
		var first [1]byte
		n, err := d.Read(first[:])
		if err != nil && err != io.EOF {
			mem.release()
			return nil, err
		}
		in.left = -1
		return io.MultiReader(bytes.NewReader(first[:n]), d), nil
	case "zstd":
		br := bufio.NewReaderSize(r, 32) // holds a frame header (at most 18 bytes)
		window, err := zstdWindowOf(br)
		if errors.Is(err, contentcoding.ErrTooLarge) || (err == nil && window > answerWindowMax) {
			return nil, errWindowTooLarge // (ErrTooLarge: over 16 MiB)
		}
		if err != nil {
			return nil, err
		}
		if !mem.take(int64(window) + contentcoding.ZstdStateBytes) {
			return nil, errWindowBudget
		}
		d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(uint64(window)), zstd.WithDecoderMaxMemory(64<<20))
		if err != nil {
			mem.release()
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return nil, fmt.Errorf("proxy: content coding %q is not decoded", enc)
}

// brotliFirstInput is the most bytes of a Brotli answer, 1 MiB, read
// before its first output byte: an encoder's first meta-block gives output
// within its header and prefix codes (a few KiB), and flushes add empty
// metadata blocks of a byte or two; more is a stream of metadata alone.
const brotliFirstInput = 1 << 20

// errBrotliNoOutput: a Brotli answer gave no output within its first
// brotliFirstInput bytes.
var errBrotliNoOutput = errors.New("proxy: brotli stream without output in its first 1 MiB")

// firstInput reads r, at most left bytes while left is not negative; past
// them it fails with errBrotliNoOutput. Set left to -1 to lift the limit.
type firstInput struct {
	r    io.Reader
	left int
}

func (f *firstInput) Read(p []byte) (int, error) {
	if f.left < 0 {
		return f.r.Read(p)
	}
	if f.left == 0 {
		return 0, errBrotliNoOutput
	}
	if len(p) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= n
	return n, err
}

// zlibHeader reports whether h, a deflate coding's first two bytes, is a
// zlib header (RFC 1950 §2.2: method 8, a window of at most 32 KiB, and
// the two bytes a multiple of 31); raw deflate data is read otherwise.
func zlibHeader(h []byte) bool {
	return h[0]&0x0f == 8 && h[0]>>4 <= 7 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0
}

// answerWindowMax is the largest zstd window, in bytes, an upstream answer
// is decoded with: 8 MiB, the most RFC 9659 §3 lets a zstd content coding
// ask for (encoders "MUST NOT generate frames requiring a Window_Size
// larger than 8 MB"; it updates RFC 8878). An answer asking for more is
// relayed as sent, its usage not read.
const answerWindowMax = 8 << 20

// errWindowBudget: the answer budget had no room for a zstd decoder's
// window; the answer is relayed as sent, unread (unreadDecodeBudget).
var errWindowBudget = errors.New("proxy: no room in max_inflight_response_bytes for the zstd window")

// errWindowTooLarge: a zstd answer asks for a window over answerWindowMax;
// it is relayed as sent, unread (unreadWindow).
var errWindowTooLarge = errors.New("proxy: zstd window over the 8 MiB RFC 9659 allows")

// zstdWindowOf reads, without consuming it, the header of the zstd frame br
// starts with (RFC 8878 §3.1.1.1: magic, descriptor, then the window
// descriptor, dictionary id and content size the descriptor announces) and
// returns the window it asks for (contentcoding.ZstdWindow). Errors: br's
// read error, or contentcoding's for a header that is not a frame's.
func zstdWindowOf(br *bufio.Reader) (int, error) {
	h, err := br.Peek(6) // the shortest header: magic, descriptor, one byte
	if err != nil {
		return 0, err
	}
	fhd := h[4]
	n := 5 + [4]int{0, 1, 2, 4}[fhd&3] + [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd&(1<<5) == 0 {
		n++ // a window descriptor
	} else if fhd>>6 == 0 {
		n++ // a single-segment frame's one-byte content size
	}
	if h, err = br.Peek(n); err != nil {
		return 0, err
	}
	return contentcoding.ZstdWindow(h)
}

// decoderMemory is the memory an answer's decoder holds of the answer
// budget (a zstd decoder's window and state), in bytes, for as long as it
// decodes. The zero value with p set holds nothing. Not safe for
// concurrent use.
type decoderMemory struct {
	p *Proxy
	n int64
}

// take takes n more bytes from the budget if they are free, without
// waiting; a refusal changes nothing.
func (d *decoderMemory) take(n int64) bool {
	if !d.p.answers.take(n) {
		return false
	}
	d.p.opt.Metrics.ResponseBytesHeld(n)
	d.n += n
	return true
}

// release gives everything d holds back; the decoder may not be read
// after.
func (d *decoderMemory) release() {
	if d.n > 0 {
		d.p.answers.give(d.n)
		d.p.opt.Metrics.ResponseBytesHeld(-d.n)
		d.n = 0
	}
}

// stream relays an SSE body event by event, flushing after every upstream
// read so the first event reaches the client before the upstream finishes.
// It runs after the handler returned, on fasthttp's writer goroutine.
func (p *Proxy) stream(w *bufio.Writer, x *exchange, resp *fasthttp.Response, s *streamSource) {
	if x.obs != nil {
		defer p.settled(x, x.status) // last: after the settlement, whichever way the stream ends
	}
	defer fasthttp.ReleaseResponse(resp)
	raw := resp.BodyStream()
	// The decoder's window and the tap's large events are held of the
	// answer budget while the stream lasts, and the client watched: given
	// back, and the watch ended, after the last read (deferred before the
	// recovery below, so run after it).
	defer s.close()
	src, opaque, mem := s.r, s.opaque, &s.mem
	watcherCut := &s.cut
	wg, model := x.live.weigher, x.est.Model
	tap := newUsageTap(wg.NewStream(x.kind), x.stripUsage, expectsUsage(x), func(text string) int64 { return wg.CountText(model, text) })
	// Bytes relayed without being read (a coding llmguard does not decode:
	// br, "gzip, gzip", one whose header is broken) may carry any output:
	// the stream keeps its output reservation, as for an event too large
	// to read.
	tap.unread = opaque
	tap.mem = mem                          // an event's buffers past tapEventFree, released with the decoder's window
	out := chunks.Get().(*[readChunk]byte) // what the tap sends, while it fits
	defer chunks.Put(out)                  // the last thing the stream does
	tap.out = out[:0]
	defer func() {
		if r := recover(); r != nil {
			// End the stream as broken (the client sees a cut, not a clean
			// end), free the upstream connection, and charge as for a
			// client that left: the usage if it came, else at least the
			// output reservation.
			p.panicked(meter.StageStream, r, x)
			if rc, ok := raw.(fasthttp.ReadCloserWithError); ok {
				rc.CloseWithError(errPanicked)
			}
			tap.cut = true
			p.contain(meter.StageSettle, x, func() { p.settleStream(x, &tap, resp.StatusCode()) })
			// Counting what was streamed failed too: the reservation stands
			// (a no-op when the settlement above went through).
			p.contain(meter.StageSettle, x, func() { x.settle(meter.Settlement{Source: spec.SourceReserved}) })
			s.broken = true // settled first: the client sees the cut (clientBody) after the charge
		}
	}()
	chunk := chunks.Get().(*[readChunk]byte)
	defer chunks.Put(chunk)
	buf := chunk[:]
	clientGone := false
	// broken: the upstream broke the stream off before its terminal event
	// (or a decoder failed): the client's body ends broken after the
	// settlement (clientBody), as it would from the upstream itself,
	// never as a clean end of a partial answer.
	broken := false
	var linger lingerCut // ends a stream whose upstream lingers after its terminal event
	defer linger.stop()
	for {
		p.inject(pointStream)
		n, rerr := src.Read(buf)
		if n > 0 {
			out := buf[:n]
			if !opaque {
				p.inject(pointTap)
				out = tap.feed(out)
			}
			if len(out) > 0 {
				if _, err := w.Write(out); err != nil || w.Flush() != nil {
					clientGone = true
				}
			}
			if tap.stream.Done() {
				linger.arm(raw, p.streamEndGrace())
			}
		}
		if watcherCut.Load() {
			clientGone = true
		}
		if rerr != nil && linger.fired() {
			rerr = io.EOF // the stream had ended: its upstream's silence after it is no break
		}
		if clientGone || rerr != nil {
			if rerr != nil && rerr != io.EOF && !clientGone {
				p.log.Warn("upstream stream ended with an error", "upstream", x.upstream.Name, "err", rerr, "request_id", x.id)
				// Decoding failed (a later zstd frame asking for a larger
				// window, corrupt data), or the upstream broke the stream
				// off (its connection closed mid-body: a gateway's read
				// timeout while a reasoning model thinks in silence): the
				// provider may have generated tokens the stream never
				// showed, so it is charged as one whose client left, at
				// least its output reservation. (A broken stream was
				// charged what it had shown: nothing, for a reasoning
				// model cut before its first word;
				// TestBrokenUpstreamStreamKeepsTheOutputReservation.)
				tap.unread = true
				broken = !tap.stream.Done()
			}
			break
		}
	}
	linger.stop() // before the body is closed or released below
	if clientGone {
		// Stop paying for an answer nobody reads: close the upstream
		// connection instead of draining it.
		if rc, ok := raw.(fasthttp.ReadCloserWithError); ok {
			rc.CloseWithError(errClientGone)
		}
		p.log.Info("client disconnected mid-stream", "request_id", x.id)
		if x.obs != nil {
			x.obs.clientGone = true
		}
		tap.cut = true
	} else {
		w.Write(tap.end())
		w.Flush()
		resp.CloseBodyStream()
	}
	p.settleStream(x, &tap, resp.StatusCode())
	s.broken = broken // settled first: the client sees the cut (clientBody) after the charge
}

// streamRelay is what a streamed answer's writer needs besides its
// exchange, its source (whose mem.p is the proxy) and the buffer fasthttp
// gives it: the upstream response (owned by the writer), and the client's
// body, what the writer writes (fasthttp.NewStreamReader's pipe), read by
// fasthttp through clientBody.
type streamRelay struct {
	resp *fasthttp.Response
	body io.ReadCloser
}

// errUpstreamBroke ends the body of a stream whose upstream broke it off
// before its terminal event: fasthttp then writes no last chunk and closes
// the connection, so the client reads an unfinished body.
var errUpstreamBroke = errors.New("proxy: the upstream broke the stream off")

// clientBody is the body fasthttp writes to a streamed answer's client:
// the exchange's relayed.body, ended by errUpstreamBroke rather than
// io.EOF when the stream writer set src.broken before it returned (the
// pipe's end orders that write before this read). A stream broken off
// upstream then reaches its client broken (curl: exit 18, "transfer closed
// with outstanding read data remaining"; the SDKs: a connection error), as
// from the upstream itself and as httputil.ReverseProxy aborts a body it
// cannot copy; everything written before the break is delivered first.
// Before, such a stream ended with the chunked coding's last chunk, and a
// client took the partial answer for a whole one (trial8). An exchange's
// own type, so that fasthttp is handed it without an allocation; read by
// fasthttp's goroutine alone.
type clientBody exchange

// Read reads what the stream writer wrote; at its end, io.EOF, or
// errUpstreamBroke when the stream was broken off upstream.
func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.relayed.body.Read(p)
	if err == io.EOF && b.src.broken {
		err = errUpstreamBroke
	}
	return n, err
}

// Close closes the pipe from the stream writer.
func (b *clientBody) Close() error { return b.relayed.body.Close() }

// writeStream is x's body stream writer: it hands the stream to a kept
// worker (stackPool) and returns when it has been relayed and settled.
func (x *exchange) writeStream(w *bufio.Writer) {
	x.src.mem.p.streams.runJob(x, w)
}

// runJob relays x's stream to w on a stream worker (a stackJob: an
// *exchange goes to the worker without a closure made for it).
func (x *exchange) runJob(w *bufio.Writer) {
	x.src.mem.p.stream(w, x, x.relayed.resp, &x.src)
}

// streamSource is what a stream is relayed from, decided before its
// response's headers go out (openStream) and owned by its stream writer
// after, which closes it once the stream has ended.
type streamSource struct {
	// r is what the stream writer reads: the upstream body decoded from its
	// coding, or as sent (the bytes a failed decoder read first, then the
	// rest).
	r io.Reader
	// mem is what the stream holds of the answer budget: a zstd decoder's
	// window, and the tap's buffers for a large event.
	mem decoderMemory
	// watch, while set, watches the client (clientWatch), which sets cut
	// when it cut the upstream because the client left.
	watch *clientWatch
	cut   watchFlag
	// opaque: r is in a coding llmguard does not read; the stream is
	// relayed as sent, with its Content-Encoding, unread.
	opaque bool
	// broken: set by the stream writer before it returns when the
	// upstream broke the stream off before its terminal event (or its
	// decoder failed, or the relay panicked): the client's body then ends
	// broken (clientBody).
	broken bool
}

// openStream starts watching the client of x's stream (conn; nil: none)
// and decides how raw, sent in the content codings enc lists (lowercase,
// trimmed: decoder),
// is relayed: decoded when decoder reads its coding's header, else as sent
// and counted unread with its reason (responses_unread_total). The header
// (gzip's 10 bytes, a zstd frame's) is read from the upstream here, on the
// handler's goroutine, so that the response's headers can say which; the
// client is watched meanwhile, so that an upstream that sends nothing after
// its headers is cut once the client has left (a client that leaves while
// the upstream is silent, thinking or queued, would be noticed only at the
// next write). The caller hands the result to stream, which closes it; a
// panic here closes it before it propagates.
func (p *Proxy) openStream(x *exchange, raw io.Reader, conn net.Conn, enc string) *streamSource {
	s := &x.src // in the exchange, which outlives the stream
	s.r, s.mem = raw, decoderMemory{p: p}
	if rc, ok := raw.(fasthttp.ReadCloserWithError); ok && conn != nil {
		s.watch = &p.watch
		p.watch.addAnswer(p, &s.cut, x, conn, rc)
	}
	if enc == "" {
		return s
	}
	opened := false
	defer func() {
		if !opened {
			s.close()
		}
	}()
	t0 := monoclock.Now()
	// The decoder reads the coding's header from raw: keep those bytes, so
	// that a stream it cannot decode is relayed whole.
	head := &headRecorder{r: raw}
	if d, err := decoder(enc, head, &s.mem); err == nil {
		s.r = d
	} else {
		s.r, s.opaque = io.MultiReader(bytes.NewReader(head.buf), raw), true
		if !s.cut.Load() { // not the client's departure
			p.unread(x, undecodedReason(err))
		}
	}
	head.buf, head.done = nil, true
	x.upstreamTime += monoclock.Since(t0)
	opened = true
	return s
}

// close ends the watch of the client and gives back what s holds of the
// answer budget; s's decoder may not be read after.
func (s *streamSource) close() {
	if s.watch != nil {
		s.watch.remove(&s.cut)
		s.watch = nil
	}
	s.mem.release()
}

// headRecorder reads r, keeping a copy of what it read until done is set:
// the bytes a decoder consumed while failing to read its header.
type headRecorder struct {
	r    io.Reader
	buf  []byte
	done bool
}

func (h *headRecorder) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if !h.done {
		h.buf = append(h.buf, p[:n]...)
	}
	return n, err
}

// expectsUsage reports whether x's stream will report its usage when it
// ends: Messages and Responses streams always do; chat and completions
// streams when the request asks for include_usage (the caller did, or the
// dialect added it: x.stripUsage).
func expectsUsage(x *exchange) bool {
	if !x.kind.Weighed() {
		return false
	}
	return !x.kind.StreamUsageOptIn() || x.est.IncludeUsage || x.stripUsage
}

// settleStream settles a streamed exchange from what its tap saw: the final
// usage when the upstream reported it; otherwise what it did report, the
// input estimate and the output streamed so far, counted locally (the
// client left, the stream broke or carried an error) — at least the output
// reservation when some of the output could not be read, or when a 2xx
// stream, or one of another status that carried output, ended without its
// kind's terminal event or an in-band error (the upstream broke it off); a
// refund for an in-band error before any output.
func (p *Proxy) settleStream(x *exchange, tap *usageTap, status int) {
	if !x.kind.Weighed() {
		x.settle(meter.Settlement{Source: meter.SourceOf(status)})
		return
	}
	if len(tap.sc.Buffered()) > 0 || x.kind.OutputUncountable() || x.est.Background {
		// An event the upstream never finished, or output that is not text
		// (images), or a background run, which goes on after its stream
		// ends: what was streamed is not what it costs.
		tap.unread = true
	}
	u, source := tap.settle(x.est)
	if source == spec.SourceReported {
		x.settle(meter.Settlement{Source: source, Usage: u})
		return
	}
	// Under a 3xx, 4xx or 5xx status a stream is an answer when it
	// carried output (text counted, or a usage reported): a gateway
	// relaying a provider's stream under its own status, or a status
	// rewritten on the way. The provider generated it and bills it as
	// under 200, so it is settled as a 2xx stream is. A stream of that
	// status without output (an error event, nothing at all) stays as
	// it was: no output charged beyond what it showed.
	answered := status >= 200 && status < 300 || u.OutputTokens > 0 || source == spec.SourcePartial
	if !tap.cut && answered && !tap.stream.Ended(x.est.Choices) && !tap.stream.Err() {
		// The stream ended, cleanly at the transport, without its kind's
		// terminal event ([DONE] or a finish_reason for each choice,
		// response.completed / .incomplete / .failed, message_stop) nor
		// an in-band error: the upstream's
		// connection closed early on a close-delimited answer (HTTP/1.0,
		// or HTTP/1.1 with neither Content-Length nor chunked coding), or
		// a gateway ended a chunked one properly mid-answer. Broken off as
		// one whose transport failed: at least the output reservation.
		// (Such a stream was charged what it had shown: nothing, before
		// its first word; TestUnendedStreamKeepsTheOutputReservation.)
		tap.unread = true
	}
	if tap.cut && source != spec.SourceRefund {
		// What was relayed is not what the upstream bills for a cut
		// answer: it generated tokens the stream never showed (a reasoning
		// model's hidden reasoning, thousands of tokens before the first
		// word; text in flight when it noticed the cut). Without a final
		// usage the output is charged at least its reservation, never the
		// few words the client saw. An in-band error with nothing streamed
		// before it stays refunded: the upstream ended the answer itself
		// (an SDK that reads the error chunk closes the connection before
		// the upstream's end is read).
		tap.unread = true
	}
	if x.est.HiddenReasoning && answered && source != spec.SourceRefund {
		// A request whose model may reason (weigher.Estimate.
		// HiddenReasoning), streamed without a usage: the reasoning
		// tokens it billed as output never appear in a stream (OpenAI's
		// chat chunks carry none; a Responses stream at most a summary),
		// so the text it showed is not what it cost. At least the output
		// reservation, as for output relayed unread (an answer to o3 of
		// 3 words was charged 10 tokens against 8,000 reserved:
		// TestAdv52HiddenReasoningStreamWithoutUsage).
		tap.unread = true
	}
	if tap.unread {
		// Output llmguard relayed but could not read (an event too large to
		// parse, never finished, not JSON, too deep, or naming a key twice)
		// may be any size: never charge less than the output reserved, and
		// never refund it.
		u.OutputTokens = max(u.OutputTokens, x.est.OutputTokens)
		if source == spec.SourceRefund {
			// The refund's empty usage dropped the searches: those run
			// inside the unread output are billed all the same, so the
			// reserved ones stand (as in Stream.Settle), or more reported.
			u.InputTokens = x.est.InputTokens
			su := tap.stream.Usage().Usage
			u.WebSearches = max(su.WebSearches, x.est.WebSearches)
			u.ServiceTier = weigher.JoinServedTiers(su.ServiceTier, tap.truncated.tier) // the tier its chunks named (tier30, tier33)
			source = spec.SourceCounted
		}
	} else if source == spec.SourceRefund {
		x.settle(meter.Settlement{Source: spec.SourceRefund})
		return
	}
	x.settle(meter.Settlement{Source: source, Usage: u})
}
