package proxy

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// maxRateLimitItems is the most items the RateLimit-Policy and RateLimit
// fields list. A request under more rules gets the tightest of them (the
// least remaining as a fraction of capacity), the denying one always among
// them on a 429, so that its headers stay a few hundred bytes when a
// thousand rules apply (a client or intermediary refuses a response whose
// headers pass its limit: 8 to 16 KB in many HTTP clients and proxies).
const maxRateLimitItems = 4

// setLimitHeaders writes the caller-contract headers of DESIGN.md §6 from
// the statuses seen at admission:
//
//   - the flavor's own rate-limit headers (its dialect's limitHeaders);
//   - the IETF RateLimit-Policy and RateLimit fields
//     (draft-ietf-httpapi-ratelimit-headers), one item per applied rule up
//     to maxRateLimitItems (see listed), with llmguard-unit naming the unit
//     of q and r.
//
// Each replaces every field of its name the answer holds, in any letter
// case (the upstream's own: see limitFields.writeTo). The values are built
// in a pooled buffer: no allocation for up to maxRateLimitItems rules of
// ordinary names. h must not normalise its field names
// (ResponseHeader.DisableNormalizing, as on every answer llmguard writes):
// the names are set as spelled (SetCanonical).
func setLimitHeaders(h *fasthttp.ResponseHeader, f Flavor, rules []meter.Applied, items *ietfItems) {
	writeLimitHeaders(h, dialectOf(f), rules, items)
}

// setUpstreamRefusalHeaders writes the caller-contract headers on an
// upstream's own 429 relayed to its caller: the IETF RateLimit-Policy and
// RateLimit fields, as setLimitHeaders writes them (llmguard's
// llmguard-unit names them its own), but not the flavor's rate-limit
// fields (x-ratelimit-*, anthropic-ratelimit-*). The upstream's limit
// refused the call, and its own fields of those names, passed as it sent
// them, say when that limit has room again; llmguard's would say its
// buckets have room (remaining near the capacity, a reset of a few ms),
// and a client that paces itself by them would send again at once into
// the provider's limit. Retry-After and retry-after-ms, which the OpenAI
// and Anthropic SDKs read, are the upstream's in either case.
func setUpstreamRefusalHeaders(h *fasthttp.ResponseHeader, rules []meter.Applied, items *ietfItems) {
	writeLimitHeaders(h, nil, rules, items)
}

// writeLimitHeaders is setLimitHeaders with the flavor's dialect d (nil:
// the IETF fields alone).
func writeLimitHeaders(h *fasthttp.ResponseHeader, d dialect, rules []meter.Applied, items *ietfItems) {
	if len(rules) == 0 {
		return
	}
	fs := limitFieldsPool.Get().(*limitFields)
	fs.start(rules, items)
	if d != nil {
		d.limitHeaders(fs, rules)
	}
	setIETFHeaders(fs, rules, items)
	fs.writeTo(h)
	fs.rules, fs.texts = nil, [maxRateLimitItems]*ietfItem{} // the pool keeps no rule
	if cap(fs.buf) <= limitFieldsKeep {
		limitFieldsPool.Put(fs)
	}
}

// limitFieldsPool keeps the limitFields of setLimitHeaders: passed to a
// dialect through its interface, one on the stack would be moved to the
// heap, two allocations an answer.
var limitFieldsPool = sync.Pool{New: func() any { return &limitFields{buf: make([]byte, 0, 768)} }}

// limitFieldsKeep is the largest buffer a pooled limitFields keeps: the
// values of a few thousand bytes that rules of very long names make go to
// the collector instead.
const limitFieldsKeep = 4 << 10

// maxLimitFields is the most fields setLimitHeaders writes on one answer:
// Anthropic's twelve (four units, three fields each) and the two IETF ones.
const maxLimitFields = 14

