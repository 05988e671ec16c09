package meter

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/reserve"
	"github.com/llmguard/llmguard/spec"
)

// Options configures a Meter. Store is required.
type Options struct {
	// Store holds the buckets every rule takes from (memory, Redis, Redis
	// Cluster; a remote store wrapped in bucket.Guarded, which bounds each
	// call by store.timeout).
	Store bucket.Store
	// Fallback serves fail-open limits while Store is unavailable (its Take
	// fails with an error other than bucket.ErrInvalid); nil admits them
	// unlimited instead. It is the per-node bucket.Fallback in production.
	Fallback bucket.Store
	// Charges, when set, is given the settled units of every request
	// admitted from Fallback on its quotas and window counters, to be
	// charged to Store once it is back (bucket.ChargeBack in production);
	// nil: what the fallback admits is never charged to Store.
	Charges Charger
	// Ledger receives one record per settled, forwarded request; nil: none.
	Ledger Ledger
	// Records keeps each settled request's ledger record on its Exchange
	// (Exchange.Record) even without a Ledger, and for a request that was
	// never forwarded: the access log and the traces read it. False: the
	// record is built only to be written to Ledger.
	Records bool
	// Metrics receives the admission and settlement metrics; nil: none.
	Metrics *Metrics
	// Logger receives structured logs; nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock that places a request in its quota periods (the
	// buckets' own clock is the store's). nil: time.Now.
	Now func() time.Time
	// Outputs, when set, learns each model's output from settled requests
	// that named no maximum and reserves its quantile for the next such
	// request (output_reservation.learn); nil: the fixed default stands.
	Outputs *reserve.Learner
	// PinOutputs writes the output reservation of a request that names no
	// maximum into the request as its maximum (output_reservation.pin):
	// Exchange.OutputPinned then gives the maximum per completion, the
	// reservation after learning and any cap_output lowering, raised to
	// the endpoint's least maximum (Output.MinMax) before the take, so
	// that the upstream cannot write, nor bill, more output than was
	// reserved. Only for a request whose Output is Defaulted, and
	// Cappable or Pinnable. False: such a request keeps no maximum, and
	// may write past its reservation (charged as debt when it settles).
	PinOutputs bool
	// Waits holds requests denied by a limit that waits (on_limit: wait)
	// until their buckets can pay (see Waits); nil: every denial is
	// answered at once.
	Waits *Waits
	// Inject, when set, runs at each injection point of a settlement
	// (PointSettle, PointLedger, PointMetrics); tests make it panic to
	// prove containment. nil in production.
	Inject func(point string)
	// Alerts, when set, is told each quota's level as a request settles
	// (budget threshold alerts, package alert); nil: none.
	Alerts Alerts
}

// Charger takes the spend a fail-open fallback admitted, one bucket in
// one period at a time (a Delta of the units, in the limit's unit, with
// the take's Limit, window included), to charge it to the shared store
// later; it reports whether it kept it. bucket.ChargeBack implements it.
type Charger interface{ Charge(bucket.Delta) bool }

// Ledger is where settled requests are recorded. Write must not block
// (ledger.Writer drops and counts when its buffer is full); it reports
// whether the record was accepted.
type Ledger interface{ Write(ledger.Record) bool }

// Injection points of Options.Inject, inside the settlement stages.
const (
	PointSettle  = "settle"  // before the reconciliation store call
	PointLedger  = "ledger"  // before the ledger write
	PointMetrics = "metrics" // before the settlement metrics
)

// Meter admits requests against the limits that apply to them and settles
// what they really cost: the transport-free core of llmguard (DESIGN.md
// §2–§7). Admit prices a request, matches its rules and takes its
// reservation from every bucket at once, two-phase; the Exchange it returns
// is settled once with the actual usage or an outcome, which reconciles the
// buckets, writes the ledger record and records the metrics. Safe for
// concurrent use.
type Meter struct {
	opt Options
	log *slog.Logger
	// statuses is opt.Store as a bucket.StatusTaker, nil when it is not
	// one: asserted once here rather than on every take.
	statuses bucket.StatusTaker
	// levels is opt.Fallback as a bucket.LevelObserver, nil when it is not
	// one: told each shared level the store reports, so that an outage's
	// fallback starts a quota or window counter where the store had it.
	levels bucket.LevelObserver
	// keys keeps the bucket keys of recent callers (keymemo.go).
	keys keyMemo
	// warned remembers the budget thresholds already reported.
	warned warnings
}

