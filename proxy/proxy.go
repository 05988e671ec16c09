package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/valyala/fasthttp"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/bufpool"
	"github.com/llmguard/llmguard/internal/monoclock"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/obs"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/reserve"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// Weigher turns request bodies into estimates and counts streamed text.
// *weigher.Weigher satisfies it.
type Weigher interface {
	// WeighResolved estimates a body of request kind k (chat, responses,
	// completions, embeddings, messages, images) as a request for the model
	// resolve maps the body's model to (nil: the body's own), in one pass.
	WeighResolved(k weigher.Kind, body []byte, resolve func(bodyModel string) string) weigher.Estimate
	// NamedModel is the model a body of a kind that is not weighed names
	// (its top-level "model" string of a strict JSON object; "" for any
	// other body), resolved as WeighResolved resolves a weighed body's:
	// the model its ledger record names.
	NamedModel(body []byte, resolve func(bodyModel string) string) string
	// CountText counts text as model's tokenizer would, in tokens.
	CountText(model, text string) int64
	// ParseUsage reads the usage of a non-streamed JSON answer of kind k
	// to a request estimated as est: its Model's tokenizer counts any
	// output text the answer's usage does not, its OutputTokens is what
	// an answer holding hidden output with an implausible usage is charged
	// at least. est is read, never kept (a pointer: the 240-byte Estimate
	// copied into the call cost each answer some 130 instructions).
	ParseUsage(k weigher.Kind, body []byte, est *weigher.Estimate) (weigher.Usage, bool)
	// AnswerOutputTokens counts, in tokens of model's tokenizer, the
	// output text a non-streamed JSON answer of kind k carries (0 for an
	// answer it cannot read unambiguously): what a success answer without
	// usage is charged at least.
	AnswerOutputTokens(k weigher.Kind, body []byte, model string) int64
	// CutAnswerUsage is what the body of a non-streamed JSON answer of
	// kind k that was cut short (its upstream closed or broke off before
	// the end of its value) shows it cost, in tokens of model's tokenizer:
	// its whole text as output, or the output of a usage written before
	// the cut when more, and that usage's input; the zero Usage for any
	// other body (weigher.Weigher.CutAnswerUsage).
	CutAnswerUsage(k weigher.Kind, body []byte, model string) weigher.Usage
	// NewStream starts reading the SSE events of a streamed answer.
	NewStream(k weigher.Kind) weigher.Stream
	// Ceiling is the most the request estimated as e can plausibly be
	// billed (tokens; searches), which settlement charges an absurd
	// usage at (meter.Settlement.Ceiling). e is read, never kept.
	Ceiling(e *weigher.Estimate) weigher.Usage
}

// Options configures a Proxy. Upstreams, Policy, Store and Weigher are
// required.
type Options struct {
	Upstreams []*Upstream
	Policy    *policy.Policy
	Store     bucket.Store
	// Fallback serves fail-open limits while Store is unavailable (its Take
	// fails with an error other than bucket.ErrInvalid); nil admits them
	// unlimited instead. It is the per-node bucket.Fallback in production.
	Fallback bucket.Store
	// Charges, when set, takes what Fallback admitted on quotas and window
	// counters, to charge it to Store once it is back (meter.Options.Charges;
	// bucket.ChargeBack in production); nil: never charged.
	Charges meter.Charger
	// UnavailableRetry is the Retry-After of a 503 answered by a
	// fail-closed limit while the store is unavailable. Zero: 2s.
	UnavailableRetry time.Duration
	// StreamEndGrace is how long an upstream may stay silent after a
	// stream's terminal event ("[DONE]", response.completed,
	// message_stop) without ending its body or closing its connection
	// before llmguard ends the stream itself, settled at what it
	// reported (lingercut.go). Zero: 2s.
	StreamEndGrace time.Duration
	// UnmeteredPaths are the path globs (path.Match, against the lowercase
	// upstream path) of unmetered endpoints callers under token or dollar
	// limits may call anyway (unmetered_paths); the others are refused.
	UnmeteredPaths []string
	// MaxRetryWait is the longest wait a 429 lets an SDK sleep through
	// (max_retry_wait): a longer one also carries x-should-retry: false.
	// Zero: 60s.
	MaxRetryWait time.Duration
	Weigher      Weigher
	// MaxBodyBytes caps request bodies; larger ones get 413. Zero: 8 MiB.
	MaxBodyBytes int
	// BodyBudget caps the request-body bytes held in memory by all
	// requests at once (max_inflight_body_bytes); a body that does not fit
	// is refused with 503. At least MaxBodyBytes. Zero: 256 MiB.
	BodyBudget int64
	// MaxResponseBytes caps a non-streamed upstream body held whole to read
	// its usage; a larger one is streamed through and keeps its
	// reservation. Zero: 64 MiB.
	MaxResponseBytes int
	// ResponseBudget caps the bytes of non-streamed upstream answers held
	// in memory by all requests at once, their decoded copies included
	// (max_inflight_response_bytes); an answer that finds no room is
	// streamed through unread and keeps its reservation (answer.go). Zero:
	// 256 MiB.
	ResponseBudget int64
	// Outputs learns output reservations (output_reservation.learn); nil:
	// the fixed default.
	Outputs *reserve.Learner
	// PinOutputs forwards a chat, Responses, Messages or legacy
	// completions request that names no output maximum with its output
	// reservation written as its maximum (output_reservation.pin;
	// meter.Options.PinOutputs; never a completions body with echo), and
	// says so in x-llmguard-output-pinned; a background Responses run that
	// names none is then forwarded so rather than refused. False: such a
	// request is forwarded as sent (a background run refused 400
	// max_output_tokens_required).
	PinOutputs bool
	// Metrics receives counters; nil: none.
	Metrics *meter.Metrics
	// Ledger receives one record per forwarded request, upstream errors
	// included; nil: none. Write must not block (ledger.Writer drops and
	// counts when its buffer is full).
	Ledger meter.Ledger
	// Logger receives structured logs; nil: slog.Default().
	Logger *slog.Logger
	// AccessLog receives one line per request once it is settled; nil:
	// none, at no cost per request.
	AccessLog *obs.AccessLog
	// Tracing traces requests (a root span, children for weighing, the
	// take, the upstream call and settlement) and propagates W3C trace
	// context to the upstream; nil: no spans, no propagation, at no cost
	// per request.
	Tracing *obs.Tracing
	// Now is the clock that places a request in its quota periods (the
	// buckets' own clock is the store's). nil: time.Now. Tests steer it.
	Now func() time.Time
	// Waits holds requests denied by limits with on_limit: wait until
	// their buckets can pay (meter.Waits); nil: none waits.
	Waits *meter.Waits
	// Alerts is told each quota's level as a request settles (budget
	// threshold alerts); nil: none.
	Alerts meter.Alerts
	// Keys are the virtual keys kept outside the config file (the Redis
	// key store), consulted after the file's keys at the instant Now
	// gives (policy.Policy.Authenticate); nil: the file's keys only.
	Keys policy.KeySource

	// inject, when set, runs at each injection point of a request's life
	// (panics.go; the settlement's points are meter's); tests make it panic
	// to prove containment.
	inject func(point string)
}

// Proxy is the llmguard request handler: identify, weigh, take, forward,
// tap usage, reconcile. Safe for concurrent use.
type Proxy struct {
	opt    Options
	router *router
	log    *slog.Logger
	// meter admits and settles requests: the limits, the store, the
	// fallback, the ledger and the metrics of admission and settlement.
	meter *meter.Meter
	// live is the policy and weigher requests use now; Reload swaps it.
	// A request keeps the pair it started with until it is settled.
	live atomic.Pointer[live]
	// weighing holds one token per request being weighed: at most
	// GOMAXPROCS at once. Weighing is pure CPU; without the cap, dozens of
	// large bodies weighed at once keep every core's run queue long, and a
	// goroutine woken by a store reply waits behind them past
	// store.timeout (the take then fails open or closed for nothing).
	// Queued requests hold only their already-read bodies, which the
	// in-flight body budget bounds. A request that finds every slot busy
	// for weighWait weighs without one: a caller whose bodies are slow to
	// weigh may not hold everyone else's weighing for longer than that.
	weighing  chan struct{}
	weighWait time.Duration
	// streams runs stream writers on goroutines kept between streams
	// (stackpool.go).
	streams stackPool
	// bodies is the budget of request-body bytes held in memory
	// (Options.BodyBudget).
	bodies *semaphore.Weighted
	// bodyPool keeps the buffers of bodies read by Content-Length for
	// reuse (body.go).
	bodyPool *bufpool.Pool
	// shares is the body bytes each tenant holds, at most shareCap each
	// (see hold); guarded by shareMu. A tenant's entry stays, at zero,
	// when its bodies are released, so that its next body finds it (an
	// insert and a delete per request were 550 of the 870 instructions of
	// hold and unshare, BenchmarkProxyPath/llmguard under callgrind); past
	// maxIdleShares entries, one that falls to zero is dropped.
	shareMu  sync.Mutex
	shares   map[string]*int64
	shareCap int64
	// answers is the budget of answer bytes held in memory
	// (Options.ResponseBudget); answerPool keeps the grown buffers of
	// answers for reuse; unreadLog spaces the log lines about answers
	// relayed unread for want of room (answer.go).
	answers    answerBudget
	answerPool *bufpool.Pool
	unreadLog  *rate.Sometimes
	// unreachable spaces the log lines about calls that could not reach
	// their upstream (unreachable.go).
	unreachable *unreachableLog
	// lingering counts refused connections waiting to close (linger.go).
	lingering atomic.Int64
	// watch watches the clients of the requests held waiting for their
	// buckets, to drop those that leave, and of the answers being relayed,
	// to cut their upstreams (clientwatch.go).
	watch clientWatch
	// keySums remembers the SHA-256 of the credentials that identified a
	// caller, under a MAC, never in clear (policy.KeySums): a key is
	// hashed once, not on every request.
	keySums *policy.KeySums
}

