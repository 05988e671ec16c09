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
	log   *slog.Logger
	now   func() time.Time
	every time.Duration

	mu         sync.Mutex
	last       time.Time // when the last line was written; zero before the first
	suppressed int64     // errors dropped since the last line
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
	l := &ExportErrorLog{log: o.Log, now: o.Now, every: o.Every}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.every <= 0 {
		l.every = DefaultExportErrorEvery
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
	now := l.now()
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every && !now.Before(l.last) {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.log.Warn("tracing: OpenTelemetry error (spans may be lost: is the collector reachable?)",
		"err", err, "suppressed", suppressed, "every", l.every)
}
