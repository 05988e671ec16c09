package meter

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/spec"
)

// Settlement is what a finished request really cost, as the transport
// learned it.
type Settlement struct {
	// Source says what Usage is: reported by the upstream, partly reported,
	// or counted locally (each charged as Usage); SourceRefund (an upstream
	// error without usage: every reservation is given back); or
	// SourceReserved (the usage is unknown: the reservation stands).
	Source spec.Source
	// Usage is the request's token counts, read for a known Source only.
	Usage spec.Usage
	// Status is the HTTP status the client got, for the ledger.
	Status int
	// Unforwarded: nothing reached the upstream (the transport failed
	// before its call), so no ledger record is written.
	Unforwarded bool
	// BilledMicroUSD is what the upstream's answer says, apart from its
	// usage, that it charged for the request, in micro-USD (a LiteLLM
	// proxy's cost header: weigher.CostHeader); 0 when it says nothing.
	// Whatever the Source, a weighed request costs at least this: a known
	// usage is priced at no less (as its own Usage.BilledMicroUSD), a
	// reservation that stands and a per-image generation's price are
	// raised to it, and a refund keeps it on the dollar rules (the
	// upstream says it billed; token rules are refunded); shadow dollar
	// rules settle at it alike, so that they report what enforcing them
	// would have charged. A request that is not weighed is charged it on
	// its dollar rules too (nothing else prices it). Bounded as a usage's
	// own figure is, by the request's cost ceiling (costCeiling).
	BilledMicroUSD int64
	// Ceiling is the most the request can plausibly be billed
	// (weigher.Weigher.Ceiling, which argues why): InputTokens and
	// OutputTokens in tokens, WebSearches and FileSearches in searches,
	// BilledMicroUSD the least bound of a cost the upstream reports
	// (reported_cost_ceiling_usd), which a weighed request's token figures
	// priced at the table raise (costCeiling); a figure of 0 bounds
	// nothing (the zero value: no ceiling). A known Usage above it is
	// charged at it, logged, counted in usage_implausible_total and marked
	// in the ledger record with the figures reported (ceiling.go). Given
	// at settlement, not admission, so that an exchange does not carry it.
	Ceiling spec.Usage
}

