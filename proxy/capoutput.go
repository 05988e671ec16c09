package proxy

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// outputField is the member that holds the output maximum of a kind whose
// maximum llmguard may lower (cap_output), "" for the others: chat
// completions' max_completion_tokens (the field every current OpenAI chat
// model reads; the o-series refuse max_tokens), Responses'
// max_output_tokens, Anthropic Messages' max_tokens
// (https://platform.openai.com/docs/api-reference/chat/create,
// https://platform.openai.com/docs/api-reference/responses/create,
// https://docs.anthropic.com/en/api/messages).
func outputField(k weigher.Kind) string {
	switch k {
	case weigher.KindChat:
		return "max_completion_tokens"
	case weigher.KindResponses:
		return "max_output_tokens"
	case weigher.KindMessages:
		return "max_tokens"
	}
	return ""
}

// pinField is the member a request of kind k that names no output
// maximum has its reservation written in as one (output_reservation.pin),
// "" for the kinds it cannot be: outputField(k), and legacy completions'
// max_tokens ("integer or null, Optional, Defaults to 16",
// https://platform.openai.com/docs/api-reference/completions/create; also
// what llama.cpp's and Ollama's OpenAI routes read, which otherwise
// generate until the model stops). Completions' maximum is written, never
// lowered (cap_output): with echo its reservation holds the prompt once
// per choice, which is not a maximum per completion (the weigher then
// clears OutputDefaulted, so such a body is never pinned either).
func pinField(k weigher.Kind) string {
	if k == weigher.KindCompletions {
		return "max_tokens"
	}
	return outputField(k)
}

// writable reports whether a request of kind k estimated est can have an
// output maximum written into its body by llmguard: a strictly parsed body
// of a kind with a pinField, with no predicted output and no member that
// bounds its output past the maximum (weigher.Estimate.OutputPinned:
// n_predict, min_tokens, max_length, a reasoning budget).
func writable(k weigher.Kind, est *weigher.Estimate) bool {
	return est.Parsed && pinField(k) != "" && est.PredictionTokens == 0 && !est.OutputPinned
}

// minOutputMax is the smallest output maximum an endpoint accepts, in
// tokens: Responses refuses a max_output_tokens below 16 (OpenAI's API
// reference), the others take 1.
func minOutputMax(k weigher.Kind) int64 {
	if k == weigher.KindResponses {
		return 16
	}
	return 1
}

// outputOf is what admission needs to know of a request's output
// reservation: whether the body named a maximum, for how many choices, the
// model's documented ceiling, and whether llmguard can lower it (Cappable)
// or only write one where the body names none (Pinnable).
func outputOf(k weigher.Kind, est *weigher.Estimate) meter.Output {
	w := writable(k, est)
	return meter.Output{Defaulted: est.OutputDefaulted, Choices: est.Choices, Ceiling: est.OutputCeiling,
		Cappable: w && outputField(k) != "", Pinnable: w, MinMax: minOutputMax(k)}
}

// pinsUnbounded reports whether p forwards a request of kind k estimated
// est that names no output maximum with its reservation written as one
// (output_reservation.pin): the same test admission makes
// (meter.Exchange.pinOutput), so that a background Responses run that
// names none is let through only when its maximum will be written.
func (p *Proxy) pinsUnbounded(k weigher.Kind, est *weigher.Estimate) bool {
	return p.opt.PinOutputs && est.OutputDefaulted && writable(k, est) && k.Weighed()
}

// capBody returns the body to forward for a request whose output maximum
// admission lowered (cap_output) or pinned (output_reservation.pin: the
// request named none, and its reservation is written as its maximum);
// body itself otherwise. The new maximum replaces the value of every
// output field the weigher found in the body (their offsets, from the one
// strict parse that refused keys named twice or in another case, so no
// other member can be the one an upstream reads: a pinned request's are
// a null, 0 or other value that named no maximum), or is added as the
// flavor's own field when the body named none.
func (p *Proxy) capBody(_ *fasthttp.RequestCtx, x *exchange, body []byte) []byte {
	if x.m == nil {
		return body
	}
	to, _, ok := x.m.OutputCapped()
	if !ok {
		if to, ok = x.m.OutputPinned(); !ok {
			return mirrorMaxTokens(x, body)
		}
	}
	name := pinField(x.kind)
	if x.kind == weigher.KindChat && x.upstream != nil && x.upstream.chatOutputField != "" {
		name = x.upstream.chatOutputField
	}
	out := rewriteOutputMax(body, x.est.OutputFields, name, to)
	if x.kind == weigher.KindChat && name == chatMaxTokens && x.est.OutputFields[0].End != 0 && !x.est.NamesMaxTokens {
		// A chat body's max_completion_tokens, rewritten alone, bounds
		// nothing on a server that reads max_tokens only (Ollama,
		// llama.cpp, TabbyAPI): the member it reads goes beside it.
		out = rewriteOutputMax(out, [2]weigher.FieldSpan{}, name, to)
	}
	return out
}

