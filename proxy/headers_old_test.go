package proxy

import (
	"bytes"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// The limit fields as written before their numbers went into stack buffers
// (strconv.AppendInt into buffers of their own, and Retry-After and
// retry-after-ms through strconv.FormatInt), kept as the reference that
// TestLimitHeadersSameAsOld compares with.

func oldSetLimitHeaders(h *fasthttp.ResponseHeader, f Flavor, rules []meter.Applied) {
	if len(rules) == 0 {
		return
	}
	switch dialectOf(f).(type) {
	case openAI:
		if i := tightest(rules, policy.Unit.CountsTokens); i >= 0 {
			oldSetOpenAITrio(h, &tokensTrio, &rules[i], resetGo)
		}
		if i := tightestOf(rules, policy.UnitRequests); i >= 0 {
			oldSetOpenAITrio(h, &requestsTrio, &rules[i], resetGo)
		}
	case azure:
		if i := tightest(rules, policy.Unit.CountsTokens); i >= 0 {
			oldSetOpenAITrio(h, &tokensTrio, &rules[i], resetSeconds)
		}
		if i := tightestOf(rules, policy.UnitRequests); i >= 0 {
			oldSetOpenAITrio(h, &requestsTrio, &rules[i], resetSeconds)
		}
	case anthropic:
		now := time.Now()
		for k := range anthropicKinds {
			kind := &anthropicKinds[k]
			i := tightestOf(rules, kind.unit)
			if i < 0 {
				continue
			}
			a := &rules[i]
			var b [32]byte
			setField(h, kind.limit, strconv.AppendInt(b[:0], a.Limit.Capacity, 10))
			setField(h, kind.remaining, strconv.AppendInt(b[:0], max(a.Status.Remaining, 0), 10))
			setField(h, kind.reset, now.Add(a.Status.Reset).UTC().Truncate(time.Second).Add(time.Second).AppendFormat(b[:0], time.RFC3339))
		}
	}
	var pick [maxRateLimitItems]int
	idx := listed(rules, &pick)
	var stack [512]byte
	buf := stack[:0]
	for i, j := range idx {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		a := &rules[j]
		buf = appendQuoted(buf, a.Rule.Name)
		buf = append(buf, ";q="...)
		buf = strconv.AppendInt(buf, a.Limit.Capacity, 10)
		buf = append(buf, ";w="...)
		buf = strconv.AppendInt(buf, ceilSeconds(window(a.Limit)), 10)
		buf = append(buf, `;llmguard-unit="`...)
		buf = append(buf, a.Rule.Unit.String()...)
		buf = append(buf, '"')
	}
	setField(h, rateLimitPolicyField, buf)
	buf = buf[:0]
	for i, j := range idx {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		a := &rules[j]
		buf = appendQuoted(buf, a.Rule.Name)
		buf = append(buf, ";r="...)
		buf = strconv.AppendInt(buf, max(a.Status.Remaining, 0), 10)
		buf = append(buf, ";t="...)
		buf = strconv.AppendInt(buf, ceilSeconds(a.Status.Reset), 10)
	}
	setField(h, rateLimitField, buf)
}

func oldSetOpenAITrio(h *fasthttp.ResponseHeader, names *openAITrio, a *meter.Applied, format resetFormat) {
	var b [32]byte
	setField(h, names.limit, strconv.AppendInt(b[:0], a.Limit.Capacity, 10))
	setField(h, names.remaining, strconv.AppendInt(b[:0], max(a.Status.Remaining, 0), 10))
	if format == resetSeconds {
		setField(h, names.reset, strconv.AppendInt(b[:0], ceilSeconds(a.Status.Reset), 10))
	} else {
		setField(h, names.reset, oldAppendGoDuration(b[:0], a.Status.Reset))
	}
}

func oldAppendGoDuration(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(b, "0s"...)
	}
	ms := ceilDiv(d, time.Millisecond)
	if ms < 1000 {
		return append(strconv.AppendInt(b, ms, 10), "ms"...)
	}
	if h := ms / 3_600_000; h > 0 {
		b = append(strconv.AppendInt(b, h, 10), 'h')
	}
	if ms >= 60_000 {
		b = append(strconv.AppendInt(b, ms/60_000%60, 10), 'm')
	}
	b = strconv.AppendInt(b, ms/1000%60, 10)
	if frac := ms % 1000; frac > 0 {
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return append(b, 's')
}

func oldSetRetryAfter(h *fasthttp.ResponseHeader, retry time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(retry), 1), 10))
	h.Set("retry-after-ms", strconv.FormatInt(max(ceilDiv(retry, time.Millisecond), 1), 10))
}