// New builds a Meter. Errors: Store is nil.
func New(opt Options) (*Meter, error) {
	if opt.Store == nil {
		return nil, errors.New("meter: Store is required")
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	st, _ := opt.Store.(bucket.StatusTaker)
	lv, _ := opt.Fallback.(bucket.LevelObserver)
	return &Meter{opt: opt, log: opt.Logger, statuses: st, levels: lv}, nil
}

// Metrics returns the Metrics the meter records to (nil: none), for the
// transport to count requests in the same label caps.
func (m *Meter) Metrics() *Metrics { return m.opt.Metrics }

// Request is what admission needs to know of one request.
type Request struct {
	// ID is the request's id, unique per request: the store applies a take
	// and its reconciliation once per id.
	ID string
	// Principal is the caller, as identified by Policy.
	Principal policy.Principal
	// Policy is the policy the request is judged by; the exchange keeps it
	// until it is settled, whatever a reload does meanwhile.
	Policy *policy.Policy
	// Path is the upstream path as routed (decoded, the upstream's prefix
	// removed), for rules that match paths.
	Path string
	// Model is the model the request names, "" when none: the model it is
	// priced as and its rules' models are matched against.
	Model string
	// NamedModel is the model the body of a request that is not weighed
	// names (count_tokens, moderations, an unmetered endpoint:
	// weigher.Weigher.NamedModel), "" when none or when Model is set. It
	// is written as its ledger record's model and gives its metrics' model
	// label (its priced name, else "other"), and nothing else: the request
	// is limited and priced as one that names no model, as such a request
	// always was (Model "").
	NamedModel string
	// ServiceTier is the request's service_tier as sent ("" when none):
	// it picks the tier the model is priced in at admission
	// (policy.Policy.Quote). Settle prices the usage in the tier the answer
	// says it was served at (spec.Usage.ServiceTier) when that costs more
	// (servedAt): the ledger record's service_tier names the tier charged.
	ServiceTier string
	// Audio: the request sends or asks for audio (weigher.Estimate.Audio).
	// Its model must have audio prices for a usd limit to admit it
	// (policy.Quote.ForAudio), and its reservation is priced as if every
	// token of it were audio, the dearer kind (reservation).
	Audio bool
	// GeoPinned: the request pins inference to a geography
	// (weigher.Estimate.GeoPinned), billed at a premium on every token
	// price (policy.Quote.ForGeo).
	GeoPinned bool
	// Weighed: the request's kind is weighed in tokens. A request that is
	// not weighed counts as a request only: 0 in every other unit.
	Weighed bool
	// Unmetered: the request calls an endpoint that spends tokens or money
	// upstream but is not weighed (weigher.KindUnmetered) and that the
	// operator has not allowed (unmetered_paths): refused (Unmetered) when
	// a token or dollar rule applies to the caller.
	Unmetered bool
	// UnmeteredAllowed: the request calls an unmetered endpoint the
	// operator allows (unmetered_paths): it counts as a request, and its
	// ledger record is marked unmetered.
	UnmeteredAllowed bool
	// Flavor is the API flavor, for the metrics and the ledger.
	Flavor spec.Flavor
	// (The one-byte fields above are kept together: an Exchange holds a
	// Request, and the transport's exchange, which holds an Exchange,
	// fills its allocator size class: proxy's TestExchangeSize.)
	// Images and PerImage price a generation billed per image (DALL·E):
	// Images images at PerImage micro-USD each. Such a request costs one
	// request, Images × PerImage micro-USD, and cannot be weighed against a
	// token rule (it is refused as Unmetered under one, unless
	// UnmeteredAllowed). PerImage 0: not billed per image.
	Images, PerImage int64
	// Estimate is the reservation: InputTokens counted locally and
	// OutputTokens the output reserved, in tokens, and WebSearches the web
	// searches the request's tools may run (priced per search);
	// SearchContext the size of the per-request search fee the request
	// incurs and SearchResults the web results OpenRouter's web plugin may
	// fetch (weigher.Estimate's), both also charged at settlement when the
	// usage reports none. CacheWriteTokens (CacheWrite1hTokens) not 0 says
	// the body asks for prompt-cache writes (with the 1-hour TTL): the
	// reservation then prices all its input at that write price when it is
	// not below the input price. WebSearchPreview prices its web searches
	// at the preview tool's fee, reserved and settled. ContainerGB, the
	// container gigabyte-sessions its hosted tools may open, is reserved
	// and charged as reserved (no usage reports it), as is
	// CodeExecutionMinutes (Anthropic's code execution); FileSearches and
	// ImageTokens (Responses file_search and image_generation) are
	// reserved and reconciled with the answer. Only those twelve fields
	// are read.
	Estimate spec.Usage
	// Output says how Estimate.OutputTokens was made and whether the
	// request's output maximum may be lowered (output.go); the zero value:
	// named by the request, one completion, never lowered.
	Output Output
	// Watch, when set, watches the request's client while the request
	// waits (Options.Waits). nil: the client is not watched, and a request
	// waits until admitted or refused.
	Watch Watcher
}

// Watcher watches a waiting request's client. Watch is called at most once
// per request, when it starts to wait: gone is closed when the client
// leaves, and stop (called once the wait ends) ends the watch.
type Watcher interface {
	Watch() (gone <-chan struct{}, stop func())
}

// Verdict is what admission decided.
type Verdict uint8

// Verdicts of Admit.
const (
	// Admitted: every bucket had room (or the store was unavailable and
	// every applicable limit fails open); the reservation is taken.
	Admitted Verdict = iota
	// Denied: a limit has too little left now; waiting Exchange.RetryAfter
	// may help. Nothing was taken.
	Denied
	// TooLarge: the request costs more than a limit's capacity; waiting
	// cannot help. Nothing was taken.
	TooLarge
	// FailClosed: the store is unavailable and a fail-closed limit applies
	// (Exchange.ClosedBy). Nothing was taken.
	FailClosed
	// Broken: the store refused the take as invalid (bucket.ErrInvalid): a
	// bug, never an outage, so nothing is admitted past it.
	Broken
	// Unmetered: the request calls an unmetered endpoint and a token or
	// dollar rule applies (Exchange.ClosedBy): its cost cannot be weighed
	// against that rule. Nothing was taken.
	Unmetered
	// Unpriced: a usd limit applies (Exchange.UnpricedBy) to a weighed
	// request whose model has no price in its service tier, and no
	// default_price covers it: any guess could under-count, so it is
	// refused (Exchange.Quote().Missing names the config key that would
	// price it). Nothing was taken.
	Unpriced
	// Left: the request was waiting for its buckets (Options.Waits) and
	// its client went away. Nothing was taken.
	Left
)

var verdictNames = []string{Admitted: "admitted", Denied: "denied", TooLarge: "too_large", FailClosed: "fail_closed", Broken: "broken",
	Unmetered: "unmetered", Unpriced: "unpriced", Left: "left"}

// String is the verdict's name; a value outside the enum is "unknown(<n>)".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown(" + strconv.Itoa(int(v)) + ")"
}

