package proxy

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// LimitsPath is the path, relative to an upstream (after its path_prefix),
// at which a caller reads its own limits: GET with the caller's own key, as
// for a proxied request (README, "Reading your own limits").
const LimitsPath = "/v1/llmguard/limits"

// LimitsReport is the body of GET /v1/llmguard/limits: every limit that
// applies to the caller's key, as the store holds it now. Amounts are in
// each limit's unit: requests, tokens, or integer micro-USD for usd.
type LimitsReport struct {
	// Model is the model the per-model limits were read for (the query's
	// model), "" when none was asked.
	Model string `json:"model,omitempty"`
	// Limits are the token buckets (rates).
	Limits []LimitState `json:"limits"`
	// Budgets are the calendar quotas.
	Budgets []BudgetState `json:"budgets"`
}

// LimitState is one rate limit (token bucket) that applies to the caller.
type LimitState struct {
	Name  string `json:"name"`
	Scope string `json:"scope"` // key, user, tenant or global
	Unit  string `json:"unit"`  // requests, tokens, input_tokens, output_tokens, usd (micro-USD)
	// Capacity is the burst, Rate the refill per PerMS milliseconds.
	Capacity int64 `json:"capacity"`
	Rate     int64 `json:"rate"`
	PerMS    int64 `json:"per_ms"`
	// Remaining is the bucket's level now (negative while in debt); ResetMS
	// the milliseconds until it is full, rounded up. Both absent for a
	// per-model limit when no model was asked (Model names the query).
	Remaining *int64 `json:"remaining,omitempty"`
	ResetMS   *int64 `json:"reset_ms,omitempty"`
	// PerModel: one bucket per model; read for the report's Model only.
	PerModel bool `json:"per_model,omitempty"`
	// Models and Paths are the limit's model and path globs (empty: any).
	Models []string `json:"models,omitempty"`
	Paths  []string `json:"paths,omitempty"`
	// OnLimit is fail or wait; MaxWaitMS the longest wait under wait.
	OnLimit   string `json:"on_limit"`
	MaxWaitMS int64  `json:"max_wait_ms,omitempty"`
	// Algorithm is sliding_window or fixed_window for a window counter
	// (Capacity = Rate units per window of PerMS), absent for a token
	// bucket and an in-flight limit (unit concurrent: Capacity requests in
	// flight; Rate and PerMS 0).
	Algorithm string `json:"algorithm,omitempty"`
	// Shadow: the limit is reported but never denies (limits[].shadow).
	Shadow bool `json:"shadow,omitempty"`
}

// BudgetState is one calendar quota that applies to the caller.
type BudgetState struct {
	Name   string `json:"name"`
	Scope  string `json:"scope"`
	Unit   string `json:"unit"`
	Period string `json:"period"` // day, week or month
	// Quota is the amount per period; Used the spend so far in this period
	// (settled spend plus reservations of requests in flight); Remaining
	// is Quota − Used (negative when reconciliation charged past it).
	Quota     int64  `json:"quota"`
	Used      *int64 `json:"used,omitempty"`
	Remaining *int64 `json:"remaining,omitempty"`
	// ResetMS is the milliseconds until the period ends, ResetsAt its end
	// (RFC 3339, UTC).
	ResetMS  int64    `json:"reset_ms"`
	ResetsAt string   `json:"resets_at"`
	PerModel bool     `json:"per_model,omitempty"`
	Models   []string `json:"models,omitempty"`
	Paths    []string `json:"paths,omitempty"`
}

// errLimitsMethod answers a request to LimitsPath that is not a GET.
var errLimitsMethod = apiError{status: fasthttp.StatusMethodNotAllowed, openAIType: "invalid_request_error", openAICode: "method_not_allowed",
	anthropicType: "invalid_request_error", message: "GET " + LimitsPath + " reports your limits; no other method is served there."}

