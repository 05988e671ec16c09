package proxy

import (
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/weigher"
)

// openAI is the dialect of OpenAI's API and the many servers that copy it
// (https://platform.openai.com/docs/api-reference): the key as a bearer
// token, the default flavor for any path no other dialect owns.
type openAI struct{}

// credential reads the bearer token first, then x-api-key.
func (openAI) credential(h *fasthttp.RequestHeader) ([]byte, string) {
	if b := bearer(h); len(b) > 0 {
		return b, "Authorization"
	}
	return headerKey(h, "x-api-key"), "x-api-key"
}

func (openAI) authorization(key string) (string, string) { return "Authorization", "Bearer " + key }

func (openAI) claims(string) claim { return claimNone }

func (openAI) endpoint(path string) (string, string) { return path, "" }

func (openAI) rewrite(k weigher.Kind, est *weigher.Estimate, body []byte) ([]byte, bool) {
	return addIncludeUsage(k, est, body)
}

// appendError writes OpenAI's {"error":{"message","type","param","code"}}
// (https://platform.openai.com/docs/guides/error-codes).
func (openAI) appendError(b []byte, e apiError) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendJSONString(b, e.message)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.openAIType)
	b = append(b, `,"param":null,"code":`...)
	if e.openAICode == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, e.openAICode)
	}
	return append(b, "}}"...)
}

// limitHeaders writes OpenAI's x-ratelimit-{limit,remaining,reset}-{tokens,
// requests} (https://platform.openai.com/docs/guides/rate-limits), each
// trio from the rule of that kind with the least remaining; reset is a Go
// duration string such as "1m30s", as OpenAI writes it.
func (openAI) limitHeaders(fs *limitFields, rules []meter.Applied) {
	if i := tightest(rules, policy.Unit.CountsTokens); i >= 0 {
		setOpenAITrio(fs, &tokensTrio, i, resetGo)
	}
	if i := tightestOf(rules, policy.UnitRequests); i >= 0 {
		setOpenAITrio(fs, &requestsTrio, i, resetGo)
	}
}

// resetFormat is how an x-ratelimit-reset-* value is written.
type resetFormat uint8

const (
	resetGo      resetFormat = iota // a Go duration rounded up to the millisecond ("1m30s"), as OpenAI writes it
	resetSeconds                    // whole seconds rounded up ("90"), as Azure writes it
)

// openAITrio are the names of one kind's x-ratelimit-{limit,remaining,
// reset}-kind fields, spelled once rather than joined on every answer.
type openAITrio struct{ limit, remaining, reset []byte }

var (
	tokensTrio = openAITrio{[]byte("x-ratelimit-limit-tokens"), []byte("x-ratelimit-remaining-tokens"),
		[]byte("x-ratelimit-reset-tokens")}
	requestsTrio = openAITrio{[]byte("x-ratelimit-limit-requests"), []byte("x-ratelimit-remaining-requests"),
		[]byte("x-ratelimit-reset-requests")}
)

// setOpenAITrio adds the trio of fields names from the limit and status of
// fs's rule i to fs, the reset as format says; the values are built in fs's
// buffer, so that no header allocates.
func setOpenAITrio(fs *limitFields, names *openAITrio, i int, format resetFormat) {
	a := &fs.rules[i]
	fs.appendCapacity(i)
	fs.commit(names.limit)
	fs.appendRemaining(i)
	fs.commit(names.remaining)
	if format == resetSeconds {
		fs.buf = appendInt(fs.buf, ceilSeconds(a.Status.Reset))
	} else {
		fs.buf = appendGoDuration(fs.buf, a.Status.Reset)
	}
	fs.commit(names.reset)
}