// limitFields gathers the fields setLimitHeaders writes on one answer,
// names (spelled as written, below 64 bytes) and values, the values in buf,
// so that writeTo removes every field of those names the answer already
// holds in another letter case before setting them.
type limitFields struct {
	n     int
	names [maxLimitFields][]byte
	ends  [maxLimitFields]int // the end of value i in buf; value i starts at ends[i-1] (0 for the first)
	buf   []byte

	// rules are the answer's rules; for an answer of at most
	// maxRateLimitItems rules (every one of them listed in the RateLimit
	// fields), texts[i] is rules[i]'s cached text (ietfItems.of; nil
	// without a cache or for a rule not of its policy), and remaining[i]
	// where rules[i]'s remaining was written in buf (to 0: not yet). A
	// rule's limit and remaining are written once or twice an answer (a
	// flavor's trio, then RateLimit's r=): the second is copied, and a
	// limit comes as cached text (about 100 instructions a number of ten
	// digits formatted, 20 copied).
	rules     []meter.Applied
	texts     [maxRateLimitItems]*ietfItem
	remaining [maxRateLimitItems]struct{ from, to int }
}

// start readies f for an answer of rules, with the cache items (nil: none).
func (f *limitFields) start(rules []meter.Applied, items *ietfItems) {
	f.n, f.buf, f.rules = 0, f.buf[:0], rules
	f.remaining = [maxRateLimitItems]struct{ from, to int }{}
	f.texts = [maxRateLimitItems]*ietfItem{}
	if len(rules) <= maxRateLimitItems && items != nil {
		for i := range rules {
			f.texts[i] = items.of(&rules[i])
		}
	}
}

// appendCapacity appends rule i's capacity (its Limit.Capacity) to f.buf:
// its cached text when there is one.
func (f *limitFields) appendCapacity(i int) {
	if i < maxRateLimitItems && f.texts[i] != nil {
		f.buf = append(f.buf, f.texts[i].capacity...)
		return
	}
	f.buf = appendInt(f.buf, f.rules[i].Limit.Capacity)
}

// appendRemaining appends rule i's remaining (its Status.Remaining, 0
// for a bucket in debt) to f.buf: a copy of the text written for it
// before on this answer, when there is one.
func (f *limitFields) appendRemaining(i int) {
	if i >= maxRateLimitItems {
		f.buf = appendInt(f.buf, max(f.rules[i].Status.Remaining, 0))
		return
	}
	if r := f.remaining[i]; r.to > 0 {
		f.buf = append(f.buf, f.buf[r.from:r.to]...)
		return
	}
	from := len(f.buf)
	f.buf = appendInt(f.buf, max(f.rules[i].Status.Remaining, 0))
	f.remaining[i].from, f.remaining[i].to = from, len(f.buf)
}

// add records the field name with value (copied into f.buf).
func (f *limitFields) add(name, value []byte) {
	f.buf = append(f.buf, value...)
	f.commit(name)
}

// commit records the field name whose value its caller appended to f.buf
// after the last field's (the value is f.buf from there to its end).
// Fields past maxLimitFields are dropped, their value with them; none of
// the dialects writes that many.
func (f *limitFields) commit(name []byte) {
	if f.n == maxLimitFields {
		f.buf = f.buf[:f.ends[f.n-1]]
		return
	}
	f.names[f.n], f.ends[f.n] = name, len(f.buf)
	f.n++
}

// value returns the value of field i.
func (f *limitFields) value(i int) []byte {
	start := 0
	if i > 0 {
		start = f.ends[i-1]
	}
	return f.buf[start:f.ends[i]]
}

// writeTo sets f's fields on h, an answer whose names are not normalised
// (ResponseHeader.DisableNormalizing, as on every answer llmguard writes).
// A field of h with one of f's names spelled in another letter case goes
// first: the upstream's own x-ratelimit-*, anthropic-ratelimit-* or
// RateLimit fields (the gateway key's figures) would otherwise reach the
// caller beside llmguard's under the same field name (RFC 9110 §5.1: names
// are case-insensitive), which fasthttp's SetCanonical, comparing bytes,
// kept when spelled "X-RateLimit-Remaining-Tokens"
// (TestUpstreamLimitFieldsReplaced). One walk over h's fields finds them
// (a Del only for one found); SetCanonical then replaces a field spelled
// as llmguard spells it in place, or adds the field.
func (f *limitFields) writeTo(h *fasthttp.ResponseHeader) {
	var lens uint64
	for i := range f.n {
		lens |= 1 << (len(f.names[i]) & 63)
	}
	var delBuf [maxLimitFields][]byte
	del := delBuf[:0]
	for _, k := range h.PeekKeys() {
		if len(k) >= 64 || lens&(1<<len(k)) == 0 {
			continue
		}
		for i := range f.n {
			if len(k) == len(f.names[i]) && string(k) != string(f.names[i]) && bytes.EqualFold(k, f.names[i]) {
				del = append(del, append([]byte(nil), k...)) // copied: k moves as fields go
				break
			}
		}
	}
	for _, k := range del {
		h.DelBytes(k)
	}
	for i := range f.n {
		h.SetCanonical(f.names[i], f.value(i))
	}
}

