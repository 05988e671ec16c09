// Package app wires a validated config into running llmguard servers: the
// weigher, the policy, the store, the proxy listener and the admin listener.
// cmd/llmguard and the end-to-end tests share it.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/respguard"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/obs"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/proxy"
	"github.com/llmguard/llmguard/region"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// App is one llmguard instance. Build it with New, run it with Serve, stop it
// with Close.
type App struct {
	// Config is the configuration the App started with (listeners, store,
	// upstreams); a reload changes what requests use, not this field.
	Config   *config.Config
	Registry *prometheus.Registry
	Proxy    *proxy.Proxy
	Store    bucket.Store
	// Ledger is the usage ledger writer, nil when none is configured.
	Ledger *ledger.Writer
	// ListenOverride and AdminListenOverride are the addresses given on
	// the command line (`serve --listen`, `--admin-listen`; empty: none),
	// which replaced the file's listen and admin_listen in Config. Reload
	// applies them to every file it reads too, so that a node started with
	// them serves on, and compares against, the addresses it runs on: a
	// reload of an unchanged file logs no "changes only at restart" for
	// listen. Set them before Watch or the first Reload.
	ListenOverride, AdminListenOverride string

	// memManaged: ManageMemoryLimit set the Go memory limit, and Reload
	// sets it again; memBase is the Go memory in use it measured at start,
	// in bytes.
	memManaged atomic.Bool
	memBase    atomic.Int64

	log      *slog.Logger
	stores   *stores
	reloadMu sync.Mutex
	loaded   []byte                        // the config file's content the last reload read (under reloadMu); nil before any
	pol      atomic.Pointer[policy.Policy] // the policy in force
	// limitsAdded maps the name of each quota limit a reload added (one
	// the previous policy did not have, or whose shards changed: its
	// buckets start afresh) to when that reload applied it, by a.now;
	// usage reports measure its burn rate from then (rateSpan). Limits
	// in force since the start are absent: their buckets may hold usage
	// from before it. Replaced whole under reloadMu; nil before any.
	limitsAdded atomic.Pointer[map[string]time.Time]
	cfg         atomic.Pointer[config.Config] // the config in force
	now         func() time.Time
	ledgerRedis redis.UniversalClient // the ledger stream's client, for reports
	regions     *region.Exchange      // the region exchange, nil when off
	keys        *keyStore             // the key store, nil when off
	srv         *fasthttp.Server
	admin       *fasthttp.Server
	close       []func() error
	waits       *meter.Waits // the wait queues, ended first by Close
	closeOnce   sync.Once    // Close runs the closers once
	// stopping is set when Close begins: /readyz answers 503
	// "shutting_down" while the requests in flight drain.
	stopping atomic.Bool
	// serveMu guards serving and closed: the listeners Serve was given
	// (wrapped as served), which Close closes itself, and whether Close
	// has run. fasthttp's Shutdown stops only a server whose Serve has
	// registered its listener; a Close that runs first (a loaded machine
	// may start Serve's goroutines late) would leave that Serve accepting
	// for ever, and Serve waiting for it.
	serveMu  sync.Mutex
	serving  []net.Listener
	closed   bool
	closeErr error        // what the first Close returned
	tlsProxy *certSource  // the proxy listener's certificate, nil without tls
	conns    *connCap     // the proxy listener's max_connections
	adminCap *adminConns  // the admin listener's adminMaxConnections
	tlsAdmin *certSource  // the admin listener's certificate, nil without admin_tls
	reloads  reloadStatus // config reloads so far, for /readyz and metrics
	// usageSlot holds the one /admin/usage read running (capacity 1);
	// usageWait (0: the default) and usageHook (called inside the slot;
	// nil: none) are tests'.
	usageSlot chan struct{}
	usageWait time.Duration
	usageHook func(context.Context)
	// watchAfter is Watch's timer (nil: time.After); tests steer it.
	watchAfter func(time.Duration) <-chan time.Time
}

// New builds every component from cfg. Errors: a component cannot start
// (unknown encoding, bad upstream URL, unsupported store backend).
func New(cfg *config.Config, log *slog.Logger) (*App, error) { return newApp(cfg, log, nil) }