// live is what a config reload replaces.
type live struct {
	policy  *policy.Policy
	weigher Weigher
	ietf    *ietfItems // the RateLimit fields' text of policy's rules
	// unmetered: Settings.UnmeteredPaths, lowercased once.
	unmetered    []string
	maxRetryWait time.Duration // Settings.MaxRetryWait, its zero defaulted
}

// Settings are the proxy options a config reload changes with the policy
// (Reload): the zero value has no unmetered path and the default 60s
// MaxRetryWait.
type Settings struct {
	// UnmeteredPaths: as Options.UnmeteredPaths.
	UnmeteredPaths []string
	// MaxRetryWait: as Options.MaxRetryWait. Zero: 60s.
	MaxRetryWait time.Duration
}

// Reload makes pol, w and s serve the next requests; requests in flight
// finish with what they started with. Buckets are keyed by limit name and
// subject, so a limit that keeps its name keeps its usage, under its new
// capacity and rate. Safe for concurrent use.
func (p *Proxy) Reload(pol *policy.Policy, w Weigher, s Settings) {
	p.opt.Metrics.Prepare(pol.Rules())
	l := &live{policy: pol, weigher: w, ietf: newIETFItems(pol), maxRetryWait: s.MaxRetryWait}
	if l.maxRetryWait <= 0 {
		l.maxRetryWait = time.Minute
	}
	for _, g := range s.UnmeteredPaths {
		l.unmetered = append(l.unmetered, strings.ToLower(g))
	}
	p.live.Store(l)
	p.meter.Reload()
}

// New checks opt and builds a Proxy. Errors: a required option is missing
// or an upstream's base URL is invalid.
func New(opt Options) (*Proxy, error) {
	if opt.Policy == nil || opt.Store == nil || opt.Weigher == nil || len(opt.Upstreams) == 0 {
		return nil, errors.New("proxy: Policy, Store, Weigher and at least one Upstream are required")
	}
	for _, u := range opt.Upstreams {
		if err := u.init(); err != nil {
			return nil, err
		}
		u.series = opt.Metrics.UpstreamSeries(u.Name)
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = 8 << 20
	}
	if opt.BodyBudget <= 0 {
		opt.BodyBudget = 256 << 20
	}
	if opt.BodyBudget < int64(opt.MaxBodyBytes) {
		return nil, fmt.Errorf("proxy: BodyBudget (%d) is below MaxBodyBytes (%d): no body of the largest size could be read", opt.BodyBudget, opt.MaxBodyBytes)
	}
	if opt.MaxResponseBytes <= 0 {
		opt.MaxResponseBytes = 64 << 20
	}
	if opt.ResponseBudget <= 0 {
		opt.ResponseBudget = 256 << 20
	}
	if opt.UnavailableRetry <= 0 {
		opt.UnavailableRetry = 2 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	m, err := meter.New(meter.Options{Store: opt.Store, Fallback: opt.Fallback, Charges: opt.Charges, Ledger: opt.Ledger, Metrics: opt.Metrics,
		Logger: opt.Logger, Now: opt.Now, Inject: opt.inject, Outputs: opt.Outputs, PinOutputs: opt.PinOutputs, Waits: opt.Waits, Alerts: opt.Alerts,
		Records: opt.AccessLog != nil || opt.Tracing != nil})
	if err != nil {
		return nil, err
	}
	px := &Proxy{opt: opt, router: newRouter(opt.Upstreams), log: opt.Logger, meter: m, bodies: semaphore.NewWeighted(opt.BodyBudget),
		weighing: make(chan struct{}, runtime.GOMAXPROCS(0)), weighWait: weighQueueWait,
		shares: make(map[string]*int64), shareCap: max(opt.BodyBudget/4, int64(opt.MaxBodyBytes)), bodyPool: newBodyPool(opt.BodyBudget),
		answerPool: newAnswerPool(opt.ResponseBudget), unreadLog: newUnreadLog(), keySums: policy.NewKeySums(),
		unreachable: newUnreachableLog(unreachableLogEvery)}
	px.answers.max = opt.ResponseBudget
	px.Reload(opt.Policy, opt.Weigher, Settings{UnmeteredPaths: opt.UnmeteredPaths, MaxRetryWait: opt.MaxRetryWait})
	return px, nil
}

// ErrorHandler answers errors fasthttp meets before the handler runs (a body
// over the server's size limit, when the server reads bodies itself: 413;
// anything else, such as malformed headers: 400), in OpenAI's shape.
func (p *Proxy) ErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	x := &exchange{}
	x.setID()
	if p.observed() {
		p.observe(ctx, x)
		defer p.handled(ctx, x)
	}
	ctx.Response.Header.DisableNormalizing()
	ctx.Response.Header.Set("x-llmguard-request-id", x.id)
	// In the flavor of the upstream the path routes to, when the request
	// line was read (OpenAI's otherwise).
	if path := ctx.Path(); len(path) > 0 {
		x.upstream, _ = p.router.route(string(path), &ctx.Request.Header)
	}
	// Answered and counted like the handler's own refusals, so that every
	// answer llmguard writes itself shows in llmguard_requests_total.
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		p.answer(ctx, x, refusal{err: errBodyTooLarge, outcome: meter.OutcomeInvalid})
		return
	}
	// The request line and headers did not fit the server's read buffer
	// (ReadBufferSize, which bounds them): 431, as fasthttp's own handler
	// answers, not the malformed-request 400.
	if _, ok := errors.AsType[*fasthttp.ErrSmallBuffer](err); ok {
		p.answer(ctx, x, refusal{err: errHeaderTooLarge, outcome: meter.OutcomeInvalid})
		return
	}
	p.answer(ctx, x, refusal{err: apiError{status: fasthttp.StatusBadRequest, openAIType: "invalid_request_error", openAICode: "invalid_request",
		anthropicType: "invalid_request_error", message: "Malformed HTTP request (or a body that ended before its declared length)."}, outcome: meter.OutcomeInvalid})
}

// exchange is the state of one request that outlives the handler when the
// response is streamed. It holds copies, never the RequestCtx's slices.
type exchange struct {
	id        string // idBuf's hex digits (setID)
	idBuf     [bucket.RequestIDLen]byte
	principal policy.Principal
	keyHeader string // the header the caller's key came from
	// keyField is, for a pass-through caller, the value of keyHeader as
	// identify read it: the one field forwarded (see forward), whatever
	// the body's trailer fields set after it was read.
	keyField string
	live     *live // the policy and weigher this request started with
	upstream *Upstream
	// path is the request's endpoint in OpenAI's spelling (the upstream's
	// dialect maps its own paths to it), which names its kind and which
	// rules' paths match; deployment is the Azure deployment the path
	// names, "" when none.
	path       string
	deployment string
	// knownPath: the request's decoded path is one of knownPaths
	// (internPathAt), which checkPath need not scan when it was sent as
	// spelled.
	knownPath bool
	// known is the route newRouter worked out for that known path, when
	// an upstream serves it (nil otherwise): its postKind is x.kind for a
	// POST (exchange.classify).
	known *pathRoute
	// unmeteredAllowed: an unmetered endpoint the operator lets callers
	// under token or dollar limits call (Options.UnmeteredPaths).
	unmeteredAllowed bool
	// pathFlavor is the flavor whose API the path is when no upstream
	// serves it (route's 404): the answer's shape. Unused once upstream is set.
	pathFlavor Flavor
	// stripUsage: llmguard added stream_options.include_usage, so the
	// usage-only chunk must not reach the client.
	stripUsage bool
	// forwarded: the upstream call has started, so the upstream may bill.
	forwarded bool
	// counted: the request's outcome is in requests_total (see
	// Proxy.count); set on the handler's goroutine only.
	counted bool
	// streaming: the answer is streamed by the body stream writer, which
	// settles the request after the handler returned. Set before that
	// writer starts, read-only after.
	streaming bool
	// uncodedFields: checkPath's walk of the request's fields (readFields)
	// found none named Content-Encoding in any case, so checkEncoding has
	// no coding to look up. false when the walk did not run (a read
	// method) or found one.
	uncodedFields bool
	kind          weigher.Kind
	// (The one-byte fields above are kept together: the exchange, which a
	// request allocates, stays within 3,192 bytes, the allocator's size
	// class of 3,200 with its header; TestExchangeSize.)
	// perImage is the price of each image of a per-image-billed generation
	// (DALL·E), in micro-USD; 0 for every other request.
	perImage int64
	// billed is what the upstream's answer header says it charged
	// (weigher.CostHeader, LiteLLM's), in micro-USD; 0 when it says
	// nothing (reportedCost). Settled as the least the request costs.
	billed int64
	est    weigher.Estimate
	// m is the request's admission, from the moment it was judged (nil
	// before): its rules, verdict and settlement. It points to admission,
	// where the meter writes it (meter.Meter.AdmitInto): the exchange,
	// never reused, holds it, so that a request allocates one state rather
	// than two.
	m         *meter.Exchange
	admission meter.Exchange
	// start is when the body had been read (monoclock.Now; zero before):
	// llmguard's overhead counts from it.
	start time.Duration
	// upstreamTime is the time spent waiting on the upstream (response
	// headers, and the body when it is read whole).
	upstreamTime time.Duration
	// status is the HTTP status the client got.
	status int
	// held, while set, is the upstream response the handler holds; a
	// panic recovered in the handler frees it (releaseHeld).
	held *fasthttp.Response
	// answer is the non-streamed answer read into memory, held until
	// fasthttp has written it (see heldAnswer).
	answer heldAnswer
	// watch watches the client while the request waits for its buckets
	// (wait.go); set at admission.
	watch clientWatcher
	// src and relayed are a streamed answer's source and what its stream
	// writer needs (relay sets them; stream owns src after), kept here
	// rather than in allocations of their own: the exchange lives until
	// the stream is settled.
	src     streamSource
	relayed streamRelay
	// obs is the request's access-log and trace state, nil when neither
	// is on (observe.go).
	obs *reqObs
}

