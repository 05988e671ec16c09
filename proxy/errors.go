package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/suggest"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// Flavor is an upstream's API shape, which decides the caller's error body
// and rate-limit headers; defined once in package spec.
type Flavor = spec.Flavor

// Flavors llmguard speaks.
const (
	FlavorOpenAI    = spec.FlavorOpenAI
	FlavorAnthropic = spec.FlavorAnthropic
	FlavorAzure     = spec.FlavorAzure
)

// apiError is an error answered by llmguard itself, in the caller's flavor.
type apiError struct {
	status int
	// openAIType and openAICode fill OpenAI's
	// {"error":{"message","type","param","code"}} shape
	// (https://platform.openai.com/docs/guides/error-codes).
	openAIType string
	openAICode string
	// anthropicType fills Anthropic's {"type":"error","error":{"type","message"}}
	// shape (https://docs.anthropic.com/en/api/errors).
	anthropicType string
	message       string
}

var (
	errUnauthorized = apiError{status: fasthttp.StatusUnauthorized, openAIType: "invalid_request_error", openAICode: "invalid_api_key",
		anthropicType: "authentication_error", message: "Incorrect or missing API key for llmguard: present a virtual key where your API's SDK sends its key (`Authorization: Bearer <key>` or `x-api-key`; an Azure client's `api-key` is read only on paths llmguard routes to an Azure upstream)."}
	// errAdminPathUnauthorized answers a caller without a valid key on a
	// path only the admin listener serves (adminOnlyPath: /metrics,
	// /healthz, /readyz, /admin/…): 401 as errUnauthorized, with a message
	// that sends a Prometheus scrape or a health probe pointed at the
	// proxy's port to the admin listener (trial19: both read "Incorrect or
	// missing API key"). The admin address is not named: this port may
	// face callers that should not learn it.
	errAdminPathUnauthorized = apiError{status: fasthttp.StatusUnauthorized, openAIType: "invalid_request_error", openAICode: "invalid_api_key",
		anthropicType: "authentication_error", message: "Incorrect or missing API key for llmguard. /metrics, /healthz, /readyz and /admin/* are served on llmguard's admin listener " +
			"(admin_listen, or serve --admin-listen), not on this proxy listener, where every path needs a virtual key: point scrapes and health probes at the admin address."}
	// errKeyExpired and errKeyRevoked answer a stored virtual key (README,
	// "Managing keys") past its expiry or revoked: 401 like an unknown
	// key, which the SDKs raise as their authentication error, with a
	// message and code that say which.
	errKeyExpired = apiError{status: fasthttp.StatusUnauthorized, openAIType: "invalid_request_error", openAICode: "expired_api_key",
		anthropicType: "authentication_error", message: "This llmguard virtual key has expired: ask its operator for a new one (`llmguard keys create` or `rotate`)."}
	// errKeyRotated answers a stored key a successor replaced, past its
	// grace period: the code of an expired key (which it is: clients that
	// act on the code need nothing new), and a message that says to use
	// the successor, which its holder may not know was made.
	errKeyRotated = apiError{status: fasthttp.StatusUnauthorized, openAIType: "invalid_request_error", openAICode: "expired_api_key",
		anthropicType: "authentication_error", message: "This llmguard virtual key was rotated and its grace period has ended: use the key that replaced it (ask its operator)."}
	errKeyRevoked = apiError{status: fasthttp.StatusUnauthorized, openAIType: "invalid_request_error", openAICode: "revoked_api_key",
		anthropicType: "authentication_error", message: "This llmguard virtual key has been revoked: ask its operator for a new one."}
	// errKeyMalformed answers a pass-through caller whose credential is not
	// one token68 of at most 4096 bytes (policy.KeyMalformed): 401 with
	// the same code as an unknown key, and a message that says what
	// llmguard accepts, the length included.
	errKeyMalformed = apiError{status: fasthttp.StatusUnauthorized, openAIType: "invalid_request_error", openAICode: "invalid_api_key",
		anthropicType: "authentication_error", message: "llmguard passes a caller's own API key through only when it is one token of at most 4096 bytes (letters, digits and -._~+/, then = padding: RFC 7235 token68): this credential has a space, comma, quote or other character in it, or is longer."}
	// errHeaderTooLarge answers a request whose request line and headers
	// overflow the server's read buffer (ReadBufferSize).
	errHeaderTooLarge = apiError{status: fasthttp.StatusRequestHeaderFieldsTooLarge, openAIType: "invalid_request_error", openAICode: "request_header_too_large",
		anthropicType: "invalid_request_error", message: "Request headers too large for llmguard: the request line and headers together must fit in " + strconv.Itoa(ReadBufferSize>>10) + " KiB."}
	errBodyTooLarge = apiError{status: fasthttp.StatusRequestEntityTooLarge, openAIType: "invalid_request_error", openAICode: "request_too_large",
		anthropicType: "request_too_large", message: "Request body exceeds the size llmguard accepts (max_body_bytes)."}
	errAmbiguousPath = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "invalid_path",
		anthropicType: "invalid_request_error", message: "The request path routes differently decoded and as sent (a percent-encoded path prefix); send it unencoded."}
	// errModelOutsideBody answers a request that names a model outside its
	// body: a "model" query parameter, an engines path segment (OpenAI's
	// retired /v1/engines/{engine}/… API), or a deployments path sent to
	// an upstream that is not Azure (whose deployments llmguard maps to
	// models itself). OpenAI-compatible servers such as LiteLLM's proxy
	// (its /engines/{model:path}/chat/completions, /completions and
	// /embeddings routes) bill that model over the body's, which is the
	// one llmguard prices.
	errModelOutsideBody = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "model_outside_body",
		anthropicType: "invalid_request_error", message: "The request names a model outside its body (a model query parameter, an engines path, a deployments " +
			"path to an upstream that is not Azure, or a gateway's routing field such as x-portkey-config): an upstream may bill that model, while llmguard prices the body's. Name the model in the body only."}
	// errGatewayRetryField answers a request whose x-litellm-num-retries
	// or cf-aig-max-attempts field asks a gateway to retry the call itself
	// (gatewayRetries),
	// as a body's num_retries is answered (weigher.FaultGatewayRetries).
	errGatewayRetryField = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "gateway_retries",
		anthropicType: "invalid_request_error", message: "The request's x-litellm-num-retries or cf-aig-max-attempts field asks the gateway to retry the call itself, and an upstream may " +
			"bill every attempt while llmguard counts one. Retry the call yourself: each retry is then weighed and counted."}
	// errReadWithBody answers a GET, HEAD, DELETE or OPTIONS that carries
	// a body (see weigher.ReadMethod): no API llmguard fronts takes one.
	errReadWithBody = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "invalid_body",
		anthropicType: "invalid_request_error", message: "A GET, HEAD, DELETE or OPTIONS request may not carry a body through llmguard: send it with POST."}
	// errOddPath answers a path that is not plainPath: servers read it
	// differently, so the endpoint that would serve it is unknown.
	errOddPath = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "invalid_path",
		anthropicType: "invalid_request_error", message: "The request path holds a dot segment, a backslash, a control character or a percent-encoded '.', '/', '\\', '%', '?' or '#', which servers resolve differently; send the endpoint's plain path."}
	// errBackgroundUnbounded answers a Responses request run in the
	// background that names no max_output_tokens (weigher.Estimate.Background)
	// when output_reservation.pin is off or cannot write one (Options.PinOutputs).
	errBackgroundUnbounded = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "max_output_tokens_required",
		anthropicType: "invalid_request_error", message: "A background response reports no usage when it is created, so llmguard charges what it reserves: set max_output_tokens."}
	errModelName = apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "invalid_model",
		anthropicType: "invalid_request_error", message: "The model name is longer than 256 bytes."}
	errGatewayCredential = apiError{status: fasthttp.StatusBadGateway, openAIType: "api_error", openAICode: "upstream_auth_failed",
		anthropicType: "api_error", message: "The upstream rejected the gateway's credential (llmguard's own upstream key, not yours); llmguard has logged it for its operator."}
)

