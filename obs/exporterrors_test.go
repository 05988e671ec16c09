package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/fakeclock"
)

// recordHandler keeps every record logged through it.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// attr is the value of r's attribute key, or nil.
func attr(r slog.Record, key string) any {
	var v any
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.Any()
			return false
		}
		return true
	})
	return v
}

// checkLast checks that h holds lines records so far and that the last is
// at level with its "suppressed" attribute equal to suppressed, naming the
// step in each failure; it returns the last record.
func (h *recordHandler) checkLast(t *testing.T, step string, lines int, level slog.Level, suppressed int64) slog.Record {
	t.Helper()
	h.mu.Lock()
	recs := append([]slog.Record(nil), h.recs...)
	h.mu.Unlock()
	if len(recs) != lines {
		t.Fatalf("%s: %d lines, want %d", step, len(recs), lines)
	}
	last := recs[len(recs)-1]
	if last.Level != level {
		t.Errorf("%s: level %v, want %v", step, last.Level, level)
	}
	if got := attr(last, "suppressed"); got != suppressed {
		t.Errorf("%s: suppressed %v, want %d", step, got, suppressed)
	}
	return last
}

// TestExportErrorLogRateLimited walks a fake clock through a collector's
// failures: the first error is a WARN line at once; errors within the
// next 30 s are only counted; the first one after is a line carrying the
// count of those suppressed; a clock stepped back logs at once.
func TestExportErrorLogRateLimited(t *testing.T) {
	rec := &recordHandler{}
	clock := fakeclock.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := NewExportErrorLog(ExportErrorLogOptions{Log: slog.New(rec), Now: clock.Now, Every: 30 * time.Second})
	fail := errors.New("traces export: context deadline exceeded")
	steps := []struct {
		name       string
		advance    time.Duration
		errs       int
		lines      int   // lines written so far
		suppressed int64 // the last line's count
	}{
		{name: "first error", errs: 1, lines: 1, suppressed: 0},
		{name: "five more within the period", advance: 10 * time.Second, errs: 5, lines: 1, suppressed: 0},
		{name: "one just before the period ends", advance: 20*time.Second - time.Nanosecond, errs: 1, lines: 1, suppressed: 0},
		{name: "the period ends", advance: time.Nanosecond, errs: 1, lines: 2, suppressed: 6},
		{name: "three more within", advance: time.Second, errs: 3, lines: 2, suppressed: 6},
		{name: "long quiet, then one", advance: time.Hour, errs: 1, lines: 3, suppressed: 3},
		{name: "a nil error is no error", errs: 0, lines: 3, suppressed: 3},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		for range s.errs {
			l.Handle(fail)
		}
		if s.errs == 0 {
			l.Handle(nil)
		}
		last := rec.checkLast(t, fmt.Sprintf("step %d (%s)", i, s.name), s.lines, slog.LevelWarn, s.suppressed)
		if got, ok := attr(last, "err").(error); !ok || got.Error() != fail.Error() {
			t.Errorf("step %d (%s): err %v, want %v", i, s.name, attr(last, "err"), fail)
		}
	}
}

// TestExportErrorLogClockBack: a clock stepped back does not silence the
// next error.
func TestExportErrorLogClockBack(t *testing.T) {
	rec := &recordHandler{}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := NewExportErrorLog(ExportErrorLogOptions{Log: slog.New(rec), Now: func() time.Time { return now }})
	l.Handle(errors.New("a"))
	now = now.Add(-time.Minute)
	l.Handle(errors.New("b"))
	if len(rec.recs) != 2 {
		t.Fatalf("%d lines, want 2", len(rec.recs))
	}
}
