package ledger

import (
	"sync"
	"sync/atomic"
	"time"
)

// Health is a Writer's state since it started, as /readyz shows it under
// "ledger": what an operator needs to see that records are going missing
// (the same figures as the llmguard_ledger_* metrics, and the last error,
// which the metrics cannot carry).
type Health struct {
	// Dropped: records Write refused (buffer full, or the writer closed);
	// llmguard_ledger_dropped_total.
	Dropped uint64 `json:"dropped"`
	// Lost: records a sink failed to write (the file: a write error; the
	// stream: given up past the retry bounds or at close), summed over the
	// sinks; llmguard_ledger_errors_total.
	Lost uint64 `json:"lost"`
	// Pending: records kept in memory to be sent to the stream again;
	// llmguard_ledger_pending{sink="redis"}.
	Pending int64 `json:"pending"`
	// Failing names the sinks ("file", "redis") whose last write failed,
	// in that order; empty while every sink's last write succeeded.
	Failing []string `json:"failing"`
	// LastError is the last error of any sink, "" when there was none;
	// LastErrorAt (RFC 3339, UTC) when it happened.
	LastError   string `json:"last_error,omitempty"`
	LastErrorAt string `json:"last_error_at,omitempty"`
}

// tally keeps what Health reports beside the metrics (a Prometheus counter
// cannot be read back cheaply, and carries no error).
type tally struct {
	lost                      atomic.Uint64
	pending                   atomic.Int64
	fileFailing, redisFailing atomic.Bool

	mu      sync.Mutex
	lastErr string
	lastAt  time.Time
}

// failed records err as the last error, at now, and marks the sink
// (sinkFile or sinkRedis) failing.
func (t *tally) failed(sink string, err error, now time.Time) {
	t.flag(sink).Store(true)
	t.mu.Lock()
	t.lastErr, t.lastAt = err.Error(), now
	t.mu.Unlock()
}

// ok marks the sink's last write as succeeded.
func (t *tally) ok(sink string) { t.flag(sink).Store(false) }

func (t *tally) flag(sink string) *atomic.Bool {
	if sink == sinkFile {
		return &t.fileFailing
	}
	return &t.redisFailing
}

// Health reports the writer's state; see Health. Safe for concurrent use,
// also after Close.
func (w *Writer) Health() Health {
	t := &w.m.tally
	h := Health{Dropped: w.dropped.Load(), Lost: t.lost.Load(), Pending: t.pending.Load(), Failing: []string{}}
	if t.fileFailing.Load() {
		h.Failing = append(h.Failing, sinkFile)
	}
	if t.redisFailing.Load() {
		h.Failing = append(h.Failing, sinkRedis)
	}
	t.mu.Lock()
	if t.lastErr != "" {
		h.LastError, h.LastErrorAt = t.lastErr, t.lastAt.UTC().Format(time.RFC3339)
	}
	t.mu.Unlock()
	return h
}
