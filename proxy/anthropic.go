package proxy

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/weigher"
)

// anthropic is the dialect of Anthropic's Messages API
// (https://docs.anthropic.com/en/api/messages): the key in x-api-key, the
// /v1/messages paths.
type anthropic struct{}

// credential reads x-api-key first, then the bearer token.
func (anthropic) credential(h *fasthttp.RequestHeader) ([]byte, string) {
	if k := headerKey(h, "x-api-key"); len(k) > 0 {
		return k, "x-api-key"
	}
	if b := bearer(h); len(b) > 0 {
		return b, "Authorization"
	}
	return nil, "x-api-key"
}

func (anthropic) authorization(key string) (string, string) { return "x-api-key", key }

func (anthropic) claims(path string) claim {
	if hasPathPrefix(path, "/v1/messages") {
		return claimOnly
	}
	return claimNone
}

func (anthropic) endpoint(path string) (string, string) { return path, "" }

// rewrite changes nothing: a Messages stream reports its usage unasked.
func (anthropic) rewrite(_ weigher.Kind, _ *weigher.Estimate, body []byte) ([]byte, bool) {
	return body, false
}

// appendError writes Anthropic's {"type":"error","error":{"type","message"}}
// (https://docs.anthropic.com/en/api/errors).
func (anthropic) appendError(b []byte, e apiError) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendJSONString(b, e.anthropicType)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.message)
	return append(b, "}}"...)
}

// limitHeaders writes Anthropic's anthropic-ratelimit-{requests,tokens,
// input-tokens,output-tokens}-{limit,remaining,reset}, reset as an RFC 3339
// instant (https://docs.anthropic.com/en/api/rate-limits; see
// anthropicResetAt), each from the rule of that unit with the least
// remaining.
func (anthropic) limitHeaders(fs *limitFields, rules []meter.Applied) {
	now := time.Now()
	for k := range anthropicKinds {
		kind := &anthropicKinds[k]
		i := tightestOf(rules, kind.unit)
		if i < 0 {
			continue
		}
		a := &rules[i]
		fs.appendCapacity(i) // the values are built in fs's buffer
		fs.commit(kind.limit)
		fs.appendRemaining(i)
		fs.commit(kind.remaining)
		fs.buf = anthropicResetAt(a, now).AppendFormat(fs.buf, time.RFC3339)
		fs.commit(kind.reset)
	}
}

// anthropicResetAt is the instant a's bucket resets, in UTC, for an
// anthropic-ratelimit-*-reset field: a quota's period end exactly (its
// Limit.WindowEnd, the instant its 429 message names), while its period
// runs; otherwise now plus the bucket's Status.Reset (a token bucket: when
// it is full again), rounded up to the next whole second only when it has a
// fraction, so that a client waiting for it never retries early. Whole
// seconds as in Anthropic's own headers (RFC 3339 date-time, seconds
// precision).
func anthropicResetAt(a *meter.Applied, now time.Time) time.Time {
	t := now.Add(a.Status.Reset)
	if a.Limit.IsQuota() && a.Status.Reset > 0 && !a.Limit.WindowEnd.IsZero() {
		t = a.Limit.WindowEnd
	}
	t = t.UTC()
	if w := t.Truncate(time.Second); !w.Equal(t) {
		t = w.Add(time.Second)
	}
	return t
}

// anthropicKind is one unit Anthropic's rate-limit fields report and the
// names of its anthropic-ratelimit-<unit>-{limit,remaining,reset} fields.
type anthropicKind struct {
	unit                    policy.Unit
	limit, remaining, reset []byte // spelled as written (setField)
}

// anthropicKinds are the units Anthropic's rate-limit fields report, with
// the names of each one's fields, spelled once rather than joined on every
// answer.
var anthropicKinds = func() []anthropicKind {
	ks := []anthropicKind{{unit: policy.UnitRequests}, {unit: policy.UnitTokens}, {unit: policy.UnitInputTokens}, {unit: policy.UnitOutputTokens}}
	for i, name := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		p := "anthropic-ratelimit-" + name
		ks[i].limit, ks[i].remaining, ks[i].reset = []byte(p+"-limit"), []byte(p+"-remaining"), []byte(p+"-reset")
	}
	return ks
}()
