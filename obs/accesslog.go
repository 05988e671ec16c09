package obs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/llmguard/llmguard/spec"
)

// AccessLogOptions configures an AccessLog. The zero value writes JSON to
// os.Stderr and logs no allowed request (SampleAllowed 0).
type AccessLogOptions struct {
	// Writer receives the lines, one Write per line (so a file opened
	// O_APPEND or a lumberjack.Logger keeps lines whole). nil: os.Stderr.
	Writer io.Writer
	// Format is "json" (slog.JSONHandler) or "text" (slog.TextHandler).
	// "": json.
	Format string
	// SampleAllowed is the share of requests with outcome "allowed" that
	// are logged, in [0, 1], decided by their request id. Every other
	// outcome is always logged.
	SampleAllowed float64
	// Errors counts the lines Writer failed to take (a full disk, an I/O
	// error), one per line: NewAccessLogErrors's
	// llmguard_access_log_errors_total. nil: not counted.
	Errors prometheus.Counter
	// Log receives an ERROR line when Writer fails to take a line, at most
	// one per ErrorEvery (the first at once; the next one says how many
	// failed in between, "suppressed"), so that a full disk under the
	// access log is seen in the process log without a line a request.
	// nil: slog.Default().
	Log *slog.Logger
	// Now is the clock ErrorEvery is measured on. nil: time.Now.
	Now func() time.Time
	// ErrorEvery is the least time between two such lines. ≤ 0:
	// DefaultAccessLogErrorEvery.
	ErrorEvery time.Duration
}

// DefaultAccessLogErrorEvery is [AccessLogOptions.ErrorEvery]'s default:
// one minute, so a disk full for a day costs at most 1,440 lines of the
// process log.
const DefaultAccessLogErrorEvery = time.Minute

// NewAccessLogErrors builds the counter of access-log lines that could
// not be written, llmguard_access_log_errors_total (AccessLogOptions.Errors),
// and registers it with reg when reg is not nil. It is made whether or
// not an access log is on, so that a dashboard's query of it has data
// (0) on every node. Errors: a registration conflict from reg.
func NewAccessLogErrors(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "llmguard_access_log_errors_total",
		Help: "Access log lines that could not be written (a full disk, an I/O error on access_log.output); each is a request missing from the access log.",
	})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// AccessLog writes one line per request. Safe for concurrent use (the
// slog handler serialises writes).
type AccessLog struct {
	h      slog.Handler
	errors prometheus.Counter // nil: failures not counted
	log    *slog.Logger       // the process log, for failures (gate-limited)
	failed gate
	// keepAll and keepBelow are the sampling decision: every allowed
	// request when keepAll, else those whose id hashes below keepBelow.
	keepAll   bool
	keepBelow uint64
}

// NewAccessLog builds an AccessLog. Errors: an unknown Format, or a
// SampleAllowed outside [0, 1].
func NewAccessLog(o AccessLogOptions) (*AccessLog, error) {
	if !(o.SampleAllowed >= 0 && o.SampleAllowed <= 1) {
		return nil, fmt.Errorf("obs: access log sample_allowed %v is not in [0, 1]", o.SampleAllowed)
	}
	w := o.Writer
	if w == nil {
		w = os.Stderr
	}
	var h slog.Handler
	f, ok := spec.ParseLogFormat(o.Format)
	switch {
	case !ok && o.Format != "":
		return nil, fmt.Errorf("obs: access log format %q is not json or text", o.Format)
	case f == spec.LogText:
		h = slog.NewTextHandler(w, nil)
	default:
		h = slog.NewJSONHandler(w, nil)
	}
	l := &AccessLog{h: h, errors: o.Errors, log: o.Log, failed: newGate(o.Now, o.ErrorEvery, DefaultAccessLogErrorEvery), keepAll: o.SampleAllowed >= 1}
	if l.log == nil {
		l.log = slog.Default()
	}
	if !l.keepAll {
		l.keepBelow = uint64(o.SampleAllowed * math.MaxUint64)
	}
	return l, nil
}

// Wants reports whether the request id with outcome is to be logged: every
// outcome but "allowed" is; an allowed request is when its id's hash falls
// in the sampled share, the same answer for the same id on every node.
func (l *AccessLog) Wants(id, outcome string) bool {
	if outcome != outcomeAllowed || l.keepAll {
		return true
	}
	return l.keepBelow > 0 && xxhash.Sum64String(id) < l.keepBelow
}

// outcomeAllowed is meter.OutcomeAllowed, the one outcome sampled (obs does
// not import meter; TestOutcomeAllowedIsMeters pins the two together).
const outcomeAllowed = "allowed"

// Write writes e as one line at level INFO with the message "access",
// stamped now. It does not check Wants. A line the writer fails to take
// is counted in AccessLogOptions.Errors, logged to AccessLogOptions.Log
// at most once per ErrorEvery, and lost.
func (l *AccessLog) Write(e *Entry) {
	var buf [32]slog.Attr // every field fits: one allocation for the record's overflow, none for the list
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "access", 0)
	r.AddAttrs(e.appendAttrs(buf[:0])...)
	if err := l.h.Handle(context.Background(), r); err != nil {
		if l.errors != nil {
			l.errors.Inc()
		}
		if suppressed, ok := l.failed.pass(); ok {
			l.log.Error("access log: a line could not be written and is lost (see llmguard_access_log_errors_total)",
				"err", err, "suppressed", suppressed, "every", l.failed.every)
		}
	}
}

// OpenOutput opens an access log's destination: "stderr", "stdout" or a
// file path, rotated past maxSizeMB megabytes keeping maxBackups rotated
// files (0: all) by lumberjack, and made again at its path when removed or
// moved (followingFile, within followEvery). close releases it (a no-op
// for the standard streams). Errors: an empty output, or a file that cannot be
// opened for appending.
func OpenOutput(output string, maxSizeMB, maxBackups int) (w io.Writer, close func() error, err error) {
	switch output {
	case "":
		return nil, nil, errors.New("obs: access log output is empty")
	case "stderr":
		return os.Stderr, func() error { return nil }, nil
	case "stdout":
		return os.Stdout, func() error { return nil }, nil
	}
	// Opened once now, so that a path llmguard cannot write is refused at
	// start rather than losing every line (lumberjack opens lazily).
	// O_NONBLOCK: a FIFO there fails at once (ENXIO, no reader) rather
	// than holding the start for a reader; it changes nothing for a
	// regular file.
	f, err := os.OpenFile(output, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("obs: access log: %w", err)
	}
	st, err := f.Stat()
	f.Close()
	if err == nil && !st.Mode().IsRegular() {
		return nil, nil, notRegular(output, st)
	}
	lj := newFollowingFile(&lumberjack.Logger{Filename: output, MaxSize: maxSizeMB, MaxBackups: maxBackups})
	return lj, lj.Close, nil
}
