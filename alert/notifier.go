package alert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
)

// Defaults of Options' zero fields.
const (
	DefaultTimeout     = 5 * time.Second
	DefaultMaxAttempts = 5
	DefaultQueue       = 1024
	DefaultBaseDelay   = 500 * time.Millisecond
	DefaultMaxDelay    = 30 * time.Second

	// MaxResponseRead is the most of a webhook's answer read, in bytes
	// (the rest is not read; the connection is then not reused).
	MaxResponseRead = 64 << 10
	// claimTimeout bounds one claim in the store.
	claimTimeout = 2 * time.Second
	// maxSeen bounds the crossings a Notifier remembers having queued.
	maxSeen = 100000
)

// Outcomes of a crossing, the outcome label of llmguard_alerts_total.
const (
	OutcomeDelivered  = "delivered"   // the webhook answered 2xx
	OutcomeFailed     = "failed"      // every attempt failed, or one failed for good (a 4xx)
	OutcomeDropped    = "dropped"     // the queue was full: not sent (a later request may queue it again)
	OutcomeDuplicate  = "duplicate"   // another node (or an earlier request) claimed it
	OutcomeClaimError = "claim_error" // the claim could not be recorded: not sent (a later request may queue it again)
)

// Options configure a Notifier. URL and Thresholds are required; the zero
// value of every other field is a documented default.
type Options struct {
	// URL receives a POST per crossing; http or https (config checks it).
	URL string
	// Format is the body: FormatJSON (the zero value) or FormatSlack.
	Format Format
	// Thresholds are increasing fractions of a quota (e.g. 0.5, 0.8, 1).
	Thresholds []float64
	// Headers are added to every POST.
	Headers map[string]string
	// Timeout bounds one attempt; zero: DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts is how many times a crossing is tried; zero:
	// DefaultMaxAttempts.
	MaxAttempts int
	// Queue is how many crossings may wait for the worker; zero:
	// DefaultQueue.
	Queue int
	// BaseDelay and MaxDelay shape the backoff: before attempt n+1 the
	// worker waits d = min(MaxDelay, BaseDelay·2^(n−1)), jittered to
	// [d/2, d). Zero: DefaultBaseDelay, DefaultMaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Claimer makes each crossing delivered once across nodes; nil: a
	// MemoryClaimer on Now.
	Claimer Claimer
	// Client sends the POSTs; nil: a client that follows no redirect.
	// Timeout applies per attempt either way.
	Client *http.Client
	// Now stamps DetectedAt and runs the MemoryClaimer; nil: time.Now.
	Now func() time.Time
	// Sleep waits between attempts, returning early with ctx's error when
	// the Notifier closes; nil: a timer. Tests record the delays.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1); nil: math/rand/v2.
	Jitter func() float64
	// Registerer, when not nil, gets llmguard_alerts_total{outcome} and
	// llmguard_alert_attempts_total{result} (result: ok, retry, error).
	Registerer prometheus.Registerer
	// Logger receives a line per crossing and per failed attempt; nil:
	// slog.Default().
	Logger *slog.Logger
}

// Notifier turns budget levels into webhook alerts: Observe queues each
// threshold crossing (never blocking), one worker claims and delivers
// them in order. Build it with New, stop it with Close. Safe for
// concurrent use.
type Notifier struct {
	opt      Options
	log      *slog.Logger
	queue    chan crossing
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	outcomes *prometheus.CounterVec
	attempts *prometheus.CounterVec

	mu   sync.Mutex
	seen map[string]struct{} // crossings queued or done on this node
}

// crossing is one threshold reached by one budget in one period.
type crossing struct {
	id        string
	level     meter.BudgetLevel
	threshold float64
	at        time.Time
}

var _ meter.Alerts = (*Notifier)(nil)