// newApp is New with a clock for the memory store and for quota periods
// (nil: the real one); tests steer time with it.
func newApp(cfg *config.Config, log *slog.Logger, now func() time.Time) (*App, error) {
	return newAppTimed(cfg, log, now, nil)
}

// newAppTimed is newApp with after as the timer of waiting requests
// (meter.WaitsOptions.After; nil: real timers), on the same clock as now.
func newAppTimed(cfg *config.Config, log *slog.Logger, now func() time.Time, after func(time.Duration) (<-chan time.Time, func() bool)) (*App, error) {
	return newAppWith(cfg, log, appHooks{now: now, after: after})
}

// appHooks are what tests steer in an App: its clock, the timer of
// waiting requests, where spans go.
type appHooks struct {
	now   func() time.Time
	after func(time.Duration) (<-chan time.Time, func() bool)
	// spans, when set with tracing enabled, receives the spans instead of
	// the OTLP exporter (a tracetest.SpanRecorder).
	spans sdktrace.SpanProcessor
}

// newAppWith is New with hooks.
func newAppWith(cfg *config.Config, log *slog.Logger, hooks appHooks) (*App, error) {
	now, after := hooks.now, hooks.after
	if log == nil {
		log = slog.Default()
	}
	a := &App{Config: cfg, Registry: prometheus.NewRegistry(), log: log, usageSlot: make(chan struct{}, 1)}
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llmguard_count_cache_hits_total",
			Help: "Request elements (messages, input items, system prompts, tool lists) whose token count was remembered.",
		}, func() float64 { return float64(weigher.SharedCacheStats().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llmguard_count_cache_misses_total",
			Help: "Request elements long enough to be remembered whose tokens were counted.",
		}, func() float64 { return float64(weigher.SharedCacheStats().Misses) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmguard_count_cache_bytes",
			Help: "Estimated memory held by the token-count cache, in bytes (bounded by count_cache_bytes).",
		}, func() float64 { return float64(weigher.SharedCacheStats().Bytes) }),
	)

	pol, w, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	// A config that cannot work: an upstream without its key refuses the
	// start; the rest is logged.
	findings := Check(cfg, pol, w, os.LookupEnv)
	if fatal := Fatal(findings); len(fatal) > 0 {
		ce := &config.Error{}
		for _, f := range fatal {
			ce.Problems = append(ce.Problems, f.String())
		}
		return nil, ce
	}
	logFindings(log, findings)
	a.pol.Store(pol)
	a.cfg.Store(cfg)
	a.now = now
	if a.now == nil {
		a.now = time.Now
	}
	var ups []*proxy.Upstream
	for _, u := range cfg.Upstreams {
		f, ok := spec.ParseFlavor(u.Flavor)
		if !ok { // Validate refuses it: an unvalidated config
			return nil, fmt.Errorf("app: upstream %q: unknown flavor %q", u.Name, u.Flavor)
		}
		key := ""
		if u.APIKeyEnv != "" {
			key = os.Getenv(u.APIKeyEnv)
		}
		ups = append(ups, &proxy.Upstream{Name: u.Name, Flavor: f, BaseURL: u.BaseURL, APIKey: key,
			PathPrefix: u.PathPrefix, Timeout: time.Duration(u.Timeout), MaxConns: u.MaxConns, IdleTimeout: time.Duration(u.IdleTimeout),
			Deployments: u.Deployments, ChatOutputField: u.ChatOutputField})
	}
	st, err := openStore(cfg, a.policy, a.Registry, log, now)
	if err != nil {
		return nil, err
	}
	if a.regions, err = openRegions(cfg, st, a.policy, a.Registry, log); err != nil {
		for _, c := range st.close {
			c()
		}
		return nil, err
	}
	a.Store, a.close, a.stores = st.main, st.close, st
	if a.regions != nil { // stopped before the store and the peers' clients close
		stop := a.regions.Run()
		a.close = append([]func() error{func() error { stop(); return nil }}, a.close...)
	}

	// The budget gauges read the meter's clock when scraped: a quota's
	// period ends on the clock that placed its requests in it.
	metrics, err := meter.NewMetrics(a.Registry, meter.MetricsOptions{MaxTenants: cfg.Metrics.MaxTenants, MaxModels: cfg.Metrics.MaxModels,
		Now: a.now})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	led, ledRedis, err := openLedger(cfg, a.Registry, log)
	if err != nil {
		return nil, err
	}
	a.ledgerRedis = ledRedis
	if led != nil {
		a.Ledger = led
		a.close = append([]func() error{led.Close}, a.close...)
	}
	if a.keys, err = openKeyStore(cfg, a.Registry, log); err != nil {
		return nil, err
	}
	if a.keys != nil { // stopped before the store closes
		a.close = append([]func() error{a.keys.Close}, a.close...)
	}
	a.Registry.MustRegister(newKeysCollector(a))
	outputs, err := openOutputs(cfg, a.Registry)
	if err != nil {
		return nil, err
	}
	waits, err := meter.NewWaits(meter.WaitsOptions{PerBucket: cfg.WaitQueue.PerBucket, Total: cfg.WaitQueue.Total,
		After: after, Registerer: a.Registry})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	a.waits = waits
	alerts, err := openAlerts(cfg, st, a.Registry, log, now)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if alerts != nil { // stopped before the store's client closes
		a.close = append([]func() error{alerts.Close}, a.close...)
	}
	access, tracing, err := a.openObserve(cfg, hooks.spans)
	if err != nil {
		return nil, err
	}
	a.Proxy, err = proxy.New(proxy.Options{
		AccessLog:        access,
		Tracing:          tracing,
		Alerts:           alertsOrNil(alerts),
		Waits:            waits,
		Keys:             a.keys.keySource(),
		Ledger:           ledgerOrNil(led),
		Upstreams:        ups,
		Policy:           pol,
		Store:            a.Store,
		Fallback:         st.fallback,
		Charges:          st.chargerOrNil(),
		UnavailableRetry: time.Duration(cfg.Store.Breaker.OpenFor),
		MaxRetryWait:     time.Duration(cfg.MaxRetryWait),
		UnmeteredPaths:   cfg.UnmeteredPaths,
		Weigher:          w,
		MaxBodyBytes:     int(cfg.MaxBodyBytes),
		BodyBudget:       cfg.MaxInflightBodyBytes,
		MaxResponseBytes: int(cfg.MaxResponseBytes),
		ResponseBudget:   cfg.MaxInflightResponseBytes,
		Outputs:          outputs,
		PinOutputs:       cfg.OutputReservation.Pin,
		Metrics:          metrics,
		Logger:           log,
		Now:              now,
	})
	if err != nil {
		return nil, err
	}
	a.conns = newConnCap(maxConnections(cfg.MaxConnections, fileLimit(), log), cfg.TLS != nil, log)
	a.srv = &fasthttp.Server{
		Handler:               a.Proxy.Handle,
		ErrorHandler:          a.Proxy.ErrorHandler,
		Name:                  "llmguard",
		NoDefaultServerHeader: true,
		// With StreamRequestBody, this only bounds what fasthttp pre-reads
		// of a body (at most 8 KiB); the handler enforces max_body_bytes.
		MaxRequestBodySize: int(cfg.MaxBodyBytes),
		ReadTimeout:        60 * time.Second,
		IdleTimeout:        120 * time.Second,
		ReadBufferSize:     proxy.ReadBufferSize,
		CloseOnShutdown:    true,
		Logger:             fasthttpLogger{log},
		// No clock read before each request for RequestCtx.Time, which
		// llmguard never calls (its spans and ids read their own): one
		// time.Now a request fewer (callgrind, 1 KiB warm c32: time.now
		// 829 → 786, time.Now 432 → 410 instructions a request, the vDSO
		// read besides; docs/performance-history.md). fasthttp's idle
		// bookkeeping then runs on its once-a-second clock.
		LazyRequestTime: true,

		// The handler reads the body itself (proxy.Handle), once the caller
		// is identified, within max_body_bytes and max_inflight_body_bytes;
		// a multipart body is never pre-parsed. ReadTimeout bounds the
		// headers and the body. No WriteTimeout: it would bound a whole
		// answer, streams included; the listener bounds each write instead
		// (client_write_timeout, proxy.WriteTimeoutListener).
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		// Connections past max_connections get a 503 of llmguard's own
		// and are closed at once by the listener (connCap), so that
		// half-sent requests cannot use up the file descriptors the
		// upstream dials and Redis need. fasthttp's own cap, which would
		// answer in text naming Server.Concurrency, sits well above it:
		// it counts a connection until its goroutine ends, a moment after
		// the listener has let its place go.
		Concurrency: int(2*a.conns.max + 64),
	}
	a.Registry.MustRegister(connectionMetrics(a.conns)...)
	a.admin = &fasthttp.Server{
		Handler: proxy.AdminHandler(a.Registry, func() (any, bool) {
			r := st.readiness(cfg.Store.Backend)
			r["config"] = a.reloads.snapshot()
			if led != nil {
				// A failing ledger sink leaves the node ready (it still
				// limits and forwards), but finance's records are going
				// missing: README, "Readiness".
				r["ledger"] = led.Health()
			}
			if a.stopping.Load() {
				// The proxy listener is closed and the requests in flight
				// are draining: a load balancer probing /readyz must stop
				// sending here (it said "ready" until the process exited).
				r["status"] = "shutting_down"
				return r, false
			}
			return r, true
		},
			map[string]fasthttp.RequestHandler{"/admin/usage": a.usageHandler, "/admin/keys": a.keysHandler, "/admin/keys/": a.keysHandler}),
		Name:   "llmguard-admin",
		Logger: fasthttpLogger{log},
		// The admin API's bodies are small (keystore.MaxRequestBytes): a
		// larger one is refused with 413 before it is read whole.
		MaxRequestBodySize: 1 << 20,
		ErrorHandler:       adminErrorHandler,
		// A connection that sends no request, or half of one, is closed
		// (it was held forever: thousands of them, a file descriptor
		// each, starve the proxy's own accepts and dials).
		ReadTimeout: adminReadTimeout,
		IdleTimeout: adminIdleTimeout,
		// The listener holds at most adminMaxConnections (adminConns,
		// which closes the oldest of the largest peer to let a new one
		// in); fasthttp's cap, which refused the newest, sits above it so
		// that an evicted connection's goroutine still winding down never
		// makes it refuse.
		Concurrency: 2 * adminMaxConnections,
	}
	a.adminCap = newAdminConns(adminMaxConnections, log)
	a.reloads.init(a.Registry)
	if err := a.startTLS(cfg); err != nil {
		for _, c := range a.close {
			c()
		}
		return nil, err
	}
	return a, nil
}