// Applied is one rule a request took from: the bucket, its limit as taken
// (a quota's window is that of admission; a window counter's WindowStart
// the window the store counted the take in), the reservation and the
// bucket's status at admission.
type Applied struct {
	Rule *policy.Rule
	// Key is the bucket's key in the store (for a sharded rule, the key the
	// bucket would have unsharded, which names it: its shards are in Taken).
	Key string
	// Limit is the bucket's limit as taken: the whole limit, shards and all.
	Limit bucket.Limit
	// Reserved is the units taken at admission, in the rule's unit (tokens,
	// requests, micro-USD).
	Reserved int64
	// Status is the bucket's state right after the take (or the denial).
	// For a sharded rule it is the whole limit's, estimated from the shards
	// the take saw (bucket.ShardedDecision): what the RateLimit and
	// x-ratelimit headers and the utilization metrics report.
	Status bucket.Status
	// Taken are the shards of a sharded rule the reservation was taken
	// from, each with its own limit and cost, which settlement reconciles
	// (bucket.SplitDelta); nil when the reservation is in Key alone (an
	// unsharded rule, or the per-node fallback, which keeps whole limits).
	Taken []bucket.Item
	// Denied: this rule's bucket denied the request. For a shadow rule
	// (Exchange.Shadow): it would have denied it.
	Denied bool
	// Untaken is set on a shadow rule whose bucket took nothing: it would
	// deny (Denied), or the store failed. Settlement reconciles only the
	// shadow buckets that were taken.
	Untaken bool
	// Fallback: this rule's bucket was judged by the node's fallback
	// (Options.Fallback: limit ÷ store.nodes), not by the store, which
	// failed for it; the reservation is there, and settles there. Every
	// rule's is set when the whole store failed; only the rules of the
	// failed part's when the store served the rest of the take (a Redis
	// Cluster master down: bucket.PartialError, partial.go).
	Fallback bool
	// series are the rule's metric series for the request's tenant
	// (bundles.go), nil until its metrics are first recorded.
	series *ruleSeries
	// gauge is what the budget gauges noted at admission (a quota's).
	gauge gaugeMark
}

