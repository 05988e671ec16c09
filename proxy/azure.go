package proxy

import (
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/weigher"
)

// azure is the dialect of Azure OpenAI
// (https://learn.microsoft.com/azure/ai-foundry/openai/reference): the key
// in the api-key header (the v1 API also takes it as a bearer token), and
// paths under /openai/ — deployment paths
// /openai/deployments/{deployment}/{chat/completions,completions,embeddings,…}
// with an api-version query, /openai/v1/… with the model (the deployment's
// name) in the body, and /openai/{responses,…} as the openai-go SDK's
// azure options send them. Request bodies and answers are OpenAI's.
type azure struct{}

// credential reads api-key first, then the bearer token (the v1 API's
// OpenAI clients send the key that way).
func (azure) credential(h *fasthttp.RequestHeader) ([]byte, string) {
	if k := headerKey(h, "api-key"); len(k) > 0 {
		return k, "api-key"
	}
	if b := bearer(h); len(b) > 0 {
		return b, "Authorization"
	}
	return nil, "api-key"
}

// authorization is api-key, which both the dated and the v1 API accept.
func (azure) authorization(key string) (string, string) { return "api-key", key }

func (azure) claims(path string) claim {
	if hasPathPrefix(path, "/openai/") {
		return claimPrefer
	}
	return claimNone
}

// endpoint maps /openai/deployments/{d}/rest, /openai/v1/rest and
// /openai/rest to /v1/rest (case aside: Azure's paths are matched without
// regard to case, so no spelling escapes its weight), with d the deployment.
func (azure) endpoint(path string) (string, string) {
	if !hasPathPrefix(path, "/openai/") {
		return path, ""
	}
	rest := path[len("/openai"):] // "/…"
	switch {
	case hasPathPrefix(rest, "/deployments/"):
		d := rest[len("/deployments/"):]
		i := strings.IndexByte(d, '/')
		if i < 0 {
			return "/v1/deployments/" + d, "" // not an inference call
		}
		return "/v1" + d[i:], d[:i]
	case hasPathPrefix(rest, "/v1/") || strings.EqualFold(rest, "/v1"):
		return rest, ""
	}
	return "/v1" + rest, ""
}

func (azure) rewrite(k weigher.Kind, est *weigher.Estimate, body []byte) ([]byte, bool) {
	return addIncludeUsage(k, est, body)
}

// appendError writes Azure OpenAI's error object
// {"error":{"code","message","type","param","inner_error":{"code"}}} (the
// reference's errorResponse schema): code is the HTTP status as a string,
// as Azure's own 401, 404 and 429 bodies give it, and inner_error.code
// llmguard's reason (the OpenAI flavor's code).
func (azure) appendError(b []byte, e apiError) []byte {
	b = append(b, `{"error":{"code":"`...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, `","message":`...)
	b = appendJSONString(b, e.message)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.openAIType)
	b = append(b, `,"param":null`...)
	if e.openAICode != "" {
		b = append(b, `,"inner_error":{"code":`...)
		b = appendJSONString(b, e.openAICode)
		b = append(b, '}')
	}
	return append(b, "}}"...)
}

// limitHeaders writes the x-ratelimit-{limit,remaining,reset}-{tokens,
// requests} fields Azure OpenAI deployments answer with, reset in whole
// seconds as Azure gives it (observed on the service; the REST reference
// documents only retry-after and retry-after-ms, which denied sets).
func (azure) limitHeaders(fs *limitFields, rules []meter.Applied) {
	if i := tightest(rules, policy.Unit.CountsTokens); i >= 0 {
		setOpenAITrio(fs, &tokensTrio, i, resetSeconds)
	}
	if i := tightestOf(rules, policy.UnitRequests); i >= 0 {
		setOpenAITrio(fs, &requestsTrio, i, resetSeconds)
	}
}