// releaseHeld frees the upstream response the handler holds, if any.
func (x *exchange) releaseHeld() {
	if x.held != nil {
		x.held.CloseBodyStream()
		fasthttp.ReleaseResponse(x.held)
		x.held = nil
	}
}

// rules are the rules the request was judged by, with their statuses at
// admission; nil before admission.
func (x *exchange) rules() []meter.Applied {
	if x.m == nil {
		return nil
	}
	return x.m.Rules()
}

// modelLabel is the model's metric label once admission priced it, "" before.
func (x *exchange) modelLabel() string {
	if x.m == nil {
		return ""
	}
	return x.m.ModelLabel()
}

// settle settles the request's admission once with s (see
// meter.Exchange.Settle), the client's status filled in; nothing before
// admission.
func (x *exchange) settle(s meter.Settlement) {
	if x.m == nil {
		return
	}
	s.Status = x.status
	s.BilledMicroUSD = x.billed
	if (s.Source.Known() || x.billed > 0) && x.live != nil {
		// The most the request can have used: an absurd usage, or a cost
		// header above what it prices at, is charged at it
		// (meter.Settlement.Ceiling).
		s.Ceiling = x.live.weigher.Ceiling(&x.est)
	}
	if x.obs != nil {
		x.endUpstream(x.status, nil)
		sp := x.span(spanSettle)
		defer sp.End()
	}
	x.m.Settle(s)
}

// classify names the endpoint of a request from its decoded upstream path
// (see weigher.Classify: it errs towards weighing, so that no spelling of an
// endpoint an upstream might accept escapes its cost).
//
// A POST to one of knownPaths, the common case, is looked up in postKinds.
func classify(method []byte, path string) weigher.Kind {
	if string(method) == fasthttp.MethodPost {
		if k, ok := postKinds[path]; ok {
			return k
		}
	}
	return weigher.Classify(string(method), path)
}

// classify is classify(method, x.path), read from x's known route for a
// POST to a known path: no look-up.
func (x *exchange) classify(method []byte) weigher.Kind {
	if x.known != nil && string(method) == fasthttp.MethodPost {
		return x.known.postKind
	}
	return classify(method, x.path)
}

// readMethod is weigher.ReadMethod of method (GET, HEAD, DELETE or OPTIONS
// in any case): false at once for "POST" as sent, which is none of them in
// any case; the four case-folded comparisons (about 400 instructions a
// request at its two calls, callgrind) only for other methods.
// TestReadMethodSameAsWeigher, FuzzReadMethod hold it to weigher's.
func readMethod(method []byte) bool {
	if string(method) == fasthttp.MethodPost {
		return false
	}
	return weigher.ReadMethod(string(method))
}

// postKinds are weigher.Classify's kinds of a POST to each of knownPaths,
// worked out once: Classify is a function of the method and path alone
// and costs a few hundred nanoseconds (the path canonicalised, then
// matched against its tables).
var postKinds = func() map[string]weigher.Kind {
	m := make(map[string]weigher.Kind, len(knownPaths))
	for _, p := range knownPaths {
		m[p] = weigher.Classify(fasthttp.MethodPost, p)
	}
	return m
}()

// Handle is the fasthttp.RequestHandler of the proxy listener. Every answer
// llmguard writes itself leaves through answer, which writes it and counts
// the request in requests_total; a forwarded request is counted once when
// its answer starts. A panic while handling a request is recovered (see
// recoverHandler): the caller gets 500 in its flavor's shape and the
// process carries on.
func (p *Proxy) Handle(ctx *fasthttp.RequestCtx) {
	x := &exchange{} // start: when the body has been read (an observed request's overhead counts from obs.begin until then)
	x.setID()
	if p.observed() {
		p.observe(ctx, x)
		defer p.handled(ctx, x) // after the recovery below: a panic's answer is logged
	}
	defer p.recoverHandler(ctx, x)
	// Keep header names as written (lowercase x-ratelimit-*, as OpenAI
	// sends them) on the answers llmguard builds itself. The request id is
	// set where an answer is made (answer, relay, serveLimits; a recovered
	// panic and ErrorHandler set their own): a relayed answer's header is
	// replaced by the upstream's, so an id set here first was written twice
	// (a field costs about 390 instructions).
	ctx.Response.Header.DisableNormalizing()
	// A request refused before its body was read leaves the body on the
	// wire: the answer ends the connection, rather than llmguard reading the
	// body (fasthttp would drain up to 256 KiB of it to keep the
	// connection).
	defer func() {
		if unreadBody(ctx) {
			p.closeUnread(ctx)
		}
	}()
	if r := p.handle(ctx, x); r != nil {
		p.answer(ctx, x, *r)
	}
}

// refusal is an answer llmguard gives itself instead of the upstream's:
// the error, in the caller's flavor, and the requests_total outcome (and
// denying limit) it is counted as.
type refusal struct {
	err     apiError
	outcome meter.Outcome
	limit   string
}

// answer writes r as the whole response and counts the request, once.
func (p *Proxy) answer(ctx *fasthttp.RequestCtx, x *exchange, r refusal) {
	p.count(x, r.outcome, r.limit)
	setField(&ctx.Response.Header, requestIDField, []byte(x.id))
	r.err.write(ctx, x.flavor())
}

// count records the request's outcome in requests_total; only the first
// call for an exchange counts, so that a request is counted exactly once
// whatever way (answer, relay, recovered panic) it leaves.
func (p *Proxy) count(x *exchange, outcome meter.Outcome, limit string) {
	if x.counted {
		return
	}
	x.counted = true
	if x.obs != nil {
		x.obs.outcome, x.obs.limit = outcome, limit
	}
	p.contain(meter.StageMetrics, x, func() {
		if x.m != nil { // its flavor and model label are x's
			p.opt.Metrics.RequestOf(x.m, outcome, limit)
			return
		}
		p.opt.Metrics.Request(x.flavor(), "", outcome, limit)
	})
}

// flavor is the flavor the caller is answered in: its upstream's; while no
// upstream is known, that of the API its path belongs to when routing found
// none for it (pathFlavor), else OpenAI's (pathFlavor's zero value).
func (x *exchange) flavor() Flavor {
	if x.upstream == nil {
		return x.pathFlavor
	}
	return x.upstream.Flavor
}