// tightestOf returns the index of the rule of unit u that denied the
// request, if one of that unit did, else the one with the least remaining,
// the earliest among equals, or -1: tightest for one unit, without a call
// per rule.
func tightestOf(rules []meter.Applied, u policy.Unit) int {
	best := -1
	for i := range rules {
		if rules[i].Rule.Unit == u && (best < 0 || tighter(&rules[i], &rules[best])) {
			best = i
		}
	}
	return best
}

// tightest returns the index of the rule whose unit match accepts that
// denied the request, if one did, else the one with the least remaining,
// or -1.
func tightest(rules []meter.Applied, match func(policy.Unit) bool) int {
	best := -1
	for i := range rules {
		if match(rules[i].Rule.Unit) && (best < 0 || tighter(&rules[i], &rules[best])) {
			best = i
		}
	}
	return best
}

// tighter reports whether a flavor's rate-limit fields describe a rather
// than b, the earlier of the two: the rule that denied (its wait is the
// 429's Retry-After, and its message names it), else the one with less
// remaining.
func tighter(a, b *meter.Applied) bool {
	if a.Denied != b.Denied {
		return a.Denied
	}
	return a.Status.Remaining < b.Status.Remaining
}

// listed returns the positions in rules of the rules the RateLimit fields
// list, in rules' order (narrowest scope first): every rule when there are
// at most maxRateLimitItems, else the denying rule, if any, and the
// tightest others: those with the least remaining as a fraction of their
// capacity, the earlier first among equals.
func listed(rules []meter.Applied, dst *[maxRateLimitItems]int) []int {
	if len(rules) <= maxRateLimitItems {
		for i := range rules {
			dst[i] = i
		}
		return dst[:len(rules)]
	}
	// before reports whether rule i is to be listed rather than rule j.
	before := func(i, j int) bool {
		a, b := &rules[i], &rules[j]
		if a.Denied != b.Denied {
			return a.Denied
		}
		fa, fb := fraction(a), fraction(b)
		if fa != fb {
			return fa < fb
		}
		return i < j
	}
	// Insertion into the few best so far.
	n := 0
	for i := range rules {
		if n == maxRateLimitItems && !before(i, dst[n-1]) {
			continue
		}
		k := min(n, maxRateLimitItems-1)
		for k > 0 && before(i, dst[k-1]) {
			dst[k] = dst[k-1]
			k--
		}
		dst[k] = i
		n = min(n+1, maxRateLimitItems)
	}
	out := dst[:n]
	slices.Sort(out)
	return out
}

// fraction is what remains of a rule's bucket as a fraction of its
// capacity: 1 full, 0 empty, below 0 in debt.
func fraction(a *meter.Applied) float64 {
	if a.Limit.Capacity <= 0 {
		return 0
	}
	return float64(a.Status.Remaining) / float64(a.Limit.Capacity)
}

// setIETFHeaders adds the RateLimit-Policy and RateLimit fields of the
// rules listed (see listed) to fs, an answer's fields for all (started:
// limitFields.start).
func setIETFHeaders(fs *limitFields, all []meter.Applied, items *ietfItems) {
	var pick [maxRateLimitItems]int
	idx := listed(all, &pick)
	texts := fs.texts // every rule's, when all are listed
	if len(all) > maxRateLimitItems {
		for i, j := range idx {
			texts[i] = items.of(&all[j])
		}
	}
	writeIETFHeaders(fs, idx, texts[:len(idx)])
}