// noUpstream answers a path that only an upstream of flavor f serves when
// the config has none (proxy's router: Anthropic's /v1/messages…): 404
// in f's shape, naming what is missing, so that a caller pointing the
// Anthropic SDK at an OpenAI-only llmguard learns why, and its operator
// what to add.
func noUpstream(f Flavor) apiError {
	return apiError{status: fasthttp.StatusNotFound, openAIType: "invalid_request_error", openAICode: "unknown_url",
		anthropicType: "not_found_error",
		message: fmt.Sprintf("No upstream is configured for this path: it belongs to the %s API, and llmguard's config has no upstream "+
			"with flavor: %s. Its operator can add one to upstreams (README, Configuration reference).", f, f)}
}

// modelNotPriced answers a request a usd limit cannot count: its model
// (as sent, quoted) has no price in its service tier, and missing is the
// config key that would price it (policy.Quote.Missing). A request that
// names no model (model "") is told so: the caller, not the operator, can
// fix it, and `Model "" has no price … models.""` sent them to the config.
// An Azure caller's model is its deployment's name (f FlavorAzure): the
// message also names upstreams[].deployments, which maps a deployment to
// the priced model it runs (trial16: an unmapped deployment was sent to
// models."<deployment>" alone).
func modelNotPriced(f Flavor, model, limit, missing string) apiError {
	e := apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "model_not_priced",
		anthropicType: "invalid_request_error"}
	switch {
	case model == "":
		e.message = fmt.Sprintf("The request names no model (its body has no \"model\", or an empty one), and limit %s counts US dollars, "+
			"so llmguard cannot price it: name the model in the body.", limit)
	case strings.HasSuffix(missing, ".audio_input_usd_per_mtok"):
		// The request sends or asks for audio (policy.Quote.ForAudio).
		e.message = fmt.Sprintf("Model %q has no audio price in llmguard, and limit %s counts US dollars, so a request that sends or asks for audio "+
			"cannot be admitted. Its operator can price audio with %s and audio_output_usd_per_mtok in the config.", model, limit, missing)
	case f == FlavorAzure:
		e.message = fmt.Sprintf("Model %q has no price in llmguard, and limit %s counts US dollars, so it cannot be admitted. "+
			"Its operator can map the deployment to the priced model it runs in the Azure upstream's deployments, "+
			"price it with %s in the config (its prices, or alias_of: a priced model), or set default_price.",
			model, limit, missing)
	default:
		e.message = fmt.Sprintf("Model %q has no price in llmguard, and limit %s counts US dollars, so it cannot be admitted. "+
			"Its operator can price it with %s in the config (its prices, or alias_of: a priced model), or set default_price.",
			model, limit, missing)
	}
	return e
}