// mirrorMaxTokens returns body with the maximum a chat request named
// only as max_completion_tokens (weigher.Estimate.MaxCompletionOnly, as
// the weigher read it and reserved for) written as max_tokens, when its
// upstream reads max_tokens (chatOutputFieldOf: Ollama, llama.cpp,
// TabbyAPI); body itself otherwise. Such a server ignores
// max_completion_tokens and writes until the model stops: a caller that
// sent "max_completion_tokens": 1 was reserved one output token a
// completion and billed up to the model's maximum, charged only after
// the fact as debt, so that many such calls at once spent far past the
// limit (adv25's lead; TestMaxCompletionTokensBoundsAMaxTokensServer).
// A body that also names a max_tokens holding no count (0, -1, which
// those servers read as no limit, null) has both values replaced by the
// maximum; one that names none gets max_tokens added.
func mirrorMaxTokens(x *exchange, body []byte) []byte {
	per := x.est.MaxCompletionOnly // set only for a parsed chat body that named this maximum
	if per <= 0 || x.kind != weigher.KindChat || x.upstream == nil || x.upstream.chatOutputField != chatMaxTokens {
		return body
	}
	fields := x.est.OutputFields // both members' values, when max_tokens is one
	if !x.est.NamesMaxTokens {
		fields = [2]weigher.FieldSpan{} // max_tokens added
	}
	return rewriteOutputMax(body, fields, chatMaxTokens, per)
}

// Chat output fields: the two names of a chat request's output maximum
// (OpenAI's API reference: max_tokens "is now deprecated in favor of
// max_completion_tokens, and is not compatible with o-series models").
// spec.ChatOutputField's table spells them.
var (
	chatMaxCompletionTokens = spec.ChatMaxCompletionTokens.String()
	chatMaxTokens           = spec.ChatMaxTokens.String()
)

// chatOutputFieldOf is the member a chat request that names no output
// maximum has one written in (output_reservation.pin, cap_output) on its
// way to upstream u, whose base URL names hostname: u.ChatOutputField when set; else
// max_completion_tokens for OpenAI's own API (host api.openai.com, or a
// data-residency host under it: eu.api.openai.com, us.api.openai.com,
// per OpenAI's data residency guide) and
// Azure OpenAI (flavor azure, or a host under .openai.azure.com), whose
// reasoning models refuse max_tokens, and which refuse the two together
// ("Setting 'max_tokens' and 'max_completion_tokens' at the same time is
// not supported"); max_tokens for every other server, which is the name
// OpenAI-compatible servers read: Ollama's OpenAI route has no
// max_completion_tokens at all (openai.ChatCompletionRequest in
// ollama/ollama's openai/openai.go), llama.cpp's server reads n_predict,
// else max_tokens (params_from_json_cmpl), and TabbyAPI max_tokens or its
// alias max_length; such a server ignores a max_completion_tokens and
// writes until the model stops, past the reservation the member was
// written to bound. A gateway that passes bodies through unchanged to
// OpenAI's reasoning models (no renaming) needs chat_output_field:
// max_completion_tokens.
func chatOutputFieldOf(u *Upstream, hostname string) string {
	if u.ChatOutputField != "" {
		return u.ChatOutputField
	}
	h := strings.TrimSuffix(strings.ToLower(hostname), ".")
	if u.Flavor == FlavorAzure || h == "api.openai.com" || strings.HasSuffix(h, ".api.openai.com") || strings.HasSuffix(h, ".openai.azure.com") {
		return chatMaxCompletionTokens
	}
	return chatMaxTokens
}

// setCappedHeader says, in x-llmguard-output-capped ("<new maximum>;
// requested=<old>", tokens per completion), that admission lowered the
// request's output maximum, and, in x-llmguard-output-pinned ("<maximum>",
// tokens per completion), that the request named no maximum and was
// forwarded with its reservation as one (output_reservation.pin; both when
// cap_output lowered a pinned reservation); nothing otherwise.
func setCappedHeader(h *fasthttp.ResponseHeader, x *exchange) {
	if x.m == nil {
		return
	}
	var b [48]byte
	if to, ok := x.m.OutputPinned(); ok {
		h.SetBytesV("x-llmguard-output-pinned", strconv.AppendInt(b[:0], to, 10))
	}
	to, from, ok := x.m.OutputCapped()
	if !ok {
		return
	}
	v := strconv.AppendInt(b[:0], to, 10)
	v = append(v, "; requested="...)
	v = strconv.AppendInt(v, from, 10)
	h.SetBytesV("x-llmguard-output-capped", v)
}

// rewriteOutputMax returns a copy of body, a JSON object that passed the
// weigher's strict scan, with the values at fields replaced by n, or, when
// fields holds none, with the member "name": n added before its closing
// brace.
func rewriteOutputMax(body []byte, fields [2]weigher.FieldSpan, name string, n int64) []byte {
	var num [20]byte
	val := strconv.AppendInt(num[:0], n, 10)
	nb := make([]byte, 0, len(body)+len(name)+len(val)+4)
	at := 0
	for _, f := range fields {
		if f.End == 0 || f.Start < at || f.End > len(body) {
			continue
		}
		nb = append(append(nb, body[at:f.Start]...), val...)
		at = f.End
	}
	if at > 0 {
		return append(nb, body[at:]...)
	}
	end := bytes.LastIndexByte(body, '}')
	open := bytes.IndexByte(body, '{')
	if end < 0 || open < 0 || open > end {
		return body // not an object: never the case for a weighed body
	}
	nb = append(nb, body[:end]...)
	if len(bytes.TrimSpace(body[open+1:end])) > 0 {
		nb = append(nb, ',')
	}
	nb = append(append(append(append(nb, '"'), name...), `":`...), val...)
	return append(nb, body[end:]...)
}