// New starts a Notifier's worker. Errors: no URL, or thresholds that are
// empty, not positive or not increasing, or metrics that cannot register.
func New(opt Options) (*Notifier, error) {
	if opt.URL == "" {
		return nil, errors.New("alert: no webhook URL")
	}
	if len(opt.Thresholds) == 0 || opt.Thresholds[0] <= 0 || !slices.IsSorted(opt.Thresholds) {
		return nil, fmt.Errorf("alert: thresholds must be positive and increasing (got %v)", opt.Thresholds)
	}
	opt.Thresholds = slices.Clone(opt.Thresholds)
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = DefaultMaxAttempts
	}
	if opt.Queue <= 0 {
		opt.Queue = DefaultQueue
	}
	if opt.BaseDelay <= 0 {
		opt.BaseDelay = DefaultBaseDelay
	}
	if opt.MaxDelay <= 0 {
		opt.MaxDelay = DefaultMaxDelay
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Claimer == nil {
		opt.Claimer = &MemoryClaimer{Now: opt.Now}
	}
	if opt.Client == nil {
		opt.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opt.Sleep == nil {
		opt.Sleep = sleep
	}
	if opt.Jitter == nil {
		opt.Jitter = rand.Float64
	}
	n := &Notifier{opt: opt, log: opt.Logger, queue: make(chan crossing, opt.Queue), done: make(chan struct{}),
		seen: make(map[string]struct{}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmguard_alerts_total",
			Help: "Budget threshold crossings by what became of their webhook alert: delivered, failed, dropped (queue full), duplicate (claimed elsewhere), claim_error."}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmguard_alert_attempts_total",
			Help: "Webhook POSTs of budget alerts by result: ok (2xx), retry (a failure tried again) or error (the last failure)."}, []string{"result"}),
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	if r := opt.Registerer; r != nil {
		for _, c := range []prometheus.Collector{n.outcomes, n.attempts,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llmguard_alert_queue_length",
				Help: "Budget threshold crossings waiting for webhook delivery."}, func() float64 { return float64(len(n.queue)) })} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("alert: metrics: %w", err)
			}
		}
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go n.work()
	return n, nil
}

// Observe queues every threshold l has reached that this node has not
// queued yet for l's budget, period and quota: those at most its used fraction,
// and 1.0 when l is Exhausted. It never blocks: a full queue
// drops the crossing (counted; the next request's Observe queues it
// again).
func (n *Notifier) Observe(l meter.BudgetLevel) {
	if l.Quota <= 0 {
		return
	}
	used := float64(l.Used) / float64(l.Quota)
	for _, th := range n.opt.Thresholds {
		// A budget that denies a request has reached 100 % (it cannot pay
		// it), whatever its spend: the one threshold a denial reaches.
		if used < th && !(l.Exhausted && th == 1) {
			continue
		}
		c := crossing{id: crossingID(l.Key, l.PeriodStart, l.Quota, th), level: l, threshold: th}
		if !n.mark(c.id) {
			continue
		}
		c.at = n.opt.Now()
		select {
		case n.queue <- c:
		default:
			n.forget(c.id)
			n.outcomes.WithLabelValues(OutcomeDropped).Inc()
		}
	}
}

// mark records id as queued on this node; false when it already was.
func (n *Notifier) mark(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.seen[id]; ok {
		return false
	}
	if len(n.seen) >= maxSeen {
		n.seen = make(map[string]struct{}) // the claims still dedupe
	}
	n.seen[id] = struct{}{}
	return true
}

func (n *Notifier) forget(id string) {
	n.mu.Lock()
	delete(n.seen, id)
	n.mu.Unlock()
}

// Close stops the worker, abandoning a delivery under way and the queued
// crossings; Observe does nothing useful after it. It returns nil.
func (n *Notifier) Close() error {
	n.cancel()
	<-n.done
	return nil
}

func (n *Notifier) work() {
	defer close(n.done)
	for {
		select {
		case <-n.ctx.Done():
			return
		case c := <-n.queue:
			n.handle(c)
		}
	}
}