// handle takes a request through route, identify, read, weigh, take and
// forward; a step that refuses it returns the refusal Handle answers.
func (p *Proxy) handle(ctx *fasthttp.RequestCtx, x *exchange) *refusal {
	path, upPath, r := p.route(ctx, x)
	if r != nil {
		return r
	}
	// Authenticated before the path is judged: a caller without a valid
	// key learns nothing about routing from a path refusal.
	if r := p.identify(ctx, x); r != nil {
		return r
	}
	rawUpPath, r := p.checkPath(ctx, x, path, upPath)
	if r != nil {
		return r
	}
	// Any spelling: case, slashes, ;params (as endpoints are recognised); a
	// known path routed unchanged is not it (knownRoute).
	if !knownRoute(x, path, upPath) && weigher.CanonicalPath(x.path) == LimitsPath {
		return p.serveLimits(ctx, x)
	}
	p.inject(pointHandler)
	// A weighed endpoint takes only bodies llmguard can decode: refused
	// from the headers, before a byte of the body is read.
	x.kind = x.classify(ctx.Method())
	codings, r := checkEncoding(&ctx.Request.Header, x.kind, x.uncodedFields)
	if r != nil {
		return r
	}

	// Read the body within max_body_bytes and the in-flight body budget.
	held, refused, ok := p.readBody(ctx, x.principal.Tenant)
	if !ok {
		if refused.status == fasthttp.StatusServiceUnavailable {
			ctx.Response.Header.Set("Retry-After", strconv.Itoa(bodyBudgetRetry))
			return &refusal{err: refused, outcome: meter.OutcomeOverloaded}
		}
		return &refusal{err: refused, outcome: meter.OutcomeInvalid}
	}
	// Held until the request is forwarded (or refused): the upstream has
	// the whole body once forward returns, even for a streamed answer.
	// (Decoding adds to what is held.)
	defer func() { p.releaseBody(ctx, held) }()
	if len(held.b) > 0 && readMethod(ctx.Method()) {
		// Counted as one request whatever its path (weigher.Classify):
		// a body would reach an upstream that routes by path alone
		// unweighed.
		return &refusal{err: errReadWithBody, outcome: meter.OutcomeInvalid}
	}
	if !x.est.LongContext && trailerLongContext(&ctx.Request.Header) {
		x.est.LongContext = true
	}
	ctx.Request.SetBodyRaw(held.b) // later readers of ctx.Request.Body() get these bytes
	if r := p.decodeBody(ctx, &held, codings); r != nil {
		return r
	}
	body := held.b
	x.start = monoclock.Now() // llmguard's overhead excludes the client's upload

	sp := x.span(spanWeigh)
	r = p.weigh(ctx, x, body)
	sp.End()
	if r != nil {
		return r
	}
	sp = x.span(spanTake)
	r = p.admit(ctx, x, body)
	sp.End()
	if r != nil {
		return r
	}
	r = p.forward(ctx, x, rawUpPath, body)
	p.opt.Metrics.Overhead(monoclock.Since(x.start) - x.upstreamTime - waitedOf(x)) // the hold of on_limit: wait is not llmguard's work
	return r
}

// route picks the upstream of a request from its decoded, normalised path
// (returned as path) and returns the path the upstream is to be sent
// (upPath, decoded); it
// refuses only a request no upstream can take (no upstream for the path,
// a doubled version root), before the caller is identified, since the
// credential's header depends on the upstream's flavor. checkPath judges
// the path itself once the caller is known.
func (p *Proxy) route(ctx *fasthttp.RequestCtx, x *exchange) (path, upPath string, r *refusal) {
	path, i := internPathAt(ctx.Path())
	x.knownPath = i >= 0
	if x.knownPath && i < len(p.router.known) {
		if kr := &p.router.known[i]; kr.up != nil {
			// Worked out by newRouter, as the lines below would find it.
			x.upstream, x.known = kr.up, kr
			x.path, x.deployment = kr.path, kr.deployment
			return path, kr.upPath, nil
		}
	}
	// No known path doubles a version root (TestKnownPathsNotDoubled).
	if !x.knownPath && hasPathPrefix(path, "/v1/") && hasPathPrefix(path[3:], "/v1") && !p.router.hasPrefixFor(path) {
		rest := path[3:]
		// A base URL that ends in /v1 given to an SDK that adds /v1 itself
		// (Anthropic's): no API llmguard fronts has such a path, and the
		// fallback upstream would get it with its own key.
		x.pathFlavor = p.router.owner(rest, &ctx.Request.Header)
		return "", "", &refusal{err: doubledVersion(path), outcome: meter.OutcomeInvalid}
	}
	// A known path is a weighed endpoint's (or Azure's, or under
	// /v1/messages), which no field moves: its fields are not read
	// (TestKnownPathsNotMovedByAnthropicVersion).
	h := &ctx.Request.Header
	if x.knownPath {
		h = nil
	}
	up, upPath := p.router.route(path, h)
	if up == nil {
		x.pathFlavor = p.router.unserved(path)
		return "", "", &refusal{err: noUpstream(x.pathFlavor), outcome: meter.OutcomeInvalid}
	}
	x.upstream = up
	x.path, x.deployment = up.dialect.endpoint(upPath)
	return path, upPath, nil
}

// checkPath judges the path of an identified caller's request (path, as
// route returned it). Route and
// classify on the decoded, normalised path (upPath); forward the path
// exactly as the client sent it (rawUpPath). Both must name the same
// upstream path, or the request could be weighed as one endpoint and
// served as another: a path that servers may read differently (plainPath)
// is refused, as is one that names a model outside the body.
func (p *Proxy) checkPath(ctx *fasthttp.RequestCtx, x *exchange, path, upPath string) (rawUpPath string, r *refusal) {
	up := x.upstream
	raw := path // the same bytes: no second copy
	if orig := ctx.Request.URI().PathOriginal(); string(orig) != path {
		raw = string(orig)
	}
	// A known path sent as it is spelled is plain (TestKnownPathsArePlain):
	// the scan is for every other.
	if !(x.knownPath && raw == path) && !plainPath(raw) {
		return "", &refusal{err: errOddPath, outcome: meter.OutcomeInvalid}
	}
	rawUpPath, ok := stripPrefix(raw, up.PathPrefix)
	if !ok {
		return "", &refusal{err: errAmbiguousPath, outcome: meter.OutcomeInvalid}
	}
	if !readMethod(ctx.Method()) {
		if queryNamesModel(ctx.URI().QueryString()) || namesModelSegment(x, path, upPath) {
			return "", &refusal{err: errModelOutsideBody, outcome: meter.OutcomeInvalid}
		}
		// est.LongContext, until weigh sets est, carries what the walk
		// found: a field in the exchange would grow it past its budget
		// (TestExchangeSize), for one bit the estimate already has.
		var f fieldsRead
		if f = readFields(&ctx.Request.Header); f.routes {
			return "", &refusal{err: errModelOutsideBody, outcome: meter.OutcomeInvalid}
		}
		if f.retries {
			return "", &refusal{err: errGatewayRetryField, outcome: meter.OutcomeInvalid}
		}
		x.est.LongContext, x.uncodedFields = f.long, !f.coded

	}
	return rawUpPath, nil
}

// Routing fields are request fields with which a gateway upstream lets a
// request pick its own provider, key, deployment or model, over the
// body's: Portkey's x-portkey-* fields (x-portkey-config, a config id or
// JSON object whose targets and override_params name other models, with
// fallbacks, "the request-specific configuration will take precedence";
// x-portkey-provider, -virtual-key, -custom-host, and provider fields such
// as x-portkey-azure-deployment-id;
// https://github.com/Portkey-AI/docs/blob/v2/api-reference/headers.md,
// https://portkey.ai/docs/aigw/product/ai-gateway/configs), but for its
// tracing and metadata fields (portkeyPassed); and Helicone's
// Helicone-Fallbacks.

// portkeyPassed are the x-portkey-* fields that route nothing (tracing and
// metadata), lower case after the prefix.
var portkeyPassed = []string{"trace-id", "metadata", "span-id", "parent-span-id", "span-name"}

// isRoutingField reports whether k, a field name in any case, is a
// routing field, or one behind LiteLLM's x-pass- prefix (passedName),
// which reaches the upstream under the routing field's own name.
func isRoutingField(k []byte) bool { return routingName(passedName(k)) }

// routingName is isRoutingField for a name already without its x-pass-
// prefixes (passedName).
func routingName(k []byte) bool {
	const portkey = "x-portkey-"
	switch {
	case len(k) > len(portkey) && (k[0]|0x20) == 'x' && bytes.EqualFold(k[:len(portkey)], []byte(portkey)):
		rest := k[len(portkey):]
		for _, p := range portkeyPassed {
			if bytes.EqualFold(rest, []byte(p)) {
				return false
			}
		}
		return true
	case len(k) == len("helicone-fallbacks") && (k[0]|0x20) == 'h':
		return bytes.EqualFold(k, []byte("helicone-fallbacks"))
	}
	return false
}

// fieldsRead is what readFields found in a request's fields.
type fieldsRead struct {
	// routes: a routing field with a value (an empty one routes nothing),
	// with which the request could be served, and billed, as a model
	// llmguard did not price; every field is read with its own value, so
	// an empty field first and a second of the same name with a value is
	// a routing request too (the walk stops there: the request is
	// refused, and long and coded are then not known).
	routes bool
	// long: an anthropic-beta field (isAnthropicBeta: its name in any
	// case, or behind LiteLLM's x-pass- prefix), any of its repeats, naming a context-1m beta (weigher.LongContextBeta): such a
	// call may read up to weigher.LongContextInputTokens of input whatever
	// the model's configured max_input_tokens, so its hidden-context
	// reservation and usage ceiling take that window
	// (weigher.WithLongContext). Any weighed request carrying it is taken
	// at its word, Messages or not: a gateway may pass the field on to
	// Claude from another API's request, and the field only ever raises
	// the caller's own reservation.
	long bool
	// retries: a field with which a gateway upstream retries the call
	// itself (gatewayRetries), every attempt billed while llmguard
	// settles one.
	retries bool
	// coded: a field named Content-Encoding, in any case, empty or not
	// (checkEncoding reads their values; without one it has none to read:
	// fasthttp keeps no Content-Encoding of a request outside its list of
	// fields, and refuses one in a trailer).
	coded bool
}