// writeIETFHeaders adds the RateLimit-Policy and RateLimit fields of
// fs.rules[idx[i]] to fs, texts[i] being that rule's cached text
// (ietfItems.of), or nil to build it here. Each value is built at the end
// of fs.buf (commit).
func writeIETFHeaders(fs *limitFields, idx []int, texts []*ietfItem) {
	for i, j := range idx {
		if i > 0 {
			fs.buf = append(fs.buf, ", "...)
		}
		if texts[i] != nil {
			fs.buf = append(fs.buf, texts[i].policy...)
		} else {
			fs.buf = appendPolicyItem(fs.buf, &fs.rules[j])
		}
	}
	fs.commit(rateLimitPolicyField)
	for i, j := range idx {
		if i > 0 {
			fs.buf = append(fs.buf, ", "...)
		}
		if texts[i] != nil {
			fs.buf = append(fs.buf, texts[i].rate...)
		} else {
			fs.buf = append(appendQuoted(fs.buf, fs.rules[j].Rule.Name), ";r="...)
		}
		fs.appendRemaining(j)
		fs.buf = append(fs.buf, ";t="...)
		fs.buf = appendInt(fs.buf, ceilSeconds(fs.rules[j].Status.Reset))
	}
	fs.commit(rateLimitField)
}

// rateLimitPolicyField and rateLimitField are the names of the IETF fields
// (draft-ietf-httpapi-ratelimit-headers), spelled as they are written.
var (
	rateLimitPolicyField = []byte("RateLimit-Policy")
	rateLimitField       = []byte("RateLimit")
)

// requestIDField is the name of the field naming the request on every
// answer, spelled as it is written.
var requestIDField = []byte("x-llmguard-request-id")

// setField sets the field name of h, an answer whose header names are not
// normalised (ResponseHeader.DisableNormalizing: every answer llmguard
// writes), to value. name must be a valid field name spelled as it is to be
// written, as llmguard's own are: fasthttp's SetCanonical takes it as it is, where Set and
// SetBytesV copy and check every byte of it first (about 200 instructions
// a field; an answer sets a dozen).
func setField(h *fasthttp.ResponseHeader, name, value []byte) { h.SetCanonical(name, value) }

// appendQuoted appends s quoted, as strconv.AppendQuote does; a rule name
// of printable ASCII without a quote or backslash, as names are, is copied
// between quotes as it is, without AppendQuote's work per rune.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.AppendQuote(b, s)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// window is the w of a RateLimit-Policy item: the time a token bucket takes
// to refill from empty, a quota's period length, or a window counter's
// window (Per).
func window(l bucket.Limit) time.Duration {
	if l.Concurrent { // no window: a slot frees when a request ends
		return bucket.SlotRetry
	}
	if l.IsQuota() {
		return l.WindowEnd.Sub(l.WindowStart)
	}
	if l.IsWindow() {
		return l.Per
	}
	return fillTime(l, 0)
}

// fillTime is how long a bucket of limit l takes to refill from level to
// full, rounded up to the nanosecond, computed exactly in 128 bits.
func fillTime(l bucket.Limit, level int64) time.Duration {
	missing := l.Capacity - level
	if missing <= 0 || l.Rate <= 0 || l.Per <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(missing), uint64(l.Per))
	if hi >= uint64(l.Rate) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(l.Rate))
	if r != 0 {
		q++
	}
	return time.Duration(min(q, math.MaxInt64))
}

// ceilSeconds rounds d up to whole seconds; 0 for d <= 0. It divides
// before it rounds: d + 1s - 1ns overflows for d near math.MaxInt64 (a
// refill of more than 292 years, which fillTime saturates to).
func ceilSeconds(d time.Duration) int64 { return ceilDiv(d, time.Second) }

// ceilDiv is d / unit rounded up, without overflow; 0 for d <= 0.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := int64(d / unit)
	if d%unit != 0 {
		q++
	}
	return q
}

// appendGoDuration appends goDuration(d) to b without allocating: d rounded
// up to the millisecond, in time.Duration.String's format ("250ms",
// "1m30s", "1h2m3.5s").
func appendGoDuration(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(b, "0s"...)
	}
	ms := ceilDiv(d, time.Millisecond)
	if ms < 1000 {
		return append(appendInt(b, ms), "ms"...)
	}
	if h := ms / 3_600_000; h > 0 {
		b = append(appendInt(b, h), 'h')
	}
	if ms >= 60_000 {
		b = append(appendInt(b, ms/60_000%60), 'm')
	}
	b = appendInt(b, ms/1000%60)
	if frac := ms % 1000; frac > 0 {
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return append(b, 's')
}