// startTLS loads the listeners' certificates and watches their files.
// Errors: a pair cannot be loaded (the message names the files).
func (a *App) startTLS(cfg *config.Config) error {
	if cfg.TLS == nil && cfg.AdminTLS == nil {
		return nil
	}
	m := newTLSMetrics(a.Registry)
	for _, l := range []struct {
		name string
		t    *config.TLS
		dst  **certSource
	}{{"proxy", cfg.TLS, &a.tlsProxy}, {"admin", cfg.AdminTLS, &a.tlsAdmin}} {
		if l.t == nil {
			continue
		}
		s, err := newCertSource(l.name, l.t, a.log, m)
		if err != nil {
			return err
		}
		if err := s.watch(); err != nil {
			a.log.Warn("tls: cannot watch the certificate files; they are read again every minute", "listener", l.name, "err", err)
		}
		*l.dst = s
		a.close = append(a.close, s.stop)
	}
	return nil
}

// Serve serves the proxy on ln and the admin endpoints on admin until Close.
// A nil admin listener disables the admin endpoints. It returns when both
// servers have stopped; the error is the first that is not a clean shutdown.
func (a *App) Serve(ln, admin net.Listener) error {
	errc := make(chan error, 2)
	n := 1
	// Innermost: an accept that fails for want of file descriptors waits
	// and tries again, where fasthttp would stop serving the listener.
	ln = acceptRetry(ln, a.log, "proxy")
	if admin != nil {
		admin = a.adminCap.listen(acceptRetry(admin, a.log, "admin"))
		// Each write to an admin client must finish within
		// adminWriteTimeout (64 KiB at a time): a client that asks for a
		// large answer (/admin/usage: tens of MB for 100,000 users) and
		// reads none of it held the answer and its connection for good.
		admin = proxy.WriteTimeoutListener(admin, adminWriteTimeout)
	}
	ln = a.conns.listen(ln)
	ln = proxy.WriteTimeoutListener(ln, time.Duration(a.Config.ClientWriteTimeout))
	if a.tlsProxy != nil {
		// Inside the write deadlines: each TLS record is written by the
		// deadline-setting connection, and peerClosed finds the socket
		// through tls.Conn.NetConn.
		ln = a.tlsProxy.listen(ln)
	}
	if admin != nil && a.tlsAdmin != nil {
		admin = a.tlsAdmin.listen(admin)
	}
	a.serveMu.Lock()
	if a.closed { // Close has run: serve nothing
		a.serveMu.Unlock()
		ln.Close()
		if admin != nil {
			admin.Close()
		}
		return nil
	}
	a.serving = append(a.serving, ln)
	if admin != nil {
		a.serving = append(a.serving, admin)
	}
	a.serveMu.Unlock()
	go func() { errc <- a.srv.Serve(ln) }()
	if admin != nil {
		n++
		go func() { errc <- a.admin.Serve(admin) }()
	}
	var first error
	for range n {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ListenAndServe binds the configured addresses and calls Serve.
func (a *App) ListenAndServe() error {
	ln, err := net.Listen("tcp", a.Config.Listen)
	if err != nil {
		// Name the setting and the flag: "address already in use" alone
		// left a newcomer guessing which of the two listeners it was.
		return fmt.Errorf("app: proxy listener (listen, or serve --listen host:port): %w", err)
	}
	adm, err := net.Listen("tcp", a.Config.AdminListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("app: admin listener (admin_listen, or serve --admin-listen host:port): %w", err)
	}
	a.log.Info("llmguard listening", "proxy", scheme(a.tlsProxy)+ln.Addr().String(), "admin", scheme(a.tlsAdmin)+adm.Addr().String(), "store", a.Config.Store.Backend)
	return a.Serve(ln, adm)
}

func scheme(s *certSource) string {
	if s != nil {
		return "https://"
	}
	return "http://"
}

// Close stops accepting requests, answers those waiting for their buckets
// (on_limit: wait) with their 429 at once, waits for those in flight, and
// releases the store. From its start /readyz answers 503 with status
// "shutting_down" (the admin listener serves, /metrics included, until the
// requests in flight have ended). It may be called more than once (a signal handler and a
// deferred Close): only the first call does the work, and every call
// returns what it returned (the listeners' and closers' errors, joined).
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		a.stopping.Store(true) // /readyz answers 503 from now on
		if a.waits != nil {
			a.waits.Close() // waiting requests are answered now, not after max_wait
		}
		errs := []error{a.srv.Shutdown(), a.admin.Shutdown()}
		// A listener whose Serve had not registered it yet is not closed
		// by Shutdown: close them all here (a second close of one
		// Shutdown closed is harmless), so that every Serve returns.
		a.serveMu.Lock()
		a.closed = true
		for _, l := range a.serving {
			l.Close()
		}
		a.serveMu.Unlock()
		for _, c := range a.close {
			errs = append(errs, c())
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

// The admin listener's timeouts: its requests are small and its clients
// (probes, Prometheus, the CLI) send them at once. Variables for the tests.
var (
	adminReadTimeout = 30 * time.Second
	adminIdleTimeout = 60 * time.Second
	// adminWriteTimeout bounds each write of an admin answer, in slices of
	// 64 KiB (proxy.WriteTimeoutListener), as client_write_timeout's
	// default does the proxy's.
	adminWriteTimeout = 30 * time.Second
)

// adminErrorHandler answers a request the admin server could not read: 413
// for a body over its bound, 400 otherwise.
func adminErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	ctx.SetContentType("application/json")
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		ctx.SetStatusCode(fasthttp.StatusRequestEntityTooLarge)
		ctx.SetBodyString(`{"error":"the request body is too large"}` + "\n")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusBadRequest)
	ctx.SetBodyString(`{"error":"the request could not be parsed"}` + "\n")
}

// fasthttpLogger sends fasthttp's own messages (malformed requests, bodies
// over the limit) to slog at debug level: they describe a client's mistake,
// already answered with a status code.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "source", "fasthttp")
}