// readFields reads the request fields h holds in one walk. It never
// allocates.
func readFields(h *fasthttp.RequestHeader) (f fieldsRead) {
	for k, v := range h.All() {
		if len(k) == len(fasthttp.HeaderContentEncoding) && !f.coded && bytes.EqualFold(k, contentEncoding) {
			f.coded = true
		}
		if len(v) == 0 {
			continue
		}
		n := passedName(k) // once a field, for the three name checks
		if routingName(n) {
			f.routes = true
			return f
		}
		if !f.long && anthropicBetaName(n) && weigher.LongContextBeta(v) {
			f.long = true
		}
		if !f.retries && retriesNamed(n, v) {
			f.retries = true
		}
	}
	return f
}

// trailerLongContext reports whether a field of h's trailer section (the
// fields a chunked body ends with, read with the body, after checkPath
// walked the header section) is an anthropic-beta naming a context-1m
// beta (weigher.LongContextBeta). fasthttp keeps trailer fields apart
// until the request is forwarded, where they join the header section
// (removeFields drops the Trailer announcement) and reach the upstream
// (an x-pass-anthropic-beta too: isAnthropicBeta): such a beta widens the window the upstream reads as one in the header
// section does (adv54: sent as a trailer, it reserved the model's
// 200,000-token window while the upstream read 900,000). A request
// without a trailer costs one length check.
func trailerLongContext(h *fasthttp.RequestHeader) bool {
	for _, k := range h.PeekTrailerKeys() {
		if !isAnthropicBeta(k) {
			continue
		}
		for _, v := range h.PeekAll(string(k)) {
			if weigher.LongContextBeta(v) {
				return true
			}
		}
	}
	return false
}

// gatewayRetryField is a request field with which a caller sets how many
// times a gateway upstream tries a call itself, and the largest value
// that asks for no retry. With a short timeout (x-litellm-timeout,
// cf-aig-request-timeout) each attempt runs, and is billed, upstream while
// the gateway gives up on it, where llmguard settles one call.
type gatewayRetryField struct {
	name string // lower case
	most float64
}

// gatewayRetryFields: LiteLLM's proxy reads x-litellm-num-retries (retries
// after the first call) ahead of a body's num_retries and its config's
// (https://docs.litellm.ai/docs/proxy/request_headers: "The number of
// retries for the request"); Cloudflare AI Gateway reads
// cf-aig-max-attempts (attempts, 1 to 5, the first included; a timeout
// triggers a retry: https://developers.cloudflare.com/ai-gateway/configuration/request-handling/).
// An immutable table.
var gatewayRetryFields = [...]gatewayRetryField{{"x-litellm-num-retries", 0}, {"cf-aig-max-attempts", 1}}

// retryFieldOf is the gatewayRetryFields entry a request field named k
// reaches a gateway as (any case, or behind an x-pass- prefix), nil for
// none. removeFields drops such a field that a chunked body's trailer
// brought after checkPath read the fields; one in the header section
// asking for no retry goes too, which leaves the gateway's configured
// retries, the operator's.
func retryFieldOf(k []byte) *gatewayRetryField { return retryFieldNamed(passedName(k)) }

// retryFieldNamed is retryFieldOf for a name already without its x-pass-
// prefixes (passedName).
func retryFieldNamed(k []byte) *gatewayRetryField {
	for i := range gatewayRetryFields {
		if f := &gatewayRetryFields[i]; len(k) == len(f.name) && bytes.EqualFold(k, []byte(f.name)) {
			return f
		}
	}
	return nil
}

// isGatewayRetryField reports whether a request field named k is one of
// gatewayRetryFields (retryFieldOf).
func isGatewayRetryField(k []byte) bool { return retryFieldOf(k) != nil }

// gatewayRetries reports whether a request field k: v asks a gateway to
// retry the call itself: k is one of gatewayRetryFields and v is not a
// count at most its entry's (a value the gateway cannot read as a count
// is refused too, erring towards refusing). As a body's num_retries
// (weigher.FaultGatewayRetries), it is refused: llmguard would reserve
// and settle one call for every attempt billed.
func gatewayRetries(k, v []byte) bool { return retriesNamed(passedName(k), v) }

// retriesNamed is gatewayRetries for a name already without its x-pass-
// prefixes (passedName).
func retriesNamed(k, v []byte) bool {
	f := retryFieldNamed(k)
	if f == nil {
		return false
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(string(v)), 64)
	return err != nil || !(n <= f.most)
}

// passPrefix is the prefix of a request field LiteLLM's pass-through
// routes (its /anthropic, /vertex_ai, /bedrock… endpoints) forward to the
// provider under the rest of its name, whatever their allowlist: a
// caller's "x-pass-anthropic-beta: v" reaches Anthropic as
// "anthropic-beta: v" (https://docs.litellm.ai/docs/proxy/forward_client_headers,
// litellm/constants.py PASS_THROUGH_HEADER_PREFIX).
const passPrefix = "x-pass-"

// passedName is the field name k an upstream such as LiteLLM forwards a
// field named k under: k without its x-pass- prefixes (ASCII case aside;
// all of them, where LiteLLM strips one, erring towards reading the
// field). It never allocates.
func passedName(k []byte) []byte {
	for len(k) > len(passPrefix) && (k[0]|0x20) == 'x' && bytes.EqualFold(k[:len(passPrefix)], []byte(passPrefix)) {
		k = k[len(passPrefix):]
	}
	return k
}

// isAnthropicBeta reports whether a request field named k reaches the
// upstream as anthropic-beta: that name in any case, or behind an x-pass-
// prefix (passedName). Its length is compared first: bytes.EqualFold is a
// call that compares until the first byte that differs, about 40
// instructions a field of another name (perf30).
func isAnthropicBeta(k []byte) bool { return anthropicBetaName(passedName(k)) }

// anthropicBetaName is isAnthropicBeta for a name already without its
// x-pass- prefixes (passedName).
func anthropicBetaName(k []byte) bool {
	return len(k) == len(anthropicBeta) && bytes.EqualFold(k, anthropicBeta)
}

// contentEncoding is the name of the Content-Encoding field.
var contentEncoding = []byte(fasthttp.HeaderContentEncoding)

// anthropicBeta is the request field naming the Anthropic betas a call
// opts into (a comma-separated list; the field may be repeated).
var anthropicBeta = []byte("anthropic-beta")

// queryNamesModel reports whether a query string, decoded once ('+' as a
// space), holds "model" in any case: OpenAI-compatible servers such as
// LiteLLM's proxy bill the model of a ?model= parameter over the body's,
// which is the one llmguard prices. No API llmguard fronts takes a model
// in the query (Azure's api-version does not match).
func queryNamesModel(q []byte) bool {
	if len(q) < len("model") {
		return false
	}
	const word = "model"
	matched := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == '%' && i+2 < len(q) && unhexable(q[i+1]) && unhexable(q[i+2]) {
			c = unhex(q[i+1])<<4 | unhex(q[i+2])
			i += 2
		}
		if c|0x20 == word[matched] {
			if matched++; matched == len(word) {
				return true
			}
			continue
		}
		matched = 0
		if c|0x20 == word[0] {
			matched = 1
		}
	}
	return false
}

// namesModelSegment reports whether upPath, x's path as route returned it
// (path, upPath), has a segment that names a model outside the body:
// "engines", or "deployments" outside Azure. A known path routed
// unchanged has none (knownRoute), and is not walked.
func namesModelSegment(x *exchange, path, upPath string) bool {
	if knownRoute(x, path, upPath) {
		return false
	}
	return hasSegment(upPath, "engines") || x.upstream.Flavor != FlavorAzure && hasSegment(upPath, "deployments")
}

// knownRoute reports whether x's decoded path is one of knownPaths
// (internPathAt) and reached its upstream unchanged: route's path, upPath
// (no path_prefix stripped) and x.path (a dialect that maps it to itself)
// are the same string. Such a path has no "engines" nor "deployments"
// segment and is not LimitsPath in any spelling
// (TestKnownPathsNameNoModelNorLimits), so that the walks that look for
// them (hasSegment: 1,140 instructions a chat request, and
// weigher.CanonicalPath: 530, in BenchmarkProxyPath/llmguard under
// callgrind) are skipped for it.
func knownRoute(x *exchange, path, upPath string) bool {
	return x.knownPath && upPath == path && x.path == path
}