// goDuration formats d the way OpenAI's x-ratelimit-reset-* headers do:
// a Go duration string such as "1m30s" or "250ms", rounded up to the
// millisecond.
func goDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
}

// denial is what denied needs to know of a refused admission besides its
// rules.
type denial struct {
	// tooLarge: the cost exceeds the denying limit's capacity
	// (meter.TooLarge), so waiting cannot help.
	tooLarge bool
	// retry is how long until the denying limit can admit the request.
	retry time.Duration
	// fallback: the store was unavailable and this node's fallback share
	// of the limit denied (meter.Exchange.FromFallback).
	fallback bool
	// outputField names the request's output cap as its API spells it
	// (weigher.Kind.OutputField), for a request too large; "" when the
	// request has none.
	outputField string
	// outputDefaulted: the request names no output maximum, so its cost
	// holds the model's output reservation (weigher.Estimate.OutputDefaulted:
	// default_max_output_tokens or a learned one), which the caller did not
	// write and may not know of (trial7: a legacy completions caller read
	// "requested 514 tokens" for a 2-token prompt, told to lower a
	// max_tokens it never sent).
	outputDefaulted bool
	// hiddenModel, when not "", is the model (as priced) whose largest
	// input the estimate reserved for context the body does not hold
	// (weigher.Estimate.ServerContext, x-llmguard-estimate: partial).
	hiddenModel string
}