// write sends e as the whole response in flavor f's shape.
func (e apiError) write(ctx *fasthttp.RequestCtx, f Flavor) {
	ctx.SetStatusCode(e.status)
	ctx.SetContentType("application/json")
	ctx.SetBody(dialectOf(f).appendError(nil, e))
}

// doubledVersion answers a path that starts /v1/v1 (path, as sent): 404
// unknown_url, naming the base URL as the likely cause.
func doubledVersion(path string) apiError {
	return apiError{status: fasthttp.StatusNotFound, openAIType: "invalid_request_error", openAICode: "unknown_url",
		anthropicType: "not_found_error",
		message: fmt.Sprintf("%s repeats /v1: the client's base URL likely ends in /v1 and its SDK adds /v1 again "+
			"(Anthropic's SDKs add it themselves: give them llmguard's address without /v1). Nothing was sent upstream.", clip(path))}
}

// unmetered is the answer to a call to an endpoint that spends tokens or
// money upstream but that llmguard does not weigh, from a caller under the
// token or dollar rule r: 403 unmetered_endpoint, naming the way to allow it.
//
// A path a letter or two off an endpoint llmguard weighs (knownPaths) is
// most likely a typo in the client, so the answer says which endpoint it
// looks like before it mentions unmetered_paths. A path below a weighed
// endpoint (Anthropic's /v1/messages/batches, a stored object's
// /v1/responses/{id}/cancel) is a resource of its own, not a typo, and
// gets no such hint.
func unmetered(path string, r *policy.Rule) apiError {
	e := apiError{status: fasthttp.StatusForbidden, openAIType: "invalid_request_error", openAICode: "unmetered_endpoint",
		anthropicType: "permission_error"}
	if near := suggest.Closest(path, knownPaths); near != "" && !strings.EqualFold(near, path) && !below(path, near) {
		e.message = fmt.Sprintf("%s is not an endpoint llmguard weighs: did you mean %s? Limit %s (%s) applies to you, and llmguard "+
			"refuses a path it cannot weigh rather than let it past the limit.", clip(path), near, r.Name, r.Unit)
		return e
	}
	e.message = fmt.Sprintf("%s spends tokens or money upstream but llmguard does not weigh it, and limit %s (%s) applies to you: "+
		"llmguard refuses it rather than let it past the limit. An operator can allow it with unmetered_paths.", clip(path), r.Name, r.Unit)
	return e
}

// offProxy is the answer to a call that would open spending outside
// llmguard (weigher.OffProxy: a Realtime client secret, session or WebRTC
// call) and that unmetered_paths does not allow: 403 unmetered_endpoint,
// to every caller, whatever its rules, since the key or session it returns
// is used with the provider directly, where no limit of llmguard's counts.
func offProxy(path string) apiError {
	return apiError{status: fasthttp.StatusForbidden, openAIType: "invalid_request_error", openAICode: "unmetered_endpoint",
		anthropicType: "permission_error",
		message: fmt.Sprintf("%s returns a key or session used with the provider directly, outside every limit llmguard keeps, "+
			"so llmguard refuses it to every caller. An operator can allow it with unmetered_paths.", clip(path))}
}

// below reports whether path is a resource under the endpoint known
// (compared in lower case, as suggest.Closest compares): known followed
// by "/".
func below(path, known string) bool {
	return len(path) > len(known) && path[len(known)] == '/' && strings.EqualFold(path[:len(known)], known)
}

// clip is path cut to at most 200 bytes, at the start of a UTF-8
// sequence (and "…"), for an error message: a caller chooses the path, up
// to fasthttp's header limit.
func clip(path string) string {
	if len(path) <= 200 {
		return path
	}
	n := 200
	for n > 0 && !utf8.RuneStart(path[n]) {
		n--
	}
	return path[:n] + "…"
}

// appendJSONString appends s to b as a JSON string, by encoding/json
// (HTML characters left as they are): control characters escaped and each
// byte that is not part of valid UTF-8 written as U+FFFD, so that an error
// body stays JSON whatever bytes a caller put in the path or model it
// quotes. strconv.AppendQuote, used before, writes Go's escapes (\xff,
// \a), which JSON parsers refuse.
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
