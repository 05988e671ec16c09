package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/weigher"
)

// maxBufferedResponse caps a non-streamed upstream body llmguard reads whole
// to find its usage, in bytes.
const maxBufferedResponse = 64 << 20

// errClientGone aborts the upstream read when the client has disconnected.
var errClientGone = errors.New("proxy: client disconnected")

// relay sends the upstream response to the client, reading usage on the way,
// and settles the exchange. It owns resp.
func (p *Proxy) relay(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response) {
	resp.Header.CopyTo(&ctx.Response.Header)
	removeHopHeaders(&ctx.Response.Header)
	ctx.Response.Header.Set("x-llmguard-request-id", x.id)
	setLimitHeaders(&ctx.Response.Header, x.rules, nil)
	status := resp.StatusCode()

	if bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) && resp.BodyStream() != nil {
		p.opt.Metrics.request(x.upstream.Flavor, x.est.Model, outcomeFor(status))
		ctx.Response.Header.SetContentLength(-1)
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { p.stream(w, x, resp) })
		return
	}

	body, err := readBody(resp)
	fasthttp.ReleaseResponse(resp)
	if err != nil {
		p.log.Warn("upstream body read failed", "upstream", x.upstream.Name, "err", err, "request_id", x.id)
		p.settle(x, settlement{refund: true})
		p.opt.Metrics.request(x.upstream.Flavor, x.est.Model, outcomeUpstreamError)
		apiError{status: fasthttp.StatusBadGateway, openAIType: "api_error", openAICode: "upstream_error",
			anthropicType: "api_error", message: "llmguard lost the upstream response (" + x.upstream.Name + ")."}.write(ctx, x.upstream.Flavor)
		return
	}
	ctx.Response.SetBodyRaw(body)

	s := settlement{refund: status >= 400}
	if x.kind == kindChat {
		if u, ok := weigher.ParseChatUsage(tapView(ctx.Response.Header.ContentEncoding(), body)); ok {
			s = settlement{usage: u, hasUsage: true}
		}
	}
	p.opt.Metrics.request(x.upstream.Flavor, x.est.Model, outcomeFor(status))
	p.settle(x, s)
}

// readBody reads the whole upstream body, streamed or not.
func readBody(resp *fasthttp.Response) ([]byte, error) {
	st := resp.BodyStream()
	if st == nil {
		return bytes.Clone(resp.Body()), nil
	}
	b, err := io.ReadAll(io.LimitReader(st, maxBufferedResponse+1))
	if cerr := resp.CloseBodyStream(); err == nil {
		err = cerr
	}
	if err == nil && len(b) > maxBufferedResponse {
		err = errors.New("response body over 64 MiB")
	}
	return b, err
}

// tapView returns body decoded for the usage tap when the upstream
// compressed it anyway; the client still receives the bytes as sent.
func tapView(encoding, body []byte) []byte {
	var out []byte
	var err error
	switch string(bytes.ToLower(encoding)) {
	case "", "identity":
		return body
	case "gzip":
		out, err = fasthttp.AppendGunzipBytes(nil, body)
	case "br":
		out, err = fasthttp.AppendUnbrotliBytes(nil, body)
	case "deflate":
		out, err = fasthttp.AppendInflateBytes(nil, body)
	case "zstd":
		out, err = fasthttp.AppendUnzstdBytes(nil, body)
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	return out
}

// stream relays an SSE body event by event, flushing after every upstream
// read so the first event reaches the client before the upstream finishes.
// It runs after the handler returned, on fasthttp's writer goroutine.
func (p *Proxy) stream(w *bufio.Writer, x *exchange, resp *fasthttp.Response) {
	defer fasthttp.ReleaseResponse(resp)
	src := resp.BodyStream()
	tap := usageTap{chat: x.kind == kindChat, strip: x.stripUsage}
	buf := make([]byte, 16<<10)
	clientGone := false
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if out := tap.feed(buf[:n]); len(out) > 0 {
				if _, err := w.Write(out); err != nil || w.Flush() != nil {
					clientGone = true
				}
			}
		}
		if clientGone || rerr != nil {
			if rerr != nil && rerr != io.EOF {
				p.log.Warn("upstream stream ended with an error", "upstream", x.upstream.Name, "err", rerr, "request_id", x.id)
			}
			break
		}
	}
	if clientGone {
		// Stop paying for an answer nobody reads: close the upstream
		// connection instead of draining it.
		if rc, ok := src.(fasthttp.ReadCloserWithError); ok {
			rc.CloseWithError(errClientGone)
		}
		p.log.Info("client disconnected mid-stream", "request_id", x.id)
	} else {
		w.Write(tap.end())
		w.Flush()
		resp.CloseBodyStream()
	}
	s := settlement{usage: tap.usage, hasUsage: tap.hasUsage}
	if !s.hasUsage {
		// No usage (client gone, or the upstream never sent it): charge the
		// input plus what was streamed, counted locally; never zero.
		s.counted = true
		s.usage = weigher.Usage{InputTokens: x.est.InputTokens, OutputTokens: p.opt.Weigher.CountText(x.est.Model, string(tap.text))}
	}
	p.settle(x, s)
}

// settlement is what a finished exchange really cost.
type settlement struct {
	refund   bool // upstream error without usage: return every reservation
	usage    weigher.Usage
	hasUsage bool // usage reported by the upstream
	counted  bool // usage counted locally (stream without usage)
}

// settle reconciles every bucket the request took from with actual −
// reserved, once, under the request id.
func (p *Proxy) settle(x *exchange, s settlement) {
	if len(x.rules) == 0 {
		return
	}
	actual := policy.Tokens{Input: s.usage.InputTokens, CachedInput: s.usage.CachedInputTokens, Output: s.usage.OutputTokens}
	var dbuf [8]bucket.Delta
	deltas := dbuf[:0]
	for _, a := range x.rules {
		var units int64
		switch {
		case s.refund:
			units = 0
		case !s.hasUsage && !s.counted:
			units = a.reserved // nothing better known: keep the reservation
		case x.kind == kindOther && a.rule.Unit != policy.UnitRequests:
			units = 0
		default:
			units = a.rule.Units(actual, x.price)
		}
		if d := units - a.reserved; d != 0 {
			deltas = append(deltas, bucket.Delta{Key: a.key, Limit: a.rule.Limit, Units: d})
		}
	}
	if len(deltas) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(p.opt.StoreTimeout, 50*time.Millisecond))
	defer cancel()
	if err := p.opt.Store.Reconcile(ctx, x.id, deltas); err != nil {
		p.log.Warn("reconcile failed", "err", err, "request_id", x.id)
	}
}