// denied sets the headers of a denied request's answer and returns its
// error, for Proxy.answer to write: 429 with Retry-After (whole seconds,
// rounded up, at least 1) and retry-after-ms (the same instant, in ms,
// rounded up, at least 1), or, when the cost exceeds the capacity, 429
// with x-should-retry: false and no Retry-After, since waiting cannot
// help. A budget (quota) denial carries both too, with x-should-retry:
// false, so that the SDKs, which skip a retry so marked, do not wait out
// its period. The body names the limit, the amount requested and the
// wait, in the caller's flavor; for a request too large whose estimate
// reserved hidden context, it says so and names the setting that bounds
// that reservation; for a request that names no output maximum
// (d.outputDefaulted), that the model's default output was reserved and
// which field bounds it; for a denial by this node's fallback share while the
// store is unavailable (d.fallback), it says so.
func denied(ctx *fasthttp.RequestCtx, f Flavor, rules []meter.Applied, items *ietfItems, deny int, d denial) apiError {
	retry := d.retry
	a := rules[deny]
	unit := a.Rule.Unit.String()
	// amount is n of the rule's units as the message gives it: a bare
	// count beside the unit named once ("on tokens: limit 1000"), dollars
	// for a USD rule (its units are micro-USD: "$0.034296"; trial3 found
	// "34296 of 50000 micro-USD" hard to check against a budget set in
	// dollars); amountOf names the unit too ("1200 tokens").
	amount, amountOf := func(n int64) string { return strconv.FormatInt(n, 10) }, a.Rule.Unit.Amount
	if a.Rule.Unit == policy.UnitUSD {
		unit, amount = "USD", a.Rule.Unit.Amount
	}
	typ := "tokens"
	if a.Rule.Unit.PerCall() {
		typ = "requests"
	}
	e := apiError{status: fasthttp.StatusTooManyRequests, openAIType: typ, openAICode: "rate_limit_exceeded", anthropicType: "rate_limit_error"}
	switch {
	case d.tooLarge:
		e.message = fmt.Sprintf("Request too large for limit %s (%s scope): requested %s, but the limit holds at most %s. Waiting will not help: ",
			a.Rule.Name, a.Rule.Scope, amountOf(a.Reserved), amountOf(a.Limit.Capacity))
		switch {
		case d.hiddenModel == "" && d.outputField == "":
			e.message += "reduce the request's input."
		case d.hiddenModel == "" && d.outputDefaulted && countsOutput(a.Rule.Unit):
			e.message += "reduce the request: this request " + defaultedOutput(d.outputField) + "; set " + d.outputField + " to the output you need, or shorten the prompt."
		case d.hiddenModel == "":
			// The caller's own field (trial3: a Responses caller was told
			// to lower max_tokens, which that API does not take).
			e.message += "reduce the request: lower " + d.outputField + ", or shorten the prompt."
		default:
			e.message += hiddenContextAdvice(d.hiddenModel)
		}
		if a.Limit.IsQuota() {
			e.openAIType, e.openAICode = "insufficient_quota", "insufficient_quota"
		}
		ctx.Response.Header.Set("x-should-retry", "false")
	case a.Limit.Concurrent:
		inFlight, noun := a.Limit.Capacity-max(a.Status.Remaining, 0), "requests"
		if inFlight == 1 {
			noun = "request"
		}
		e.message = fmt.Sprintf("Concurrency limit reached for limit %s (%s scope): %d %s in flight, the most allowed at once. Please try again in %s, or when one of your requests ends.",
			a.Rule.Name, a.Rule.Scope, inFlight, noun, goDuration(retry))
		setRetryAfter(&ctx.Response.Header, retry)
	case a.Limit.IsQuota():
		// A budget spent until its period ends (DESIGN.md §6): OpenAI's
		// insufficient_quota, and x-should-retry: false so that the SDKs do
		// not retry for days.
		e.openAIType, e.openAICode = "insufficient_quota", "insufficient_quota"
		// The instant is this budget's period end, and so is the wait
		// given beside it: its Status.Reset, on the store's clock. The
		// request's wait (retry, Retry-After) is the longest among its
		// denying limits, and the stores name the limit that waits
		// longest (trial9: a user's daily budget was named with "resets
		// at 00:00Z (in 623h9m)", the wait of the tenant's monthly budget
		// that denied the same request); should the two still differ (a
		// sharded limit's tries), the longer wait is said apart.
		own := min(a.Status.Reset, retry)
		if own <= 0 {
			own = retry
		}
		e.message = fmt.Sprintf("Budget %s (%s scope) cannot cover this request this %s: %s of %s used, and this request reserves %s. It resets at %s (in %s).",
			a.Rule.Name, a.Rule.Scope, a.Rule.Period, amount(a.Limit.Capacity-a.Status.Remaining), amountOf(a.Limit.Capacity), amount(a.Reserved),
			resetAt(a.Limit.WindowEnd), goDuration(own))
		if retry-own > time.Second {
			e.message += " Another of its limits denies this request for longer: it can be admitted in " + goDuration(retry) + " at the earliest."
		}
		ctx.Response.Header.Set("x-should-retry", "false")
		setRetryAfter(&ctx.Response.Header, retry)
	case a.Limit.IsWindow():
		e.message = fmt.Sprintf("Rate limit reached for limit %s (%s scope) on %s: limit %s per %s (%s), remaining %s, requested %s. Please try again in %s.",
			a.Rule.Name, a.Rule.Scope, unit, amount(a.Limit.Capacity), a.Limit.Per, a.Limit.Algorithm, remainingOf(a.Status.Remaining, amount, amountOf), amount(a.Reserved), goDuration(retry))
		setRetryAfter(&ctx.Response.Header, retry)
	default:
		e.message = fmt.Sprintf("Rate limit reached for limit %s (%s scope) on %s: limit %s per %s, remaining %s, requested %s. Please try again in %s.",
			a.Rule.Name, a.Rule.Scope, unit, amount(a.Limit.Rate), a.Limit.Per, remainingOf(a.Status.Remaining, amount, amountOf), amount(a.Reserved), goDuration(retry))
		setRetryAfter(&ctx.Response.Header, retry)
	}
	if d.outputDefaulted && !d.tooLarge && !a.Limit.Concurrent && d.hiddenModel == "" && d.outputField != "" && countsOutput(a.Rule.Unit) {
		e.message += " This request " + defaultedOutput(d.outputField) + "; set " + d.outputField + " to the output you need to reserve less."
	}
	if d.fallback {
		// The figures above are the configured limit's; what denied is
		// this node's share of it (trial3: "limit 1000, remaining 7"
		// after some 500 tokens, with nothing said of the outage).
		e.message += " llmguard's limit store is unavailable: until it answers again, each llmguard node enforces its own share of this limit (the limit ÷ store.nodes)."
	}
	ctx.Response.Header.Set("x-llmguard-limit", a.Rule.Name)
	setLimitHeaders(&ctx.Response.Header, f, rules, items)
	return e
}