// Exchange is one admitted (or refused) request, from admission until it is
// settled. Its accessors are safe for concurrent use; Settle acts once.
type Exchange struct {
	m     *Meter
	req   Request
	quote policy.Quote
	// modelLabel is the model's metric label: its priced name, "other" for
	// an unpriced model, "" when the request names none (Model and
	// NamedModel both "").
	modelLabel string
	verdict    Verdict
	rules      []Applied
	decision   bucket.Decision
	closedBy   *policy.Rule
	unpriced   *policy.Rule
	// shadow are the shadow rules' buckets (shadow.go), taken apart from
	// rules once those admitted; nil when none applies.
	shadow []Applied
	// fallback: a rule of the request (Applied.Fallback: every rule, or
	// those of a failed part of the store) was judged by the per-node
	// fallback while the store was unavailable for it; reconciled there.
	fallback bool
	// unlimited: the store was unavailable and nothing could hold the
	// limits (no fallback, or it failed): admitted without any.
	unlimited bool
	// held: it joined a wait queue; peek: take reads the buckets'
	// statuses, taking nothing (wait.go); observed: the store's Decision
	// was given to the fallback as a reading (observeLevels), so the
	// deltas of the rules the store judged move those readings at
	// settlement (observeDeltas). (Beside the other bools: apart, each
	// took 8 bytes of the exchange a request allocates.)
	held     bool
	peek     bool
	observed bool
	warnings []string
	settled  atomic.Bool
	// record is the settlement's ledger record (Record), set by Settle
	// when the Meter keeps records (Options.Records); a pointer, so that
	// an Exchange without one is no larger.
	record *ledger.Record
	// flow are the request's metric series (bundles.go), nil until its
	// metrics are first recorded.
	flow *flowSeries
	// out is how the output reservation was made and lowered (output.go).
	out outputState
	// waited is how long it waited in a wait queue (held; wait.go).
	waited time.Duration

	// The storage of rules, of the take's items and of the settlement's
	// deltas for a request under at most inlineRules rules, so that they
	// cost no allocation of their own (the Exchange is never reused, so a
	// store may keep the items or deltas it is given).
	ruleBuf   [inlineRules]Applied
	itemBuf   [inlineRules]bucket.Item
	deltaBuf  [inlineRules]bucket.Delta
	statusBuf [inlineRules]bucket.Status
}

// inlineRules is how many rules an Exchange holds without allocating.
const inlineRules = 4

// inline returns buf[:n] when buf can hold n elements, else a new slice.
func inline[T any](buf []T, n int) []T {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]T, n)
}

// Verdict is what admission decided.
func (x *Exchange) Verdict() Verdict { return x.verdict }

// Rules are the rules the request was judged by, narrowest scope first,
// with their reservations and statuses; empty when none applied or the
// request was admitted without limits. The caller may set Denied-based
// header choices from them but must not change them.
func (x *Exchange) Rules() []Applied { return x.rules }

// DeniedBy is the position in Rules of the rule that denied a Denied or
// TooLarge request, -1 otherwise.
func (x *Exchange) DeniedBy() int {
	if x.verdict != Denied && x.verdict != TooLarge {
		return -1
	}
	return x.decision.DeniedBy
}

// RetryAfter is how long a Denied request must wait for its denying bucket
// to hold its cost (until the period's end for a quota).
func (x *Exchange) RetryAfter() time.Duration { return x.decision.RetryAfter }

// FromFallback reports whether the store was unavailable (for some of the
// request's buckets: Applied.Fallback tells which) and fail-open limits
// were judged by this node's fallback buckets (each limit ÷ store.nodes),
// not by the shared store: a denial then is the node's share running out.
func (x *Exchange) FromFallback() bool { return x.fallback }

// ClosedBy is the rule that refused a FailClosed request (the fail-closed
// rule) or an Unmetered one (a token or dollar rule), nil otherwise.
func (x *Exchange) ClosedBy() *policy.Rule { return x.closedBy }

// UnpricedBy is the usd rule that refused an Unpriced request, nil
// otherwise.
func (x *Exchange) UnpricedBy() *policy.Rule { return x.unpriced }

// Quote is how admission priced the request: its model's priced name, its
// service tier and price, or (Priced false) the config key that would
// price it. Once Settle has run, it is how the request was settled: in the
// tier its answer says it was served at, when that cost more (servedAt).
// Read it from the goroutine that admits or settles the request.
func (x *Exchange) Quote() policy.Quote { return x.quote }