// handle claims c and delivers it. A panic is contained and counted as a
// failure.
func (n *Notifier) handle(c crossing) {
	defer func() {
		if r := recover(); r != nil {
			n.outcomes.WithLabelValues(OutcomeFailed).Inc()
			n.log.Error("budget alert: panic", "panic", fmt.Sprint(r))
		}
	}()
	ctx, cancel := context.WithTimeout(n.ctx, claimTimeout)
	ok, err := n.opt.Claimer.Claim(ctx, c.id, c.level.PeriodEnd)
	cancel()
	switch {
	case err != nil:
		n.forget(c.id)
		n.outcomes.WithLabelValues(OutcomeClaimError).Inc()
		n.log.Warn("budget alert: cannot claim the crossing; a later request retries", "limit", c.level.Limit, "err", err)
		return
	case !ok:
		n.outcomes.WithLabelValues(OutcomeDuplicate).Inc()
		return
	}
	b, err := body(n.opt.Format, payloadOf(c))
	if err == nil {
		err = n.deliver(b)
	}
	if err != nil {
		n.outcomes.WithLabelValues(OutcomeFailed).Inc()
		n.log.Error("budget alert: webhook delivery failed", "limit", c.level.Limit, "subject", c.level.Subject,
			"threshold", c.threshold, "err", err)
		return
	}
	n.outcomes.WithLabelValues(OutcomeDelivered).Inc()
	n.log.Info("budget alert delivered", "limit", c.level.Limit, "subject", c.level.Subject, "threshold", c.threshold)
}

// payloadOf is c's Payload.
func payloadOf(c crossing) Payload {
	l := c.level
	p := Payload{Type: PayloadType, Tenant: l.Tenant, Limit: l.Limit, Scope: l.Scope, Subject: l.Subject, Unit: l.Unit,
		Threshold: c.threshold, Spent: l.Used, Quota: l.Quota, UsedFraction: math.Round(float64(l.Used)/float64(l.Quota)*1e4) / 1e4,
		PeriodStart: l.PeriodStart, PeriodEnd: l.PeriodEnd, TimeZone: l.PeriodStart.Location().String(), DetectedAt: c.at.UTC(),
		Exhausted: l.Exhausted && c.threshold == 1 && l.Used < l.Quota}
	if l.Unit == spec.MicroUSD {
		spent, quota := float64(l.Used)/1e6, float64(l.Quota)/1e6
		p.SpentUSD, p.QuotaUSD = &spent, &quota
	}
	return p
}

// deliver POSTs b until an attempt succeeds, one fails for good, or
// MaxAttempts have failed, waiting Backoff between attempts. Errors: the
// last attempt's, or the Notifier closing.
func (n *Notifier) deliver(b []byte) error {
	for attempt := 1; ; attempt++ {
		retry, err := n.post(b)
		if err == nil {
			n.attempts.WithLabelValues("ok").Inc()
			return nil
		}
		if !retry || attempt >= n.opt.MaxAttempts {
			n.attempts.WithLabelValues("error").Inc()
			return fmt.Errorf("attempt %d of %d: %w", attempt, n.opt.MaxAttempts, err)
		}
		n.attempts.WithLabelValues("retry").Inc()
		n.log.Warn("budget alert: webhook attempt failed; retrying", "attempt", attempt, "err", err)
		if err := n.opt.Sleep(n.ctx, Backoff(n.opt.BaseDelay, n.opt.MaxDelay, attempt, n.opt.Jitter())); err != nil {
			return err
		}
	}
}

// Backoff is the wait after failed attempt n (from 1): d = min(max,
// base·2^(n−1)), jittered to d/2 + jitter·d/2, jitter in [0, 1) ("equal
// jitter": never less than half the exponential step).
func Backoff(base, maxDelay time.Duration, n int, jitter float64) time.Duration {
	d := maxDelay
	if n-1 < 62 && base<<(n-1) > 0 && base<<(n-1) < maxDelay {
		d = base << (n - 1)
	}
	jitter = min(max(jitter, 0), 1)
	return d/2 + time.Duration(jitter*float64(d/2))
}

// post sends b once. retry reports whether a failure may pass: a network
// error, 408, 429 or 5xx. It reads at most MaxResponseRead bytes of the
// answer and keeps a little of it for the error.
func (n *Notifier) post(b []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.opt.URL, bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	for k, v := range n.opt.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "llmguard-alerts")
	resp, err := n.opt.Client.Do(req)
	if err != nil {
		return n.ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseRead-256))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return false, nil
	}
	err = fmt.Errorf("webhook answered %s: %q", resp.Status, head)
	return resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, err
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