// remainingOf is a denying bucket's level as its 429 message gives it:
// amount(level), and a level below zero (a bucket in debt: earlier calls
// settled above what they reserved) as amount(0) with the debt named by
// amountOf, so that a wait far longer than the request's own cost reads as
// what it is (trial11: "remaining 0, requested 18. Please try again in
// 31m32s" from a 1000-token-an-hour bucket 508 tokens in debt).
func remainingOf(level int64, amount, amountOf func(int64) string) string {
	if level >= 0 {
		return amount(level)
	}
	return amount(0) + " (" + amountOf(-level) + " in debt: earlier calls used more than they reserved)"
}

// defaultedOutput says ("sets no …, so …", after "this request"), for a
// request that names no output maximum (its
// API's field is field, weigher.Kind.OutputField), what was reserved in
// its place: the model's output reservation, the config's
// default_max_output_tokens (or, with output_reservation.learn, the
// learned one), not a limit of the upstream's.
func defaultedOutput(field string) string {
	return "sets no " + field + ", so llmguard reserved the model's default output for it (default_max_output_tokens in its config, or a learned reservation)"
}

// countsOutput reports whether a rule of unit u counts a request's output
// (tokens, output_tokens, usd), so that an output reservation is part of
// what it was asked for.
func countsOutput(u policy.Unit) bool {
	return u == policy.UnitTokens || u == policy.UnitOutputTokens || u == policy.UnitUSD
}

// setRetryAfter sets Retry-After (whole seconds, rounded up, at least 1)
// and retry-after-ms (milliseconds, rounded up, at least 1) to the same
// wait. The numbers are formatted into a stack buffer (strconv.AppendInt)
// and copied into h, which sets them as Set does.
func setRetryAfter(h *fasthttp.ResponseHeader, retry time.Duration) {
	var b [24]byte
	h.SetBytesV("Retry-After", strconv.AppendInt(b[:0], max(ceilSeconds(retry), 1), 10))
	h.SetBytesV("retry-after-ms", strconv.AppendInt(b[:0], max(ceilDiv(retry, time.Millisecond), 1), 10))
}

// hiddenContextAdvice ends the message of a request too large whose
// estimate reserved model's largest input for context the body does not
// hold: most of what it requested is that reservation, which no smaller
// max_tokens or prompt removes.
func hiddenContextAdvice(model string) string {
	return "most of this is the input reserved for context the request does not carry (x-llmguard-estimate: partial: " +
		"previous_response_id, a conversation, a stored file or prompt, or a tool the upstream runs itself, such as web search), " +
		"which llmguard reserves at model " + model + "'s largest input and refunds once the usage is known. " +
		"Lower models." + model + ".max_input_tokens in llmguard's config (or default_max_input_tokens, for a model without it) " +
		"to reserve less, or raise the limit."
}

// unavailable sets the headers of the answer to a request that a
// fail-closed limit cannot judge while the store is unavailable and returns
// its error, for Proxy.answer to write: 503 with Retry-After (the breaker's
// open interval, whole seconds) in the caller's flavor. The client is not at
// fault, so it is never a 429 (DESIGN.md §6).
func unavailable(ctx *fasthttp.RequestCtx, r *policy.Rule, retry time.Duration) apiError {
	var b [24]byte
	ctx.Response.Header.SetBytesV("Retry-After", strconv.AppendInt(b[:0], max(ceilSeconds(retry), 1), 10))
	ctx.Response.Header.Set("x-llmguard-limit", r.Name)
	return apiError{status: fasthttp.StatusServiceUnavailable, openAIType: "api_error", openAICode: "limiter_unavailable",
		anthropicType: "overloaded_error",
		message:       fmt.Sprintf("Limiter unavailable: the store behind limit %s cannot be reached and the limit fails closed. Please retry shortly.", r.Name),
	}
}

// resetAt is a budget's period end as its 429 message gives it: RFC 3339 in
// the budget's own time zone (config timezone:), with its offset and IANA
// name when that zone is not UTC, as "2026-12-07T00:00:00+01:00
// (Europe/Paris)", so the caller reads the midnight the budget resets at
// (trial11: a Europe/Paris budget said 23:00Z); a UTC budget reads
// "2026-12-07T00:00:00Z".
func resetAt(end time.Time) string {
	s := end.Format(time.RFC3339)
	if loc := end.Location(); loc != time.UTC && loc.String() != "UTC" && loc.String() != "Local" {
		s += " (" + loc.String() + ")"
	}
	return s
}