// hasSegment reports whether path has a segment equal to seg, an ASCII
// name, in any case (strings.EqualFold's: Unicode simple folding, so that
// "engineſ" spells "engines"), with any ";params" part dropped (as servlet
// containers drop it before routing, and weigher.Classify before
// classifying). It runs on every request: the segments are walked in
// place, and only those whose length could fold to seg's are compared (an
// equal fold has seg's number of runes, each of 1 to utf8.UTFMax bytes).
func hasSegment(path, seg string) bool {
	for {
		part, rest, more := strings.Cut(path, "/")
		if i := strings.IndexByte(part, ';'); i >= 0 {
			part = part[:i]
		}
		if len(part) >= len(seg) && len(part) <= utf8.UTFMax*len(seg) && strings.EqualFold(part, seg) {
			return true
		}
		if !more {
			return false
		}
		path = rest
	}
}

// knownPaths are the endpoint paths of the kinds llmguard weighs, as their
// APIs spell them (weigher.KindPaths), as sent and behind Azure's /openai
// root.
var knownPaths = func() []string {
	var ps []string
	for _, p := range weigher.KindPaths() {
		ps = append(ps, p, "/openai"+p)
	}
	return ps
}()

// internPathAt returns b as a string: one of knownPaths, without
// allocating, when it spells one, with its position there (i); a copy
// otherwise, with i -1.
func internPathAt(b []byte) (s string, i int) {
	for i, p := range knownPaths {
		if string(b) == p {
			return p, i
		}
	}
	return string(b), -1
}

// identify finds the caller from the headers alone: an unknown caller is
// refused before a byte of its body is read.
func (p *Proxy) identify(ctx *fasthttp.RequestCtx, x *exchange) *refusal {
	key, keyHeader := x.upstream.dialect.credential(&ctx.Request.Header)
	cur := p.live.Load()
	x.live = cur
	var now time.Time // only stored keys expire: no clock read without a key store
	if p.opt.Keys != nil {
		now = p.opt.Now()
	}
	pr, st := cur.policy.AuthenticateSums(key, p.keySums, p.opt.Keys, now)
	switch st {
	case policy.KeyAccepted:
	case policy.KeyExpired, policy.KeyRotated, policy.KeyRevoked:
		// Refused, but named in the access log and traces: the operator
		// sees which stored key a client still uses, and for what.
		x.principal, x.kind = pr, x.classify(ctx.Method())
		switch st {
		case policy.KeyExpired:
			return &refusal{err: errKeyExpired, outcome: meter.OutcomeUnauthorized}
		case policy.KeyRotated:
			return &refusal{err: errKeyRotated, outcome: meter.OutcomeUnauthorized}
		}
		return &refusal{err: errKeyRevoked, outcome: meter.OutcomeUnauthorized}
	case policy.KeyMalformed:
		x.kind = x.classify(ctx.Method())
		return &refusal{err: errKeyMalformed, outcome: meter.OutcomeUnauthorized}
	default:
		x.kind = x.classify(ctx.Method())
		if adminOnlyPath(x.path) {
			return &refusal{err: errAdminPathUnauthorized, outcome: meter.OutcomeUnauthorized}
		}
		return &refusal{err: errUnauthorized, outcome: meter.OutcomeUnauthorized}
	}
	x.principal = pr
	x.keyHeader = keyHeader
	if pr.PassThrough {
		x.keyField = string(ctx.Request.Header.Peek(keyHeader))
	}
	return nil
}

// adminOnlyPath reports whether path is one the admin listener serves
// (AdminHandler: /healthz, /readyz, /metrics, and /admin/… in internal/app)
// and no LLM API has: a caller without a key there is most likely a scrape
// or a probe sent to the wrong port.
func adminOnlyPath(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return strings.HasPrefix(path, "/admin/")
}

// weigh estimates the cost of the request handle classified (x.kind).
func (p *Proxy) weigh(ctx *fasthttp.RequestCtx, x *exchange, body []byte) *refusal {
	if x.kind.Weighed() {
		long := x.est.LongContext // route's walk of the fields
		p.weighAs(x, body)
		if long {
			// Anthropic's 1M-context beta: the window its hidden
			// context and usage ceiling are reserved at.
			x.est = weigher.WithLongContext(x.est)
		}
		if x.kind == weigher.KindImages && x.est.Parsed && !weigher.TokenBilledImages(x.est.Model) {
			// Billed per image (DALL·E), not in tokens: priced per image
			// when the table prices the model so, unmetered otherwise.
			each, ok := x.live.policy.ImagePrice(x.est.Model, x.est.ImageQuality, x.est.ImageSize)
			if ok {
				x.perImage = each
				x.est = weigher.Estimate{Model: x.est.Model, Parsed: true, Images: x.est.Images, Stream: x.est.Stream}
			} else {
				x.kind, x.est = weigher.KindUnmetered, weigher.Estimate{Model: x.est.Model}
			}
		}
	}
	if x.kind == weigher.KindUnmetered || x.perImage > 0 {
		x.unmeteredAllowed = x.live.unmeteredAllowed(x.path)
		if x.kind == weigher.KindUnmetered && !x.unmeteredAllowed && weigher.OffProxy(string(ctx.Method()), x.path) {
			// A Realtime key or session: what it spends never passes
			// through llmguard, so no rule, a request rule included,
			// can count it.
			return &refusal{err: offProxy(x.path), outcome: meter.OutcomeUnmetered}
		}
	}
	if x.kind.Weighed() {
		if !x.est.Parsed {
			// Not weighed exactly as every upstream reads it (not strict
			// UTF-8 JSON, not an object, a key twice or in another case,
			// nested past max_json_depth): a lenient upstream could serve
			// what llmguard did not weigh, so it is refused, never
			// forwarded, never charged.
			return &refusal{err: faultError(x.est), outcome: meter.OutcomeInvalid}
		}
		setEstimateHeader(&ctx.Response.Header, &x.est)
	}
	if x.est.Background && x.est.OutputDefaulted && !p.pinsUnbounded(x.kind, &x.est) {
		// Never reconciled: its reservation must bound its output. With
		// output_reservation.pin it does: admission writes it into the
		// body as max_output_tokens (capBody), which bounds the run's
		// output, reasoning included.
		return &refusal{err: errBackgroundUnbounded, outcome: meter.OutcomeInvalid}
	}
	if len(x.est.Model) > maxModelName {
		return &refusal{err: errModelName, outcome: meter.OutcomeInvalid}
	}
	return nil
}

// rulePath is the path a request's rules' paths are matched against: its
// kind's own spelling (/v1/chat/completions) for an endpoint llmguard
// recognises, whatever the request's spelling (/Chat/Completions/,
// /openai/deployments/d/chat/completions), so that no spelling escapes a
// path rule; the canonical path (weigher.CanonicalPath) otherwise.
func rulePath(k weigher.Kind, path string) string {
	if p := k.Path(); p != "" {
		return p
	}
	return weigher.CanonicalPath(path)
}

// unmeteredAllowed reports whether the operator lets callers under token
// or dollar limits call the unmetered endpoint upPath.
func (l *live) unmeteredAllowed(upPath string) bool {
	c := weigher.CanonicalPath(upPath)
	for _, g := range l.unmetered {
		if ok, _ := path.Match(g, c); ok {
			return true
		}
	}
	return false
}

// weighAs weighs body as the model it is served by: an Azure deployment
// (named by the path, or on the v1 API by the body's model) as the model
// upstreams[].deployments maps it to, so that it is counted with that
// model's tokenizer, reserved its default output, priced and limited as
// it; any other request as the model its body names, into x.est (set in
// place: an Estimate is 240 bytes, copied once more when returned). The
// body is read once.
func (p *Proxy) weighAs(x *exchange, body []byte) {
	if p.takeWeighSlot() {
		defer func() { <-p.weighing }()
	}
	x.est = x.live.weigher.WeighResolved(x.kind, body, servedModel(x))
}

// servedModel maps the model a request's body names ("" for none) to the
// model x's upstream serves it with: an Azure deployment's (named by the
// path, or on the v1 API by the body's model) as upstreams[].deployments
// maps it; nil, the body's own, for any other upstream.
func servedModel(x *exchange) func(bodyModel string) string {
	up := x.upstream
	switch {
	case x.deployment != "":
		m := up.modelOf(x.deployment)
		return func(string) string { return m }
	case len(up.deployments) > 0:
		return func(name string) string {
			if m, ok := up.mapsModel(name); ok {
				return m
			}
			return name
		}
	}
	return nil
}

// namedModel is the model the body of a request that is not weighed
// (count_tokens, moderations, an unmetered endpoint) names, resolved as a
// weighed request's would be, for its ledger record (meter.Request's
// NamedModel); "" for a weighed request, which is priced and limited as
// its model (x.est.Model), and for a name longer than maxModelName, which
// a weighed request would be refused for.
func namedModel(x *exchange, body []byte) string {
	if x.kind.Weighed() || x.est.Model != "" {
		return ""
	}
	m := x.live.weigher.NamedModel(body, servedModel(x))
	if len(m) > maxModelName {
		return ""
	}
	return m
}