// Settle reconciles every bucket the request took from with actual −
// reserved, once, under the request id, and records what the request
// really used and cost: the metrics and the ledger record. Only the first
// call does anything (it reports whether it was the one), so a request is
// settled exactly once whatever path (normal end, client gone, recovered
// panic) reaches here; an exchange that was refused holds nothing and is
// never settled. A known usage above the request's ceiling
// (Settlement.Ceiling) is charged at the ceiling, and logged, counted and
// marked in the ledger as implausible (ceiling.go). The reconciliation, the metrics and the ledger record
// each run contained: a panic in one skips none of the others.
func (x *Exchange) Settle(s Settlement) bool {
	if x.verdict != Admitted || !x.settled.CompareAndSwap(false, true) {
		return false
	}
	m := x.m
	if !x.req.Weighed && s.Source.Known() {
		s.Source = SourceOf(s.Status) // nothing to count: a request is a request
	}
	known := s.Source.Known()
	var actual spec.Usage
	var cost int64
	var over uint8 // the figures above the request's ceiling (ceiling.go)
	reportedCost := s.BilledMicroUSD
	if known {
		reportedCost = max(reportedCost, s.Usage.BilledMicroUSD)
	}
	if reportedCost > 0 { // priced only for an upstream that reports a cost
		s.Ceiling.BilledMicroUSD = x.costCeiling(s.Ceiling)
		if c := s.Ceiling.BilledMicroUSD; c > 0 && s.BilledMicroUSD > c {
			s.BilledMicroUSD, over = c, 1<<figureCost
		}
	}
	switch {
	case known:
		var o uint8
		actual, o = overCeiling(x.searchFeesOf(s.Usage, s.Source), s.Ceiling)
		over |= o
		actual.BilledMicroUSD = max(actual.BilledMicroUSD, s.BilledMicroUSD)
		cost = x.quote.Price.MicroUSD(actual)
		if s.Usage.ServiceTier != "" && x.quote.Priced && x.req.PerImage == 0 {
			cost = x.servedAt(s.Usage.ServiceTier, actual, cost)
		}
	case s.Source == spec.SourceReserved && x.req.Weighed:
		// Nothing reported: the reservation stands, and so does its cost.
		cost = max(x.quote.Price.MicroUSD(x.reservation(x.req.Estimate.InputTokens, x.req.Estimate.OutputTokens)), s.BilledMicroUSD)
	case s.Source == spec.SourceRefund && x.req.Weighed, !x.req.Weighed:
		// A refund: 0 but when the upstream says it billed the error. A
		// request not weighed: what the upstream says it billed, if it does.
		cost = s.BilledMicroUSD
	}
	if s.Source == spec.SourceReported && s.Status < 300 && over == 0 {
		// (An implausible output teaches the learned reservation nothing.)
		m.contain(StageMetrics, x, func() { x.observeOutput(actual.OutputTokens) })
	}
	// What the upstream says it billed, apart from token counts: its cost
	// header, or its usage's own figure when the usage is known.
	billed := s.BilledMicroUSD
	if known {
		billed = actual.BilledMicroUSD // already the larger of the two
	}
	if x.req.PerImage > 0 && s.Source != spec.SourceRefund {
		// Billed per image: the images asked for are the bill, whatever
		// tokens an answer reports, unless the upstream says it billed
		// more (a gateway's cost header).
		known, cost = false, max(x.imagesCost(), billed)
		s.Source = spec.SourceReserved
	}
	if over != 0 {
		m.contain(StageMetrics, x, func() { m.implausible(x, s.Usage, actual, reportedCost, s.BilledMicroUSD, over) })
	}
	var obuf [8]int
	var sbuf [8]int64
	deltas, owners, settled := x.deltaBuf[:0], obuf[:0], sbuf[:0]
	for i := range x.rules {
		a := &x.rules[i]
		units := x.billedFloor(a, known, x.settledUnitsPriced(a, s.Source, known, actual, cost), billed)
		settled = append(settled, units)
		if d := units - a.Reserved; d != 0 {
			if a.Taken != nil { // to the shards taken from, in proportion to what each paid
				n := len(deltas)
				deltas = bucket.SplitDelta(deltas, a.Taken, d)
				for range len(deltas) - n {
					owners = append(owners, i)
				}
				continue
			}
			deltas = append(deltas, bucket.Delta{Key: a.Key, Limit: a.Limit, Units: d}) // the take's window
			owners = append(owners, i)
		}
	}
	if len(deltas) > 0 {
		m.contain(StageSettle, x, func() {
			m.inject(PointSettle)
			x.observeDeltas(deltas, owners)
			x.reconcile(deltas, owners) // each where its reservation was taken
		})
	}
	if x.fallback && m.opt.Charges != nil {
		m.contain(StageSettle, x, func() { x.chargeBack(settled) })
	}
	if len(x.shadow) > 0 {
		m.contain(StageSettle, x, func() { x.settleShadow(s.Source, known, actual, billed) })
	}
	m.contain(StageMetrics, x, func() {
		m.inject(PointMetrics)
		m.opt.Metrics.released(x)
		m.opt.Metrics.settled(x, x.chargedTokens(s.Source, known, actual), cost, known, deltas, owners)
		m.budgetCrossings(x, settled)
		m.budgetLevels(x, settled)
		m.opt.Metrics.budgetSettled(x, settled)
	})
	if m.opt.Ledger != nil || m.opt.Records {
		m.contain(StageLedger, x, func() {
			r := m.newRecord(x, s, actual, known, cost)
			if over != 0 {
				r.UsageImplausible, r.ReportedCostMicroUSD = true, reportedCost
				if known {
					r.ReportedInputTokens, r.ReportedOutputTokens = s.Usage.InputTokens, s.Usage.OutputTokens
				}
			}
			if m.opt.Records {
				kept := new(ledger.Record) // a copy: r itself stays on the stack
				*kept = r
				x.record = kept
			}
			if m.opt.Ledger != nil && !s.Unforwarded {
				m.inject(PointLedger)
				m.opt.Ledger.Write(r)
			}
		})
	}
	return true
}

// observeDeltas moves the fallback's readings (bucket.LevelObserver) by
// the deltas of the rules whose take the store judged and the fallback
// observed: not a rule the fallback served (its reservation is in no
// reading), nor a sharded rule's (its take gave no reading; its deltas
// are its shards'). owners[j] is deltas[j]'s rule.
func (x *Exchange) observeDeltas(deltas []bucket.Delta, owners []int) {
	if !x.observed || x.m.levels == nil {
		return
	}
	for j := range deltas {
		if a := &x.rules[owners[j]]; !a.Fallback && a.Taken == nil {
			x.m.levels.ObserveDelta(deltas[j])
		}
	}
}