// serveLimits answers GET LimitsPath for the identified caller x: the
// limits that apply to its key, read from the store with a take of zero
// cost (which takes nothing and reports each bucket's status), never
// forwarded. It names no key, user or tenant, and only the limits whose
// plan, tenant and user matchers fit the caller. ?model=<name> also reads
// the per-model limits' buckets of that model and leaves out the limits
// whose model globs do not fit it.
func (p *Proxy) serveLimits(ctx *fasthttp.RequestCtx, x *exchange) *refusal {
	if !ctx.IsGet() {
		ctx.Response.Header.Set("Allow", "GET")
		return &refusal{err: errLimitsMethod, outcome: meter.OutcomeInvalid}
	}
	pol := x.live.policy
	model := string(ctx.QueryArgs().Peek("model"))
	if len(model) > maxModelName {
		return &refusal{err: errModelName, outcome: meter.OutcomeInvalid}
	}
	var label string
	var names []string
	if model != "" {
		q := pol.Quote(model, "")
		label, names = q.Label, []string{model, q.Label, q.AliasOf}
	}
	now := p.opt.Now()
	var rules []*policy.Rule
	var items []bucket.Item
	var spans [][2]int // per rule, its items' range; [0,0] when not read
	all := pol.Rules()
	for i := range all {
		r := &all[i]
		if !r.MatchesPrincipal(x.principal) || model != "" && !matchesAnyModel(r, names) {
			continue
		}
		rules = append(rules, r)
		from := len(items)
		if !r.PerModel || model != "" {
			limit := r.LimitAt(now)
			if r.Shards > 1 {
				keys := r.ShardKeys(x.principal, label)
				for s := range r.Shards {
					items = append(items, bucket.Item{Key: keys.Key(s), Limit: bucket.ShardLimit(limit, r.Shards, s)})
				}
			} else {
				items = append(items, bucket.Item{Key: r.ModelKey(x.principal, label), Limit: limit})
			}
		}
		spans = append(spans, [2]int{from, len(items)})
	}
	var statuses []bucket.Status
	if len(items) > 0 {
		d, err := p.opt.Store.Take(context.Background(), "", items)
		if err != nil {
			p.log.Warn("limits read-out: store unavailable", "err", err, "request_id", x.id)
			var b [24]byte
			ctx.Response.Header.SetBytesV("Retry-After", strconv.AppendInt(b[:0], int64((p.opt.UnavailableRetry+time.Second-1)/time.Second), 10))
			return &refusal{err: apiError{status: fasthttp.StatusServiceUnavailable, openAIType: "api_error", openAICode: "limiter_unavailable",
				anthropicType: "api_error", message: "llmguard could not read your limits: its store is unavailable."}, outcome: meter.OutcomeFailClosed}
		}
		statuses = d.Buckets
	}
	rep := LimitsReport{Model: model, Limits: []LimitState{}, Budgets: []BudgetState{}}
	for i, r := range rules {
		st, read := sumStatus(statuses, spans[i])
		if r.IsQuota() {
			limit := r.LimitAt(now)
			b := BudgetState{Name: r.Name, Scope: r.Scope.String(), Unit: r.Unit.String(), Period: r.Period.String(),
				Quota: limit.Capacity, ResetMS: ceilMS(limit.WindowEnd.Sub(now)), ResetsAt: limit.WindowEnd.UTC().Format(time.RFC3339),
				PerModel: r.PerModel, Models: r.ModelGlobs(), Paths: r.PathGlobs()}
			if read {
				used := limit.Capacity - st.Remaining
				b.Used, b.Remaining = &used, &st.Remaining
			}
			rep.Budgets = append(rep.Budgets, b)
			continue
		}
		limit := r.LimitAt(now)
		l := LimitState{Name: r.Name, Scope: r.Scope.String(), Unit: r.Unit.String(), Capacity: limit.Capacity, Rate: limit.Rate,
			PerMS: limit.Per.Milliseconds(), PerModel: r.PerModel, Models: r.ModelGlobs(), Paths: r.PathGlobs(), OnLimit: spec.OnLimitFail.String()}
		if r.MaxWait > 0 {
			l.OnLimit, l.MaxWaitMS = spec.OnLimitWait.String(), ceilMS(r.MaxWait)
		}
		if whole := r.Limit.Per; !limit.IsWindow() && !limit.Concurrent && whole > 0 && limit.Per > whole && limit.Per%whole == 0 {
			// A region's share keeps its rate whole by a longer period
			// (1000 a minute × 0.6 is 3000 per 5 minutes): shown per the
			// configured period again when that is exact (600 a minute).
			if k := int64(limit.Per / whole); limit.Rate%k == 0 {
				l.Rate, l.PerMS = limit.Rate/k, whole.Milliseconds()
			}
		}
		switch {
		case limit.IsWindow():
			l.Algorithm, l.Rate = limit.Algorithm.String(), limit.Capacity
		case limit.Concurrent:
			l.PerMS = 0 // Per is the slot lease, not a period
		}
		l.Shadow = r.Shadow
		if read {
			reset := ceilMS(st.Reset)
			l.Remaining, l.ResetMS = &st.Remaining, &reset
		}
		rep.Limits = append(rep.Limits, l)
	}
	b, err := json.Marshal(rep)
	if err != nil { // plain values: cannot fail
		return &refusal{err: errLimiter, outcome: meter.OutcomeInternalError}
	}
	setField(&ctx.Response.Header, requestIDField, []byte(x.id))
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
	p.count(x, meter.OutcomeAllowed, "")
	return nil
}

// matchesAnyModel reports whether r's model globs fit one of names (true
// when r has none).
func matchesAnyModel(r *policy.Rule, names []string) bool {
	for _, n := range names {
		if n != "" && r.MatchesModel(n) {
			return true
		}
	}
	return false
}

// sumStatus is the status of a rule read from statuses[span]: its one
// bucket's, or for a sharded rule the shards' remaining added up and the
// longest reset; read is false when the rule was not read.
func sumStatus(statuses []bucket.Status, span [2]int) (st bucket.Status, read bool) {
	if span[0] == span[1] {
		return st, false
	}
	for _, s := range statuses[span[0]:span[1]] {
		st.Remaining += s.Remaining
		st.Reset = max(st.Reset, s.Reset)
	}
	return st, true
}

// ceilMS is d in whole milliseconds, rounded up; 0 for d <= 0.
func ceilMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return ceilDiv(d, time.Millisecond)
}