// Warnings are the request's budget warnings: "<limit>; used=<fraction>"
// for each quota whose use before this request (spend settled so far and
// other requests' reservations in flight, never this request's own
// reservation) has crossed one of its warn_at thresholds, at most
// maxBudgetWarnings of them. Crossings are logged and counted at
// settlement, on what requests really cost.
func (x *Exchange) Warnings() []string { return x.warnings }

// ModelLabel is the model's metric label: its priced name, "other" for a
// model without a price, "" when the request names none.
func (x *Exchange) ModelLabel() string { return x.modelLabel }

// Outcome is the requests_total outcome of the verdict, for an admitted
// request answered with status: fail_open when admitted while the store
// was unavailable, else OutcomeOf(status); for a refusal, its own outcome.
func (x *Exchange) Outcome(status int) Outcome {
	switch x.verdict {
	case Denied:
		return OutcomeLimited
	case TooLarge:
		return OutcomeTooLarge
	case FailClosed:
		return OutcomeFailClosed
	case Broken:
		return OutcomeInternalError
	case Unmetered:
		return OutcomeUnmetered
	case Unpriced:
		return OutcomeInvalid
	case Left:
		return OutcomeLeft
	}
	if x.fallback || x.unlimited {
		return OutcomeFailOpen
	}
	return OutcomeOf(status)
}

// Admit prices r's model in its service tier, matches its rules and takes
// its reservation from every bucket in one two-phase step: either every
// bucket pays or none does. A weighed request whose model has no price is
// refused (Unpriced) when a usd rule applies, before any take. When the
// store is unavailable, a fail-closed rule refuses the request
// (FailClosed) and fail-open rules are taken from the per-node Fallback
// (DESIGN.md §7). An admitted request must be settled once
// (Exchange.Settle); a refused one holds nothing and needs no settlement.
func (m *Meter) Admit(r Request) *Exchange { return m.AdmitInto(new(Exchange), &r) }

// AdmitInto is Admit with the exchange written into x, which the caller
// allocated: a transport that allocates a state of its own for each
// request can hold the Exchange inside it, one allocation a request rather
// than two (an Exchange is about 2.5 KB: its rules, items and deltas are
// held inline). x must be a zero Exchange, and must never be used for
// another request after (a store may keep the items and deltas it was
// given, which x holds); it panics when x was admitted before. r is
// copied into x, not kept: passed by pointer, the request (360 bytes) is
// copied once, into x, rather than twice. It returns x, with the same
// verdict and state Admit would return.
func (m *Meter) AdmitInto(x *Exchange, r *Request) *Exchange {
	if x.m != nil {
		panic("meter: AdmitInto given an Exchange already admitted")
	}
	x.m, x.req = m, *r
	x.quote = x.quoteIn(r.ServiceTier)
	x.modelLabel = x.quote.Label
	if x.modelLabel == "" && r.Model != "" {
		x.modelLabel = "other"
	}
	if r.Model == "" && r.NamedModel != "" {
		// Labelled as its ledger record names it, priced as it is not.
		x.modelLabel = cmp.Or(r.Policy.Quote(r.NamedModel, "").Label, "other")
	}
	// A dated snapshot or an alias is its priced model for the rules too:
	// a rule on gpt-5-pro holds gpt-5-pro-2025-10-06 and an alias of it.
	var rulesBuf [8]*policy.Rule
	names := [3]string{r.Model, x.quote.Label, x.quote.AliasOf}
	rules := r.Policy.MatchNames(rulesBuf[:0], r.Principal, names[:], r.Path)
	rules, shadow := splitShadow(rules)
	if r.Unmetered || r.PerImage > 0 && !r.UnmeteredAllowed {
		for _, rule := range rules {
			if !rule.Unit.PerCall() && (r.Unmetered || rule.Unit != policy.UnitUSD) {
				x.verdict, x.closedBy = Unmetered, rule
				return x
			}
		}
	}
	if !x.quote.Priced && r.Weighed && r.PerImage == 0 {
		for _, rule := range rules {
			if rule.Unit == policy.UnitUSD {
				x.verdict, x.unpriced = Unpriced, rule
				return x
			}
		}
	}
	x.learnOutput()
	x.pinOutput()
	if len(rules) > 0 {
		m.takeOrWait(x, rules)
		if x.verdict == Denied || x.verdict == TooLarge {
			x.capOutput(rules)
		}
	}
	if x.verdict == Admitted && len(shadow) > 0 && !x.fallback && !x.unlimited {
		x.takeShadow(shadow)
	}
	if x.verdict == Admitted {
		m.contain(StageMetrics, x, func() { m.opt.Metrics.admitted(x); m.opt.Metrics.held(x) })
	}
	return x
}