// chargeBack gives Options.Charges what a request admitted from the
// fallback settled at (settled[i], rule i's units) on each quota and
// window counter the fallback judged (Applied.Fallback), in the period of
// its take: the shared store never took it. A sharded rule's units are
// spread over its shards as evenly as ShardLimit spreads the limit (the
// fallback held the whole limit).
func (x *Exchange) chargeBack(settled []int64) {
	for i := range x.rules {
		a := &x.rules[i]
		units := settled[i]
		if units == 0 || !a.Fallback || !bucket.Charges(a.Limit) {
			continue
		}
		if k := a.Rule.Shards; k > 1 {
			keys := a.Rule.ShardKeys(x.req.Principal, x.quote.Label)
			for j := range k {
				share := units / int64(k)
				if int64(j) < units%int64(k) {
					share++
				}
				x.m.opt.Charges.Charge(bucket.Delta{Key: keys.Key(j), Limit: bucket.ShardLimit(a.Limit, k, j), Units: share})
			}
			continue
		}
		x.m.opt.Charges.Charge(bucket.Delta{Key: a.Key, Limit: a.Limit, Units: units})
	}
}

// Record is the ledger record of a settled request (see ledger.Record:
// tokens, cost in micro-USD, the reservation; no prompt, no key), and
// whether there is one: false before Settle, for a refused request, and
// when the Meter neither writes a ledger nor keeps records
// (Options.Records). It is read by the goroutine that settled the request,
// or after it (it is written once, by Settle).
func (x *Exchange) Record() (ledger.Record, bool) {
	if x.record == nil {
		return ledger.Record{}, false
	}
	return *x.record, true
}

// SourceOf is the settlement source of an answer whose usage llmguard does
// not read: a refund for an error status (400 and above) but a gateway's
// timeout (GatewayTimedOut), the reservation otherwise.
func SourceOf(status int) spec.Source {
	if status >= 400 && !GatewayTimedOut(status) {
		return spec.SourceRefund
	}
	return spec.SourceReserved
}

// searchFeesOf is u with the per-request search fees the request incurred
// that u does not report: the search context size reserved when u names
// none (an OpenAI search model's usage names none; Perplexity's names the
// size it billed, charged as reported, so a smaller one than reserved is
// refunded the difference), and the web results reserved when u counts
// none (OpenRouter's web plugin: no usage counts them), and the container
// gigabyte-sessions and Anthropic code execution minutes reserved when u
// counts none (no usage does). A usage not wholly reported (source other
// than SourceReported: a stream cut before its terminal event) keeps at
// least the file searches and image generation tokens reserved, which the
// terminal event would have shown.
func (x *Exchange) searchFeesOf(u spec.Usage, source spec.Source) spec.Usage {
	e := &x.req.Estimate
	if u.SearchContext == spec.SearchContextNone {
		u.SearchContext = e.SearchContext
	}
	if u.SearchResults <= 0 {
		u.SearchResults = e.SearchResults
	}
	if u.ContainerGB <= 0 {
		u.ContainerGB = e.ContainerGB // no usage reports a container
	}
	if u.CodeExecutionMinutes == 0 {
		u.CodeExecutionMinutes = e.CodeExecutionMinutes // nor the execution time
	}
	if source != spec.SourceReported {
		u.FileSearches = max(u.FileSearches, e.FileSearches)
		u.ImageTokens = max(u.ImageTokens, e.ImageTokens)
	}
	// Which search tool ran is the request's, not the answer's: a
	// web_search_call item does not say.
	u.WebSearchPreview = u.WebSearchPreview || e.WebSearchPreview
	return u
}

// GatewayTimedOut reports whether status says that something between
// llmguard and the provider stopped waiting for an answer it had passed
// on, so that the provider may have run, and billed, the request: 504
// Gateway Timeout (nginx's proxy_read_timeout, cloud load balancers), 524
// (Cloudflare's "A timeout occurred": the origin took the request and did
// not answer within 100 s) and 408, which LiteLLM's proxy answers when its
// call to the provider passes its timeout (its Timeout exception carries
// status 408, litellm/exceptions.py; a body's own "timeout" field sets
// it). Such an answer keeps its reservation, as a call cut by
// llmguard's own upstream timeout does.
func GatewayTimedOut(status int) bool {
	return status == 408 || status == 504 || status == 524
}

