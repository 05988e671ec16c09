package meter

import (
	"context"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// A shadow rule (config limits[].shadow) is evaluated and reported but
// never denies. Its buckets are taken apart from the real rules', in a
// take of their own under the request id plus ShadowSuffix, and only once
// the real rules admitted: so a shadow rule cannot change whether a request
// is admitted, nor what the real buckets hold, and a request the real
// rules deny spends nothing from a shadow bucket. A shadow bucket that
// cannot pay reports "would deny" (Applied.Denied, the metric, a log line)
// and takes nothing: it never goes into debt at admission, so its level
// shows what the limit would hold had it been enforced for the requests it
// would have admitted. Reconciliation applies to the shadow buckets that
// were taken as to the real ones, under the shadow id.

// ShadowSuffix is added to a request id to name its shadow take and
// reconciliation, apart from its real ones (their markers, and an
// in-flight slot's holder, differ).
const ShadowSuffix = "/shadow"

// Decisions of a shadow rule, the values of shadow_decisions_total's
// decision label.
const (
	ShadowPass      = "pass"
	ShadowWouldDeny = "would_deny"
	ShadowError     = "error"
)

// Shadow are the shadow rules that applied to an admitted request, with
// their reservations and statuses: Denied set on those that would have
// denied it, Untaken on those whose bucket took nothing (would deny, or
// the store failed). Empty when none applied, or the request was refused
// (a refused request is never taken from a shadow bucket) or admitted
// while the store was unavailable. The caller must not change them.
func (x *Exchange) Shadow() []Applied { return x.shadow }

// splitShadow returns the real rules and the shadow rules of rules, each in
// their order. Without shadow rules (the usual case) it returns rules
// itself.
func splitShadow(rules []*policy.Rule) (real, shadow []*policy.Rule) {
	n := 0
	for _, r := range rules {
		if r.Shadow {
			n++
		}
	}
	if n == 0 {
		return rules, nil
	}
	real = make([]*policy.Rule, 0, len(rules)-n)
	shadow = make([]*policy.Rule, 0, n)
	for _, r := range rules {
		if r.Shadow {
			shadow = append(shadow, r)
		} else {
			real = append(real, r)
		}
	}
	return real, shadow
}

// shadowID is the request id of x's shadow take and reconciliation; empty
// when x has none.
func (x *Exchange) shadowID() string {
	if x.req.ID == "" {
		return ""
	}
	return x.req.ID + ShadowSuffix
}

// takeShadow takes the shadow rules' buckets of an admitted request, each
// that can pay: one take of all of them, and while one denies, a take of
// the others without it (at most one take more per shadow rule that would
// deny). A store failure leaves the rest untaken. It never changes the
// verdict.
func (x *Exchange) takeShadow(rules []*policy.Rule) {
	m, r := x.m, x.req
	reserve := x.reservation(r.Estimate.InputTokens, r.Estimate.OutputTokens)
	now := m.opt.Now()
	x.shadow = make([]Applied, len(rules))
	items := make([]bucket.Item, len(rules))
	pending := make([]int, len(rules))
	for i, rule := range rules {
		key := rule.ModelKey(r.Principal, x.quote.Label)
		limit := rule.LimitAt(now)
		units := x.units(rule, &reserve)
		items[i] = bucket.Item{Key: key, Limit: limit, Cost: units}
		x.shadow[i] = Applied{Rule: rule, Key: key, Limit: limit, Reserved: units, Untaken: true}
		pending[i] = i
	}
	sub := make([]bucket.Item, 0, len(rules))
	for len(pending) > 0 {
		sub = sub[:0]
		for _, i := range pending {
			sub = append(sub, items[i])
		}
		d, err := m.opt.Store.Take(context.Background(), x.shadowID(), sub)
		if err != nil {
			m.log.Warn("shadow take failed", "err", err, "request_id", r.ID)
			for _, i := range pending {
				m.opt.Metrics.shadowDecision(x.shadow[i].Rule.Name, ShadowError)
			}
			return
		}
		for j, i := range pending {
			x.shadow[i].Status = d.Buckets[j]
		}
		if d.Allowed {
			for _, i := range pending {
				x.shadow[i].Untaken = false
				m.opt.Metrics.shadowDecision(x.shadow[i].Rule.Name, ShadowPass)
			}
			return
		}
		i := pending[d.DeniedBy]
		a := &x.shadow[i]
		a.Denied = true
		m.opt.Metrics.shadowDecision(a.Rule.Name, ShadowWouldDeny)
		m.log.Info("shadow limit would deny", "limit", a.Rule.Name, "request_id", r.ID,
			"requested", a.Reserved, "remaining", a.Status.Remaining, "retry_after", d.RetryAfter, "too_large", d.TooLarge)
		pending = append(pending[:d.DeniedBy], pending[d.DeniedBy+1:]...)
	}
}

// settleShadow reconciles the shadow buckets that were taken, as Settle
// does the real ones, under the shadow id: a shadow dollar rule settles at
// what the upstream says it billed (billed, micro-USD) when more, as a
// real one would (billedFloor), so that its level reports what enforcing
// it would have charged.
func (x *Exchange) settleShadow(src spec.Source, known bool, actual spec.Usage, billed int64) {
	var deltas []bucket.Delta
	for i := range x.shadow {
		a := &x.shadow[i]
		if a.Untaken {
			continue
		}
		if d := x.billedFloor(a, known, x.settledUnits(a, src, known, actual), billed) - a.Reserved; d != 0 {
			deltas = append(deltas, bucket.Delta{Key: a.Key, Limit: a.Limit, Units: d})
		}
	}
	if len(deltas) == 0 {
		return
	}
	if err := x.m.opt.Store.Reconcile(context.Background(), x.shadowID(), deltas); err != nil {
		x.m.log.Warn("shadow reconcile failed", "err", err, "request_id", x.req.ID)
	}
}

// shadowDecision counts one shadow rule's decision.
func (m *Metrics) shadowDecision(limit, decision string) {
	if m == nil {
		return
	}
	m.shadow.WithLabelValues(limit, decision).Inc()
}