// ruleKeys are the store keys of a request's rules (policy.Rule.ModelKey),
// made as one string: one allocation for every key of the request rather
// than one or two each.
type ruleKeys struct {
	all  string
	ends [inlineRules]int // key i ends at all[ends[i]] (more past inlineRules)
	more []int
}

// make sets k to the keys of rules for principal p and model label.
func (k *ruleKeys) make(rules []*policy.Rule, p policy.Principal, label string) {
	var stack [512]byte
	b := stack[:0]
	for i, rule := range rules {
		b = rule.AppendModelKey(b, p, label)
		if i < inlineRules {
			k.ends[i] = len(b)
		} else {
			k.more = append(k.more, len(b))
		}
	}
	k.all = string(b)
}

// end is where key i ends in k.all.
func (k *ruleKeys) end(i int) int {
	if i < inlineRules {
		return k.ends[i]
	}
	return k.more[i-inlineRules]
}

// key is rule i's key.
func (k *ruleKeys) key(i int) string {
	from := 0
	if i > 0 {
		from = k.end(i - 1)
	}
	return k.all[from:k.end(i)]
}

// take takes the request's reservation under rules and sets the verdict.
func (x *Exchange) take(rules []*policy.Rule) {
	m, r := x.m, &x.req // not a copy: a Request is 360 bytes
	x.observed = false  // a peek's reading (wait.go) is not this take's
	reserve := x.reservation(r.Estimate.InputTokens, r.Estimate.OutputTokens)
	// The clock is read once, and only for a rule whose limit depends on
	// the instant (a quota's window, a region's share): a clock read costs
	// 100–450 ns on a virtual machine's kvm-clock, and the token buckets
	// of most policies need none (the store reads its own).
	var now time.Time
	haveNow := false
	items := inline(x.itemBuf[:], len(rules))
	x.rules = inline(x.ruleBuf[:], len(rules))
	var keys ruleKeys
	m.keys.make(&keys, rules, r.Principal, x.quote.Label)
	for i, rule := range rules {
		units := x.units(rule, &reserve)
		key := keys.key(i)
		it := &items[i] // built in place: a Limit is copied once into it, once into the Applied
		*it = bucket.Item{Key: key, Limit: rule.Limit, Cost: units, Lease: rule.Lease}
		if !rule.LimitIsFixed() {
			if !haveNow {
				now, haveNow = m.opt.Now(), true
			}
			it.Limit = rule.LimitAt(now)
		}
		if x.peek {
			it.Cost, it.Lease = 0, bucket.Lease{} // a status read (wait.go)
		}
		x.rules[i] = Applied{Rule: rule, Key: key, Limit: it.Limit, Reserved: units}
	}
	// No deadline here: a remote store is wrapped in bucket.Guarded, which
	// bounds each call by store.timeout (and voids a take that failed but
	// may have been applied); the memory store never waits on I/O, and a
	// deadline of a few milliseconds would only fail it on a busy host —
	// and fail its limits open.
	// The store times its own calls (llmguard_store_duration_seconds).
	var d bucket.Decision
	var taken [][]bucket.Item // per rule, the shards taken from, when a rule is sharded
	held := heldTake{id: r.ID}
	var err error
	switch {
	case sharded(rules):
		// A Redis Cluster master down fails only its rules, a sharded
		// rule's once every shard it could move to failed (partial.go).
		var sd bucket.ShardedDecision
		sd, err = x.takeSharded(rules, items)
		d, taken, held = sd.Decision, sd.Taken, heldTake{id: sd.ID, taken: sd.Taken}
	case m.statuses != nil: // the statuses in the Exchange: no allocation
		d, err = m.statuses.TakeInto(context.Background(), r.ID, items, x.statusBuf[:])
	default:
		// A Redis Cluster master down fails only its rules (partial.go); a
		// leased rule's once its lease is spent and the refill failed.
		d, err = m.opt.Store.Take(partialTakes, r.ID, items)
	}
	if errors.Is(err, bucket.ErrInvalid) {
		m.log.Error("store refused the take as invalid", "err", err, "request_id", r.ID)
		x.verdict = Broken
		return
	}
	if pe := bucket.AsPartial(err); pe != nil && len(d.Buckets) == len(items) && len(pe.Failed) > 0 {
		var done bool
		if d, done = x.takePartial(items, d, pe, held); done {
			return
		}
		err = nil
	}
	if err != nil {
		// The store is unavailable (DESIGN.md §7): fail-closed limits
		// refuse; fail-open ones are checked against this node's fallback.
		if closed := failClosedRule(x.rules); closed != nil {
			m.opt.Metrics.failure(x.rules, OutcomeFailClosed)
			x.verdict, x.closedBy = FailClosed, closed
			return
		}
		m.opt.Metrics.failure(x.rules, OutcomeFailOpen)
		if m.opt.Fallback == nil {
			m.log.Warn("store unavailable; admitting without limits", "err", err, "request_id", r.ID)
			x.rules, x.unlimited = nil, true
			return
		}
		x.fallback = true
		d, err = m.opt.Fallback.Take(context.Background(), r.ID, items) // in memory: no deadline to miss
		if err != nil {
			m.log.Error("fallback take failed; admitting without limits", "err", err, "request_id", r.ID)
			x.rules, x.fallback, x.unlimited = nil, false, true
			return
		}
		for i := range x.rules {
			x.rules[i].Fallback = true
		}
	} else if m.levels != nil && !sharded(rules) {
		// The shared levels, for the fallback of a later outage (not a
		// sharded take's: its statuses are its shards').
		x.observeLevels(items, d, x.fallback)
		x.observed = !d.Cached
	}
	if !d.Allowed && d.Cached {
		// Answered from the deny cache: the request was judged by the
		// denying rule alone, the only one whose status is known.
		x.rules = x.rules[d.DeniedBy : d.DeniedBy+1]
		d.Buckets = d.Buckets[d.DeniedBy : d.DeniedBy+1]
		d.DeniedBy = 0
	}
	x.decision = d
	for i := range x.rules {
		x.rules[i].Status = d.Buckets[i]
		if d.Windows != nil && x.rules[i].Limit.IsWindow() {
			// A window counter's deltas apply to the window the take
			// counted in, on the store's clock (bucket.Limit).
			x.rules[i].Limit.WindowStart = d.Windows[i]
		}
		// A region's demand on a split rule: what it admitted or denied
		// (package region moves shares toward it).
		if d.Allowed || i == d.DeniedBy {
			x.rules[i].Rule.NoteDemand(x.rules[i].Reserved)
		}
		if taken != nil && x.rules[i].Rule.Shards > 1 {
			x.rules[i].Taken = taken[i]
		}
	}
	if !d.Allowed {
		x.verdict = Denied
		if d.TooLarge {
			x.verdict = TooLarge
		}
		x.rules[d.DeniedBy].Denied = true
		if !d.TooLarge {
			m.budgetExhausted(x, d.DeniedBy)
			m.contain(StageMetrics, x, func() { m.opt.Metrics.budgetDenied(x, d.DeniedBy) })
		}
		return
	}
	m.budgetWarnings(x)
}

