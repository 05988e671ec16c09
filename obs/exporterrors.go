package obs

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultExportErrorEvery is the least time between two lines
// [ExportErrorLog] writes: 30 s, so a collector down for a day costs at
// most 2,880 lines, and one down for a minute is still seen at once.
const DefaultExportErrorEvery = 30 * time.Second

// ExportErrorLog is the OpenTelemetry error handler (otel.SetErrorHandler)
// llmguard installs while tracing is on: it logs the SDK's errors — mostly
// failed span exports, "traces export: …" from the OTLP exporter — at WARN,
// so that `--log-level warn` still shows a broken collector (the SDK's
// default handler writes them with the standard log package, which
// slog.SetDefault turns into INFO lines). It writes at most one line per
// Every: the first error at once, then the next one after Every has passed,
// with "suppressed" counting the errors dropped in between. The zero value
// is not usable: build it with [NewExportErrorLog]. Safe for concurrent use.
type ExportErrorLog struct {
	log *slog.Logger
	gate
}

// ExportErrorLogOptions configures [NewExportErrorLog]; its zero value
// logs to slog.Default() on the wall clock every [DefaultExportErrorEvery].
type ExportErrorLogOptions struct {
	// Log receives the WARN lines. nil: slog.Default().
	Log *slog.Logger
	// Now is the clock the rate is measured on. nil: time.Now.
	Now func() time.Time
	// Every is the least time between two lines. ≤ 0: DefaultExportErrorEvery.
	Every time.Duration
}

// NewExportErrorLog builds an ExportErrorLog from o.
func NewExportErrorLog(o ExportErrorLogOptions) *ExportErrorLog {
	l := &ExportErrorLog{log: o.Log, gate: newGate(o.Now, o.Every, DefaultExportErrorEvery)}
	if l.log == nil {
		l.log = slog.Default()
	}
	return l
}

// Handle logs err at WARN unless a line was written less than Every ago,
// in which case it is only counted; it implements otel.ErrorHandler. A
// clock that steps back does not hold lines back longer than Every from
// the step.
func (l *ExportErrorLog) Handle(err error) {
	if err == nil {
		return
	}
	suppressed, ok := l.pass()
	if !ok {
		return
	}
	l.log.Warn("tracing: OpenTelemetry error (spans may be lost: is the collector reachable?)",
		"err", err, "suppressed", suppressed, "every", l.every)
}

// gate lets one event in per every, on the clock now: the first at once,
// then the next one after every has passed; the events held back in
// between are counted, and handed to the next that passes. A clock that
// steps back lets the next event through. Safe for concurrent use.
type gate struct {
	now   func() time.Time
	every time.Duration

	mu         sync.Mutex
	last       time.Time // when the last event passed; zero before the first
	suppressed int64     // events held back since the last that passed
}

// newGate is a gate on now (nil: time.Now) of every (≤ 0: def).
func newGate(now func() time.Time, every, def time.Duration) gate {
	if now == nil {
		now = time.Now
	}
	if every <= 0 {
		every = def
	}
	return gate{now: now, every: every}
}

// pass reports whether this event passes (ok) and, when it does, how many
// were held back since the last that did.
func (g *gate) pass() (suppressed int64, ok bool) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() && now.Sub(g.last) < g.every && !now.Before(g.last) {
		g.suppressed++
		return 0, false
	}
	suppressed = g.suppressed
	g.last, g.suppressed = now, 0
	return suppressed, true
}