// newRecord is the ledger record of a settled exchange: what was really
// used (the reservation when nothing was reported; nothing when refunded)
// and its cost. It never holds prompts or keys: the key id is a hash.
func (m *Meter) newRecord(x *Exchange, s Settlement, actual spec.Usage, known bool, cost int64) ledger.Record {
	r := ledger.Record{
		TS: time.Now().UTC(), RequestID: x.req.ID, KeyID: x.req.Principal.KeyID, User: x.req.Principal.User,
		Tenant: x.req.Principal.Tenant, Model: cmp.Or(x.req.Model, x.req.NamedModel), Flavor: x.req.Flavor.String(), Status: s.Status,
		EstimatedInputTokens: x.req.Estimate.InputTokens, EstimatedOutputTokens: x.req.Estimate.OutputTokens,
		CostMicroUSD: cost, Unmetered: x.req.UnmeteredAllowed,
	}
	if x.quote.Priced && x.req.Weighed && x.req.PerImage == 0 {
		r.ServiceTier = x.quote.Tier.String()
	}
	t := x.chargedTokens(s.Source, known, actual)
	r.InputTokens, r.CachedInputTokens, r.CacheWriteTokens = t.InputTokens, t.CachedInputTokens, t.CacheWriteTokens
	r.CacheWrite1hTokens = t.CacheWrite1hTokens
	r.OutputTokens, r.ReasoningTokens = t.OutputTokens, t.ReasoningTokens
	r.AudioInputTokens, r.AudioOutputTokens, r.WebSearches = t.AudioInputTokens, t.AudioOutputTokens, t.WebSearches
	r.FileSearches, r.SearchContextSize, r.SearchResults = t.FileSearches, t.SearchContext.String(), t.SearchResults
	r.ContainerGB = int64(t.ContainerGB)
	r.ImageTokens, r.CodeExecutionMinutes = int64(t.ImageTokens), int64(t.CodeExecutionMinutes)
	if cost > 0 && x.req.PerImage == 0 {
		r.SearchFeeMicroUSD = min(x.quote.Price.SearchMicroUSD(t), cost)
	}
	if i := tightestRatio(x.rules); i >= 0 {
		a := x.rules[i]
		r.Reserved, r.ReservedUnit = a.Reserved, a.Rule.Unit.AmountUnit()
	}
	return r
}

// chargedTokens is the token counts a settlement from source charged, as
// the ledger record and tokens_total both count them: actual when the
// usage is known (reported or counted locally); the estimate (input, and
// the output reserved) when the reservation stands for a weighed request;
// none for a refund or a request that is not weighed.
func (x *Exchange) chargedTokens(source spec.Source, known bool, actual spec.Usage) spec.Usage {
	switch {
	case known:
		return actual
	case source == spec.SourceReserved && x.req.Weighed:
		e := &x.req.Estimate
		u := feesOf(e)
		u.InputTokens, u.OutputTokens = e.InputTokens, e.OutputTokens
		return u
	}
	return spec.Usage{}
}

// tightestRatio returns the index of the applied rule with the least
// remaining share of its capacity, or -1.
func tightestRatio(rules []Applied) int {
	best, bestShare := -1, 0.0
	for i, a := range rules {
		share := float64(a.Status.Remaining) / float64(max(a.Limit.Capacity, 1))
		if best < 0 || share < bestShare {
			best, bestShare = i, share
		}
	}
	return best
}

// inject runs the test hook at point; nil in production.
func (m *Meter) inject(point string) {
	if m.opt.Inject != nil {
		m.opt.Inject(point)
	}
}

// contain runs f in stage and recovers a panic in it, so that one failing
// step of a settlement (metrics, ledger, reconciliation) does not skip the
// others.
func (m *Meter) contain(stage string, x *Exchange, f func()) { m.Contain(stage, x.req.ID, f) }

// Contain runs f and recovers a panic in it as one of stage's (a Stage
// constant) while serving request id, reporting it through Recovered, so
// that one failing step does not skip the others.
func (m *Meter) Contain(stage, id string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			m.Recovered(stage, r, id)
		}
	}()
	f()
}

// Recovered counts and logs a panic recovered in stage (a Stage constant)
// while serving request id ("" when none is known). The log carries the
// stack and a description of the value that holds no request data (its
// type, or a runtime error's own message): never prompt text.
func (m *Meter) Recovered(stage string, r any, id string) {
	m.opt.Metrics.Panicked(stage)
	m.log.Error("panic recovered", "stage", stage, "request_id", id, "panic", describePanic(r), "stack", string(debug.Stack()))
}

// describePanic describes a recovered value without its contents unless it
// is a runtime error (whose message the runtime writes: an index, a nil
// map), since a value passed to panic may hold request data.
func describePanic(r any) string {
	var re runtime.Error
	if err, ok := r.(error); ok && errors.As(err, &re) {
		return re.Error()
	}
	return fmt.Sprintf("%T", r)
}