// logFindings logs Check's warnings, one line each.
func logFindings(log *slog.Logger, findings []Finding) {
	for _, f := range findings {
		if !f.Fatal {
			log.Warn("config: "+f.Message, "field", f.Field)
		}
	}
}

// compile builds what a config reload replaces: the policy (keys, prices,
// limits) and the weigher (models). An alias (alias_of) is counted as its
// target where its own entry says nothing: the target's encoding, default
// output and safety factor (its family's, for a Claude model), so that an
// alias of a Claude model keeps Claude's safety factor; and every rule that
// keys off a model's name (image tiles, patches and caps, Claude's tool
// prompt) reads the target's name (weigher.Model.Family).
func compile(cfg *config.Config) (*policy.Policy, *weigher.Weigher, error) {
	models := make(map[string]weigher.Model, len(cfg.Models))
	for name, m := range cfg.Models {
		wm := weigher.Model{Encoding: m.Encoding, DefaultMaxOutputTokens: m.DefaultMaxOutputTokens, SafetyFactor: m.SafetyFactor,
			MaxInputTokens: m.MaxInputTokens, MaxOutputTokens: m.MaxOutputTokens}
		if m.AliasOf != "" {
			wm.Family = m.AliasOf // image, tool-prompt and family rules key off the target's name
		}
		if t, ok := cfg.Models[m.AliasOf]; ok && m.AliasOf != "" {
			wm.Encoding = cmp.Or(wm.Encoding, t.Encoding, weigher.FamilyEncoding(m.AliasOf))
			wm.DefaultMaxOutputTokens = cmp.Or(wm.DefaultMaxOutputTokens, t.DefaultMaxOutputTokens)
			wm.SafetyFactor = cmp.Or(wm.SafetyFactor, t.SafetyFactor, weigher.FamilySafetyFactor(m.AliasOf))
			wm.MaxInputTokens = cmp.Or(wm.MaxInputTokens, t.MaxInputTokens)
			wm.MaxOutputTokens = cmp.Or(wm.MaxOutputTokens, t.MaxOutputTokens)
		}
		models[name] = wm
	}
	w, err := weigher.New(weigher.Options{Models: models, DefaultMaxOutputTokens: cfg.DefaultMaxOutputTokens,
		DefaultMaxInputTokens: cfg.DefaultMaxInputTokens, CeilingWindow: cfg.UsageCeilingWindow, MaxDepth: cfg.MaxJSONDepth,
		CostCeilingMicroUSD: int64(math.Ceil(cfg.ReportedCostCeilingUSD * 1e6)),
		ExactMaxBytes:       cfg.ExactCountMaxBytes, CountTimeBudget: time.Duration(cfg.CountTimeBudget),
		CacheBytes: cfg.CountCacheBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("app: %w", err)
	}
	pol, err := policy.Compile(cfg)
	if err != nil {
		return nil, nil, err
	}
	return pol, w, nil
}

// openLedger starts the usage ledger writer when the config names a file
// or a stream; nil otherwise.
func openLedger(cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*ledger.Writer, redis.UniversalClient, error) {
	lc := cfg.Ledger
	if lc.File == "" && lc.RedisStream == "" {
		return nil, nil, nil
	}
	o := ledger.Options{File: lc.File, MaxSizeMB: lc.MaxSizeMB, MaxBackups: lc.MaxBackups, Registerer: reg, Logger: log}
	var rc redis.UniversalClient
	if lc.RedisStream != "" {
		ro, err := redis.ParseURL(lc.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("app: ledger.redis_url: %w", err)
		}
		// Contexts bound the ledger's calls (the sink's pipelines, /admin/usage's
		// pages: ledger.ScanStream), not only go-redis's own read timeout.
		ro.ContextTimeoutEnabled = true
		// One dial attempt, as the store's client makes: go-redis's default
		// retries a refused dial five times 100 ms apart, past the sink's
		// timeout, so a Redis that refused at once was logged and shown in
		// /readyz as "context deadline exceeded". The sink sends again
		// itself (within its retry bounds).
		ro.DialerRetries = 1
		rc = respguard.NewClient(ro)
		o.Redis, o.Stream, o.MaxLen = rc, lc.RedisStream, lc.MaxLen
	}
	w, err := ledger.New(o)
	if err != nil {
		return nil, nil, fmt.Errorf("app: %w", err) // ledger's errors start "ledger: "
	}
	return w, rc, nil
}

// policy is the policy in force (the last successful reload's).
func (a *App) policy() *policy.Policy { return a.pol.Load() }

// ledgerOrNil keeps a nil *ledger.Writer from becoming a non-nil interface.
func ledgerOrNil(w *ledger.Writer) interface{ Write(ledger.Record) bool } {
	if w == nil {
		return nil
	}
	return w
}

// tracingFlushTimeout bounds how long Close waits for the spans still
// queued to reach the collector.
const tracingFlushTimeout = 5 * time.Second

// openObserve opens the access log and tracing the config enables (nil
// each when off) and adds their closers to a's, last: spans and lines of
// the requests the servers' shutdown waited for are flushed. spans, when
// set, replaces the OTLP exporter (tests).
func (a *App) openObserve(cfg *config.Config, spans sdktrace.SpanProcessor) (*obs.AccessLog, *obs.Tracing, error) {
	var access *obs.AccessLog
	accessErrors, err := obs.NewAccessLogErrors(a.Registry)
	if err != nil {
		return nil, nil, fmt.Errorf("app: %w", err)
	}
	if al := cfg.AccessLog; al.Enabled {
		w, closeW, err := obs.OpenOutput(al.Output, al.MaxSizeMB, al.MaxBackups)
		if err != nil {
			return nil, nil, fmt.Errorf("app: access_log.output: %w", err)
		}
		access, err = obs.NewAccessLog(obs.AccessLogOptions{Writer: w, Format: al.Format, SampleAllowed: ratioOr1(al.SampleAllowed), Errors: accessErrors,
			Log: a.log, Now: a.now})
		if err != nil {
			closeW()
			return nil, nil, fmt.Errorf("app: %w", err)
		}
		a.close = append(a.close, closeW)
	}
	var tracing *obs.Tracing
	if tc := cfg.Tracing; tc.Enabled {
		var err error
		tracing, err = obs.NewTracing(obs.TracingOptions{Endpoint: tc.Endpoint, Protocol: tc.Protocol, Headers: tc.Headers,
			Insecure: tc.Insecure, SampleRatio: ratioOr1(tc.SampleRatio), ServiceName: tc.ServiceName, Processor: spans})
		if err != nil {
			return nil, nil, fmt.Errorf("app: %w", err)
		}
		// The SDK reports failed exports through the process-wide error
		// handler; its default writes them with the log package, which
		// slog.SetDefault makes INFO lines that --log-level warn hides.
		otel.SetErrorHandler(obs.NewExportErrorLog(obs.ExportErrorLogOptions{Log: a.log, Now: a.now}))
		a.close = append(a.close, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
			defer cancel()
			if err := tracing.Shutdown(ctx); err != nil {
				// The limiter stopped cleanly: only spans are lost, as they
				// are while the collector is unreachable (README, Traces).
				// A warning, not Close's error: `serve` exited 1 on every
				// SIGTERM while the collector was down, which a process
				// supervisor reads as a crash.
				a.log.Warn("tracing: spans still queued at shutdown were not exported: the collector did not take them in time",
					"endpoint", tc.Endpoint, "protocol", cmp.Or(tc.Protocol, "grpc"), "waited", tracingFlushTimeout, "err", err)
			}
			return nil
		})
	}
	return access, tracing, nil
}

// ratioOr1 is *r, or 1 (the default of both sampling ratios) when unset.
func ratioOr1(r *float64) float64 {
	if r == nil {
		return 1
	}
	return *r
}