// observeLevels tells the fallback the shared levels d reports for items:
// all of them, or, when partial (a take the store served in part, the
// fallback the rest), only the rules the store judged, one at a time (a
// rare path: a Redis Cluster master down), since the others' statuses are
// the fallback's own.
func (x *Exchange) observeLevels(items []bucket.Item, d bucket.Decision, partial bool) {
	if !partial {
		x.m.levels.ObserveLevels(items, d)
		return
	}
	for i := range items {
		if i >= len(x.rules) || x.rules[i].Fallback || i >= len(d.Buckets) {
			continue
		}
		one := bucket.Decision{Allowed: d.Allowed, DeniedBy: -1, Buckets: d.Buckets[i : i+1]}
		if i < len(d.Windows) {
			one.Windows = d.Windows[i : i+1]
		}
		x.m.levels.ObserveLevels(items[i:i+1], one)
	}
}

// sharded reports whether a rule of rules splits its buckets into shards.
func sharded(rules []*policy.Rule) bool {
	for _, r := range rules {
		if r.Shards > 1 {
			return true
		}
	}
	return false
}

// takeSharded takes items, the rules' buckets with their whole limits and
// unsharded keys, through bucket.TakeSharded: a sharded rule's bucket is
// taken from its shards, and the decision's Taken[i] holds the shards rule
// i took from. The per-node fallback, should the store fail, takes items
// as they are. The take may be served in part (bucket.WithPartial).
func (x *Exchange) takeSharded(rules []*policy.Rule, items []bucket.Item) (bucket.ShardedDecision, error) {
	si := make([]bucket.ShardedItem, len(items))
	for i, rule := range rules {
		si[i].Item = items[i]
		if rule.Shards > 1 {
			si[i].Shards, si[i].Keys = rule.Shards, rule.ShardKeys(x.req.Principal, x.quote.Label)
		}
	}
	return bucket.TakeSharded(partialTakes, x.m.opt.Store, x.req.ID, si, nil)
}