// limitDecisionRules are the rules of limitDecisions.
var limitDecisionRules = []policy.Rule{{Name: "user-tokens", Unit: policy.UnitTokens}, {Name: "global-rps", Unit: policy.UnitRequests},
	{Name: "tenant-usd", Unit: policy.UnitUSD}, {Name: "in", Unit: policy.UnitInputTokens}, {Name: "out \"odd\" é", Unit: policy.UnitOutputTokens}}

// limitDecisions are admissions to write the limit fields of: rules of
// every unit, full, drained, in debt, huge, with resets from nothing to
// the largest duration, and more rules than the fields list.
func limitDecisions() [][]meter.Applied {
	rs := limitDecisionRules
	tok, req, usd, in, out := &rs[0], &rs[1], &rs[2], &rs[3], &rs[4]
	limit := func(capacity, rate int64, per time.Duration) bucket.Limit {
		return bucket.Limit{Capacity: capacity, Rate: rate, Per: per}
	}
	applied := func(r *policy.Rule, l bucket.Limit, remaining int64, reset time.Duration) meter.Applied {
		return meter.Applied{Rule: r, Limit: l, Status: bucket.Status{Remaining: remaining, Reset: reset}}
	}
	var ds [][]meter.Applied
	for _, remaining := range []int64{0, 1, 9, 10, 99, 999_999_873, -5, math.MaxInt64, math.MinInt64} {
		for _, reset := range []time.Duration{0, 1, time.Millisecond, 999 * time.Millisecond, 1500 * time.Millisecond,
			90 * time.Second, 3*time.Hour + 2*time.Minute + 3500*time.Millisecond, math.MaxInt64} {
			ds = append(ds, []meter.Applied{
				applied(tok, limit(1_000_000_000, 1_000_000_000, time.Second), remaining, reset),
				applied(req, limit(60, 1, time.Second), min(remaining, 60), reset/2),
			})
		}
	}
	ds = append(ds, []meter.Applied{
		applied(tok, limit(20_000, 10_000, time.Minute), 12_345, 3*time.Second),
		applied(usd, limit(500_000_000, 1, 30*24*time.Hour), 123_456_789, 10*24*time.Hour),
		applied(req, limit(math.MaxInt64, math.MaxInt64, time.Nanosecond), 7, 0),
		applied(in, limit(1, 1, 365*24*time.Hour), 0, 365*24*time.Hour),
		applied(out, limit(100, 3, 7*time.Second), -100, time.Hour),
	})
	return ds
}

// TestLimitHeadersSameAsOld: the limit fields (each flavor's own, the IETF
// RateLimit-Policy and RateLimit, Retry-After and retry-after-ms) are
// byte for byte those the strconv formatting wrote, for every decision of
// limitDecisions, with the per-rule text cache (ietfItems) and without.
func TestLimitHeadersSameAsOld(t *testing.T) {
	cache := &ietfItems{rules: limitDecisionRules, items: make([]atomic.Pointer[ietfItem], len(limitDecisionRules))}
	for i, rules := range limitDecisions() {
		for _, f := range []Flavor{FlavorOpenAI, FlavorAzure, FlavorAnthropic} {
			for _, normalizing := range []bool{false, true} {
				items := cache
				if normalizing {
					items = nil
				}
				var got, want fasthttp.ResponseHeader
				got.DisableNormalizing()
				want.DisableNormalizing()
				if normalizing {
					got.EnableNormalizing()
					want.EnableNormalizing()
				}
				setLimitHeaders(&got, f, rules, items)
				oldSetLimitHeaders(&want, f, rules)
				retry := rules[0].Status.Reset
				setRetryAfter(&got, retry)
				oldSetRetryAfter(&want, retry)
				g, w := clockFree(got.Header()), clockFree(want.Header())
				if !bytes.Equal(g, w) {
					t.Errorf("decision %d, %v, normalizing %v:\n got %q\nwant %q", i, f, normalizing, g, w)
				}
			}
		}
	}
}

// clockFree is a header block without the lines read from the clock: Date
// and Anthropic's anthropic-ratelimit-*-reset instants.
func clockFree(h []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(h, []byte("\r\n")) {
		if bytes.HasPrefix(line, []byte("Date: ")) ||
			bytes.HasPrefix(line, []byte("anthropic-ratelimit-")) && bytes.Contains(line, []byte("-reset:")) {
			continue
		}
		out = append(out, line...)
	}
	return out
}