// setEstimateHeader says, in x-llmguard-estimate, how an estimate is not
// exact: "partial" when the upstream adds context llmguard cannot see
// (previous_response_id, conversation, stored files: reconciliation charges
// it), "bound" when part of the text was counted with the weigher's upper
// bound (exact_count_max_bytes, count_time_budget: reconciliation refunds
// the excess); nothing for an exact one.
func setEstimateHeader(h *fasthttp.ResponseHeader, est *weigher.Estimate) {
	switch {
	case est.ServerContext:
		h.Set("x-llmguard-estimate", "partial")
	case est.Bounded:
		h.Set("x-llmguard-estimate", "bound")
	}
}

// weighQueueWait is the longest a request waits for a weighing slot
// before it is weighed without one (see Proxy.weighing): a few store
// timeouts' worth, far below what a caller notices.
const weighQueueWait = 50 * time.Millisecond

// ReadBufferSize is the fasthttp.Server.ReadBufferSize the proxy's server
// is to be given, in bytes: it bounds a request's line and headers
// together, and one that overflows it gets 431 (errHeaderTooLarge names
// this size). 16 KiB holds the longest credential llmguard passes through
// (4 KiB, see policy's token68) with room for the rest.
const ReadBufferSize = 16 << 10

// takeWeighSlot takes a weighing slot, waiting at most p.weighWait; false
// when it weighs without one.
func (p *Proxy) takeWeighSlot() bool {
	select {
	case p.weighing <- struct{}{}:
		return true
	default:
	}
	t := slotTimers.Get().(*time.Timer)
	t.Reset(p.weighWait)
	defer func() {
		// Stopped, a timer's channel holds no stale tick (Go 1.23 timers),
		// so the next Reset starts clean.
		t.Stop()
		slotTimers.Put(t)
	}()
	select {
	case p.weighing <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// slotTimers are stopped timers for takeWeighSlot's wait: under load most
// requests find every slot busy, and a timer made for each (and the
// runtime's work to add it) is reused instead.
var slotTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// errLimiter answers a take the store refused as invalid.
var errLimiter = apiError{status: fasthttp.StatusInternalServerError, openAIType: "api_error", openAICode: "limiter_error",
	anthropicType: "api_error", message: "llmguard could not evaluate its limits for this request."}

// admit has the meter judge the request: its limits matched and its cost
// taken from them, two-phase, before any byte goes upstream. A refusal is
// answered in the caller's flavor with the headers its SDK reads. body is
// read only for the model a request that is not weighed names
// (namedModel).
func (p *Proxy) admit(ctx *fasthttp.RequestCtx, x *exchange, body []byte) *refusal {
	x.m = p.meter.AdmitInto(&x.admission, &meter.Request{ID: x.id, Principal: x.principal, Policy: x.live.policy, Flavor: x.upstream.Flavor,
		Path: rulePath(x.kind, x.path), Model: x.est.Model, NamedModel: namedModel(x, body), ServiceTier: x.est.ServiceTier, Audio: x.est.Audio, GeoPinned: x.est.GeoPinned, Weighed: x.kind.Weighed(),
		Unmetered: x.kind == weigher.KindUnmetered && !x.unmeteredAllowed, UnmeteredAllowed: x.unmeteredAllowed,
		Images: x.est.Images, PerImage: x.perImage,
		Estimate: spec.Usage{InputTokens: x.est.InputTokens, OutputTokens: x.est.OutputTokens, WebSearches: x.est.WebSearches,
			WebSearchPreview: x.est.WebSearchPreview, SearchContext: x.est.SearchContext, SearchResults: x.est.SearchResults, ContainerGB: x.est.ContainerGB,
			FileSearches: int64(x.est.FileSearches), ImageTokens: x.est.ImageTokens, CodeExecutionMinutes: x.est.CodeExecutionMinutes,
			CacheWriteTokens: cacheWrite(x.est.CacheWrite, x.est.InputTokens), CacheWrite1hTokens: cacheWrite(x.est.CacheWrite1h, x.est.InputTokens)},
		Output: outputOf(x.kind, &x.est),
		Watch:  p.watcher(ctx, x)})
	setWaitHeader(&ctx.Response.Header, x.m)
	switch x.m.Verdict() {
	case meter.Admitted:
		return nil
	case meter.Denied, meter.TooLarge:
		i := x.m.DeniedBy()
		d := denial{tooLarge: x.m.Verdict() == meter.TooLarge, retry: x.m.RetryAfter(), outputField: x.kind.OutputField(), outputDefaulted: x.est.OutputDefaulted, fallback: x.m.FromFallback()}
		if x.est.ServerContext {
			d.hiddenModel = x.est.Model
		}
		e := denied(ctx, x.upstream.Flavor, x.m.Rules(), x.live.ietf, i, d)
		if x.m.RetryAfter() > x.live.maxRetryWait {
			// The official SDKs sleep for whatever Retry-After says: past
			// max_retry_wait, have them return the error at once.
			ctx.Response.Header.Set("x-should-retry", "false")
		}
		return &refusal{err: e, outcome: x.m.Outcome(0), limit: x.m.Rules()[i].Rule.Name}
	case meter.FailClosed:
		closed := x.m.ClosedBy()
		return &refusal{err: unavailable(ctx, closed, p.opt.UnavailableRetry), outcome: x.m.Outcome(0), limit: closed.Name}
	case meter.Unmetered:
		r := x.m.ClosedBy()
		return &refusal{err: unmetered(x.path, r), outcome: x.m.Outcome(0), limit: r.Name}
	case meter.Left:
		ctx.SetConnectionClose()
		return &refusal{err: errClientLeft, outcome: x.m.Outcome(0)}
	case meter.Unpriced:
		by := x.m.UnpricedBy()
		return &refusal{err: modelNotPriced(x.flavor(), x.est.Model, by.Name, x.m.Quote().Missing), outcome: x.m.Outcome(0), limit: by.Name}
	default: // meter.Broken: a limit the store refuses is a bug, not an outage
		return &refusal{err: errLimiter, outcome: x.m.Outcome(0)}
	}
}

// maxModelName bounds a request's model name, in bytes: no provider's
// names come near it, and it keeps the ledger's lines and the logs bounded.
const maxModelName = 256

// stripPrefix removes an upstream's path prefix from the raw request path.
// ok is false when the raw path does not start with the prefix although its
// decoded form did (the prefix was percent-encoded).
func stripPrefix(raw, prefix string) (string, bool) {
	if prefix == "" {
		return raw, true
	}
	p := strings.TrimSuffix(prefix, "/")
	if !strings.HasPrefix(raw, p) || (len(raw) > len(p) && raw[len(p)] != '/') {
		return "", false
	}
	if rest := raw[len(p):]; rest != "" {
		return rest, true
	}
	return "/", true
}

// credentialish are request fields that choose an account, a billing
// project or an identity at the upstream: with a virtual key they are the
// operator's to set, never the caller's (OpenAI-Organization and
// OpenAI-Project select the organisation and project billed, per OpenAI's
// API reference; api-key is Azure OpenAI's key header;
// Ocp-Apim-Subscription-Key is Azure API Management's, which fronts many
// Azure OpenAI deployments).
var credentialish = []string{"Authorization", "x-api-key", "api-key", "OpenAI-Organization", "OpenAI-Project", "Cookie", "X-Real-IP",
	"Ocp-Apim-Subscription-Key"}

// rewriteFields are request fields that make some server frameworks run
// another path or method than the request line names: X-Original-URL and
// X-Rewrite-URL (IIS URL Rewrite, and frameworks such as Symfony that
// honour them behind it) replace the path; X-HTTP-Method-Override,
// X-HTTP-Method and X-Method-Override (Express's method-override,
// ASP.NET Web API, Google APIs, Rails-style middleware) replace the
// method. llmguard weighs and limits the path and method of the request
// line, so these never go upstream, for any caller.
var rewriteFields = []string{"X-Original-URL", "X-Rewrite-URL", "X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// passThroughDrop are the request fields removed for a pass-through
// caller, besides the hop-by-hop ones: the client's forwarding fields,
// the rewriteFields, Ocp-Apim-Subscription-Key (a second credential in
// either mode) and every caller key field (forward sets the identifying
// one again).
var passThroughDrop = slices.Concat([]string{"X-Forwarded-For", "Forwarded", "Ocp-Apim-Subscription-Key"}, rewriteFields, callerKeyHeaders)

// virtualKeyDrop are the request fields removed for a caller with a
// virtual key, besides the hop-by-hop ones: the client's forwarding fields
// (X-Forwarded-For, which llmguard sets itself, and Forwarded: never
// trusted), the rewriteFields and the credentialish fields.
var virtualKeyDrop = slices.Concat([]string{"X-Forwarded-For", "Forwarded"}, rewriteFields, credentialish)

// passThroughDropFields and virtualKeyDropFields are passThroughDrop and
// virtualKeyDrop as fieldSets, as removeFields takes them.
var (
	passThroughDropFields = newFieldSet(passThroughDrop)
	virtualKeyDropFields  = newFieldSet(virtualKeyDrop)
)

// credentialQuery are query parameters that carry a key at some upstream
// (Azure API Management's subscription-key; api-key and key at gateways
// that accept one in the URL): never forwarded, so that the only key the
// upstream sees is the one llmguard limited.
var credentialQuery = []string{"subscription-key", "api-key", "key"}

// forward sends the admitted request upstream and relays the answer; an
// answer llmguard must give itself instead is returned.
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, x *exchange, upPath string, body []byte) *refusal {
	up := x.upstream
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	ctx.Request.Header.CopyTo(&req.Header)
	// The hop-by-hop fields, the client's forwarding fields (never
	// trusted) and the credentials go in one walk over the fields.
	if x.principal.PassThrough {
		// Forward only the credential that identified the caller, as
		// identify read it: every caller key field goes (another one, a
		// second field of the credential's name in any case, or a trailer
		// field of a chunked body, which fasthttp merges into the header
		// after identify: any could carry a key the upstream bills
		// instead of the one limited), and that one is set again.
		removeFields(&req.Header, passThroughDropFields)
		req.Header.Set(x.keyHeader, x.keyField)
	} else {
		removeFields(&req.Header, virtualKeyDropFields)
	}
	var ip [64]byte // the address is written on the stack
	if a, ok := netip.AddrFromSlice(ctx.RemoteIP()); ok {
		req.Header.SetCanonical(forwardedForField, a.Unmap().AppendTo(ip[:0]))
	}
	if !x.principal.PassThrough && up.APIKey != "" {
		req.Header.Set(up.authField, up.authValue) // made once (Upstream.init): no string built per request
	}
	// The usage tap must read the body whatever the client accepts: ask the
	// upstream for an uncompressed answer and let the client's own
	// compression preferences go (DESIGN.md §1.7).
	req.Header.SetCanonical(acceptEncodingField, identityValue)
	setUpstreamURI(req, up, upPath, ctx)
	req.Header.SetHost(up.host)

	body = p.capBody(ctx, x, body)
	body, x.stripUsage = up.dialect.rewrite(x.kind, &x.est, body)
	resp := fasthttp.AcquireResponse()
	// Until the answer head comes, a client that leaves has the upstream
	// connection closed (headwatch.go); relay watches it afterwards.
	var sb *sentBody
	if sendsAsStream(req, len(body)) {
		sb = sentBodies.Get().(*sentBody) // pooled: no allocation a request (fixedcost_test.go)
		sb.reset(body, resp)
		req.SetBodyStream(sb, len(body))
	} else {
		req.SetBodyRaw(body)
	}

	p.inject(pointForward)
	t0 := monoclock.Now()
	x.forwarded = true
	if x.obs != nil {
		p.startUpstream(x, req)
	}
	watched := sb != nil && ctx.Conn() != nil
	if watched {
		p.watch.add(p, &sb.left, watchSlot{x: x, conn: ctx.Conn(), action: sb, every: streamWatchTicks})
	}
	err := up.client.DoTimeout(req, resp, up.Timeout)
	if watched {
		p.watch.remove(&sb.left) // after it, the watch no longer touches sb
	}
	left := false
	if sb != nil {
		left = sb.left.Load()
		sb.reset(nil, nil) // keep no body or answer in the pool
		sentBodies.Put(sb)
	}
	x.upstreamTime = monoclock.Since(t0)
	x.held = resp
	if err != nil {
		x.endUpstream(0, err)
		x.held = nil
		fasthttp.ReleaseResponse(resp)
		if left {
			// Its client left before the answer head came: the connection
			// was closed for it (headwatch.go). Neither the upstream's
			// failure nor an answer: counted as an admitted request its
			// client closed (status 499, as a client gone mid-stream is
			// counted allowed), so that a client's leaving never shows as
			// an upstream error.
			x.status = statusClientClosed
			p.log.Info("client disconnected before the upstream answered", "upstream", up.Name, "request_id", x.id)
			if x.obs != nil {
				x.obs.clientGone = true
			}
		} else {
			up.series.Record(0, x.upstreamTime)
			x.status = fasthttp.StatusBadGateway
			p.unreachable.note(p.log, up.Name, err, x.id)
		}
		if unsent(err) {
			x.settle(meter.Settlement{Source: spec.SourceRefund})
		} else {
			// The upstream may have read the request and billed it (a
			// timeout, a connection cut after the write): the reservation
			// stands, never a refund a slow answer could earn.
			x.settle(meter.Settlement{Source: spec.SourceReserved})
		}
		if left {
			return &refusal{err: apiError{status: statusClientClosed, openAIType: "api_error", openAICode: "client_closed_request",
				anthropicType: "api_error", message: "The client closed the connection before the upstream API answered."}, outcome: meter.OutcomeAllowed}
		}
		setLimitHeaders(&ctx.Response.Header, x.upstream.Flavor, x.rules(), x.live.ietf)
		return &refusal{err: apiError{status: fasthttp.StatusBadGateway, openAIType: "api_error", openAICode: "upstream_unreachable",
			anthropicType: "api_error", message: "llmguard could not reach the upstream API (" + up.Name + ")."}, outcome: meter.OutcomeUpstreamError}
	}
	return p.relay(ctx, x, resp)
}

// forwardedForField, acceptEncodingField and identityValue are the
// request fields forward sets on every request, spelled canonically: set
// with SetCanonical, which takes the name as it is, they are what Set
// writes (the name normalised, when the header normalises, to the same
// spelling) without Set's copy and normalisation of the name each time.
var (
	forwardedForField   = []byte("X-Forwarded-For")
	acceptEncodingField = []byte("Accept-Encoding")
	identityValue       = []byte("identity")
)

// setUpstreamURI sets req's URI to up's base URL, upPath and the request's
// query (see queryOf), built in a pooled buffer: fasthttp copies it.
func setUpstreamURI(req *fasthttp.Request, up *Upstream, upPath string, ctx *fasthttp.RequestCtx) {
	var arr [uriStack]byte // SetRequestURIBytes copies it: on the stack, no pool round trip (about 120 instructions)
	b := append(arr[:0], up.scheme...)
	b = append(b, "://"...)
	b = append(b, up.host...)
	b = append(b, up.basePath...)
	b = append(b, upPath...)
	b = appendQuery(b, ctx)
	req.SetRequestURIBytes(b)
}

// uriStack is the room setUpstreamURI builds an upstream URI in on the
// stack, in bytes; a longer URI (a long query) is built on the heap.
const uriStack = 256

// appendQuery appends queryOf(ctx) to b, without allocating when the query
// carries no credential.
func appendQuery(b []byte, ctx *fasthttp.RequestCtx) []byte {
	q := ctx.URI().QueryString()
	if len(q) == 0 {
		return b
	}
	for k := range ctx.QueryArgs().All() {
		if isCredentialQuery(k) {
			return append(b, queryOf(ctx)...)
		}
	}
	return append(append(b, '?'), q...)
}

// isCredentialQuery reports whether the query parameter k is one of
// credentialQuery, in any case.
func isCredentialQuery(k []byte) bool {
	for _, c := range credentialQuery {
		if bytes.EqualFold(k, []byte(c)) {
			return true
		}
	}
	return false
}

// queryOf is the request's query string to forward, "?…" or "": as sent,
// unless it carries a credentialQuery parameter (in any case, encoded or
// not), which is dropped and the rest re-encoded.
func queryOf(ctx *fasthttp.RequestCtx) string {
	q := ctx.URI().QueryString()
	if len(q) == 0 {
		return ""
	}
	isKey := func(k []byte) bool {
		return slices.ContainsFunc(credentialQuery, func(c string) bool { return bytes.EqualFold(k, []byte(c)) })
	}
	args := ctx.QueryArgs()
	found := false
	for k := range args.All() {
		found = found || isKey(k)
	}
	if !found {
		return "?" + string(q)
	}
	var kept fasthttp.Args
	for k, v := range args.All() {
		if !isKey(k) {
			kept.AddBytesKV(k, v)
		}
	}
	if kept.Len() == 0 {
		return ""
	}
	return "?" + string(kept.QueryString())
}

// setID sets x.id to a bucket.NewRequestID id (24 hex digits: the second,
// then 64 random bits), written in x.idBuf: the id costs no allocation of
// its own. x must not be copied (the id aliases it); it is never reused, so
// the id stays as written while anything holds it.
func (x *exchange) setID() {
	bucket.PutRequestID(&x.idBuf, time.Now())
	x.id = unsafe.String(&x.idBuf[0], len(x.idBuf))
}

// cacheWrite is the input tokens a request's reservation prices as
// written to the prompt cache: all of in when the body asks for writes
// (weigher.Estimate.CacheWrite, CacheWrite1h), else none.
func cacheWrite(asked bool, in int64) int64 {
	if asked {
		return in
	}
	return 0
}

// statusClientClosed is the status a request is counted (and its ledger
// record written) with when its client left before the upstream's answer
// head came: 499, nginx's "client closed request", a status no client
// reads, since none is there to read it.
const statusClientClosed = 499