// reservation is the usage a reservation of in input and out output
// tokens is priced as, with the request's search fees (its
// Estimate.WebSearches, SearchContext and SearchResults), container
// fee (Estimate.ContainerGB) and hosted tools' fees (Estimate.FileSearches,
// ImageTokens, CodeExecutionMinutes): for an audio request (Request.Audio) every token
// counts as audio too, since the estimate does not tell the audio from the
// text and audio costs more (policy.Price.MicroUSD prices it at the higher
// of the two rates).
func (x *Exchange) reservation(in, out int64) spec.Usage {
	e := &x.req.Estimate
	u := feesOf(e)
	u.InputTokens, u.OutputTokens = in, out
	// Which input the upstream writes to the cache is its choice: all of
	// it, at the dearest write price the body names, is the most it bills.
	if e.CacheWriteTokens > 0 && x.quote.Price.CacheWrite >= x.quote.Price.Input {
		u.CacheWriteTokens = in
		if e.CacheWrite1hTokens > 0 && x.quote.Price.CacheWrite1h >= x.quote.Price.CacheWrite {
			u.CacheWrite1hTokens = in
		}
	}
	if x.req.Audio {
		u.AudioInputTokens, u.AudioOutputTokens = in, out
	}
	return u
}

// feesOf is e's per-call fees, the figures a reservation takes as the
// estimate has them whatever its tokens: web searches (and the preview
// tool's flag), search context and results, container gigabyte-sessions,
// file searches, image generation tokens and code execution minutes; the
// token figures 0. Adding a fee to Request.Estimate means adding it here.
func feesOf(e *spec.Usage) spec.Usage {
	return spec.Usage{WebSearches: e.WebSearches, WebSearchPreview: e.WebSearchPreview,
		SearchContext: e.SearchContext, SearchResults: e.SearchResults, ContainerGB: e.ContainerGB,
		FileSearches: e.FileSearches, ImageTokens: e.ImageTokens, CodeExecutionMinutes: e.CodeExecutionMinutes}
}

// unmeteredHoldMicroUSD is what a call to an endpoint the operator lets
// through unweighed (Request.UnmeteredAllowed) reserves on a dollar rule,
// in micro-USD: one, so that a budget spent (or in debt from an earlier
// call's reported cost) refuses it, where a take of nothing always
// passes. Settlement charges what the upstream says it billed instead
// (Settlement.BilledMicroUSD; 0 when it says nothing): the micro-dollar
// is given back.
const unmeteredHoldMicroUSD = 1

// units is what t costs in rule's unit; a request that is not weighed
// costs one request and nothing else (but unmeteredHoldMicroUSD on a
// dollar rule for an unmetered call let through).
func (x *Exchange) units(rule *policy.Rule, t *spec.Usage) int64 {
	if x.req.PerImage > 0 {
		switch rule.Unit {
		case policy.UnitRequests, policy.UnitConcurrent:
			return 1
		case policy.UnitUSD:
			return x.imagesCost()
		}
		return 0 // refused at admission: a token rule cannot weigh it
	}
	if !x.req.Weighed && !rule.Unit.PerCall() {
		if rule.Unit == policy.UnitUSD && x.req.UnmeteredAllowed {
			return unmeteredHoldMicroUSD
		}
		return 0
	}
	return rule.UnitsOf(t, &x.quote.Price)
}

// imagesCost is a per-image generation's price: Images × PerImage
// micro-USD, saturating.
func (x *Exchange) imagesCost() int64 {
	n, each := max(x.req.Images, 1), x.req.PerImage
	if each > 0 && n > math.MaxInt64/each {
		return math.MaxInt64
	}
	return n * each
}

// failClosedRule returns the first applied rule that fails closed, or nil.
func failClosedRule(rules []Applied) *policy.Rule {
	for _, a := range rules {
		if !a.Rule.FailOpen {
			return a.Rule
		}
	}
	return nil
}

// Reload tells the meter a new policy is in force: it forgets the bucket
// keys it remembers for recent callers (keyMemo), which hold the replaced
// policy's rules and would keep that whole policy in memory until their
// slots were reused. A request still admitted under the old policy may
// fill a slot again just after; such entries go as new callers reuse
// their slots, and the memo never holds more than its 64 entries. Safe for
// concurrent use.
func (m *Meter) Reload() { m.keys.clear() }
