package proxy

import (
	"bytes"
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/contentcoding"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/weigher"
)

// A weighed endpoint takes only what llmguard weighs exactly as the
// upstream reads it: a UTF-8 JSON object in strict syntax (the weigher's
// Fault says why a body is not one), after undoing any content coding.
// The body is forwarded decoded, without Content-Encoding, so the upstream
// reads the very bytes that were weighed; an endpoint that is not weighed
// gets the body as sent.

var (
	errUnsupportedEncoding = apiError{status: fasthttp.StatusUnsupportedMediaType, openAIType: "invalid_request_error",
		openAICode: "unsupported_content_encoding", anthropicType: "invalid_request_error",
		message: "llmguard decodes request bodies in gzip, deflate, br or zstd only (at most 4 codings)"}
	errUnsupportedCharset = apiError{status: fasthttp.StatusUnsupportedMediaType, openAIType: "invalid_request_error",
		openAICode: "unsupported_charset", anthropicType: "invalid_request_error",
		message: "The request's Content-Type names a charset other than UTF-8; JSON between systems is UTF-8 (RFC 8259 §8.1): send UTF-8 and drop the charset or say charset=utf-8."}
	errBadEncoding = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error",
		openAICode: "invalid_content_encoding", anthropicType: "invalid_request_error",
		message: "The request body is not valid in the Content-Encoding it names (corrupt, cut short, or followed by other data)."}
	errDecodedTooLarge = apiError{status: fasthttp.StatusRequestEntityTooLarge, openAIType: "invalid_request_error",
		openAICode: "request_too_large", anthropicType: "request_too_large",
		message: "The request body, decoded from its Content-Encoding, exceeds the size llmguard accepts (max_body_bytes), or asks for a decoder window over 16 MiB."}
)

// checkEncoding refuses, from the headers alone, a request to a weighed
// endpoint whose body llmguard could not decode: a content coding it does
// not know (415 unsupported_content_encoding) or a charset other than
// UTF-8 (415 unsupported_charset). It returns the codings to undo once
// the body is read (none for an endpoint that is not weighed). uncoded:
// a walk of h's fields (readFields) found no Content-Encoding field, so
// there is none to look up (fasthttp's PeekAll copies and normalises the
// name, then walks every field again: about 480 instructions a request).
func checkEncoding(h *fasthttp.RequestHeader, k weigher.Kind, uncoded bool) ([]contentcoding.Coding, *refusal) {
	if !k.Weighed() {
		return nil, nil
	}
	if cs, ok := charset(h.ContentType()); ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return nil, &refusal{err: errUnsupportedCharset, outcome: meter.OutcomeInvalid}
	}
	if uncoded {
		return nil, nil
	}
	codings, err := contentcoding.Parse(h.PeekAll(fasthttp.HeaderContentEncoding))
	if err != nil {
		e := errUnsupportedEncoding
		e.message += ": " + strings.TrimPrefix(err.Error(), "contentcoding: ") + "."
		return nil, &refusal{err: e, outcome: meter.OutcomeInvalid}
	}
	return codings, nil
}

// charset is the charset parameter of a Content-Type value, unquoted; ok
// is false when there is none.
func charset(contentType []byte) (string, bool) {
	params := contentType
	for len(params) > 0 {
		i := bytes.IndexByte(params, ';')
		if i < 0 {
			return "", false
		}
		params = params[i+1:]
		p := bytes.TrimSpace(params)
		if j := bytes.IndexByte(p, ';'); j >= 0 {
			p = bytes.TrimSpace(p[:j])
		}
		name, value, ok := bytes.Cut(p, []byte("="))
		if ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("charset")) {
			return string(bytes.Trim(bytes.TrimSpace(value), `"`)), true
		}
	}
	return "", false
}

// decodeBody undoes codings on the body held in h, within max_body_bytes,
// taking every byte the decoding allocates from the caller's share of the
// body budget (added to h, so that releasing h gives it all back). The
// decoded body replaces the request's, and Content-Encoding goes, so that
// forward sends upstream exactly what is weighed. Refusals: a decoded body
// over max_body_bytes (413), no room in the budget (503), data that is not
// valid in its coding (400).
func (p *Proxy) decodeBody(ctx *fasthttp.RequestCtx, h *heldBody, codings []contentcoding.Coding) *refusal {
	if len(codings) == 0 {
		return nil
	}
	hold := func(n int) bool {
		if !p.hold(h.tenant, int64(n)) {
			return false
		}
		h.held += int64(n)
		return true
	}
	decoded, err := contentcoding.Decode(h.b, codings, contentcoding.Options{Limit: p.opt.MaxBodyBytes, Hold: hold})
	switch {
	case errors.Is(err, contentcoding.ErrTooLarge):
		return &refusal{err: errDecodedTooLarge, outcome: meter.OutcomeInvalid}
	case errors.Is(err, contentcoding.ErrBudget):
		ctx.Response.Header.Set("Retry-After", "1")
		return &refusal{err: errBodyBudget, outcome: meter.OutcomeOverloaded}
	case err != nil:
		return &refusal{err: errBadEncoding, outcome: meter.OutcomeInvalid}
	}
	h.b = decoded
	ctx.Request.SetBodyRaw(decoded)
	ctx.Request.Header.Del(fasthttp.HeaderContentEncoding)
	return nil
}

// faultError is the 400 answering a body the weigher could not weigh
// exactly as the upstream reads it: the fault's code (invalid_json,
// json_not_object, invalid_utf8, json_bom, duplicate_key, case_variant_key,
// json_too_deep, model_outside_body for a body naming fallback models,
// extra_body for members a gateway merges over the top-level ones,
// gateway_retries for a body asking a gateway to retry) and
// its message, with the detail saying what and where.
func faultError(est weigher.Estimate) apiError {
	f := est.Fault
	if f == weigher.FaultNone { // not parsed, yet no fault: say invalid JSON
		f = weigher.FaultInvalidJSON
	}
	why := " llmguard weighs only a UTF-8 JSON object in strict syntax, so that it counts what the upstream reads."
	switch f {
	case weigher.FaultModelOutsideBody:
		why = " An upstream may bill a model llmguard did not price: send one model, in \"model\"."
	case weigher.FaultExtraBody:
		why = " Send those fields at the top level of the body, where llmguard weighs them."
	case weigher.FaultGatewayRetries:
		why = " Retry the call yourself: each retry is then weighed and counted."
	}
	return apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: f.Code(),
		anthropicType: "invalid_request_error", message: f.Message(est.FaultDetail) + why}
}
