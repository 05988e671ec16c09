package obs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmguard/llmguard/internal/fakeclock"
	"github.com/llmguard/llmguard/ledger"
	"github.com/llmguard/llmguard/meter"
)

// The one sampled outcome is meter's.
func TestOutcomeAllowedIsMeters(t *testing.T) {
	if outcomeAllowed != meter.OutcomeAllowed {
		t.Fatalf("obs samples %q, meter calls allowed %q", outcomeAllowed, meter.OutcomeAllowed)
	}
}

// Sampling keeps about the configured share of allowed requests, the same
// ids on every AccessLog, and never drops another outcome.
func TestAccessLogSampling(t *testing.T) {
	for _, ratio := range []float64{0, 0.1, 0.5, 1} {
		a, _ := NewAccessLog(AccessLogOptions{SampleAllowed: ratio})
		b, _ := NewAccessLog(AccessLogOptions{SampleAllowed: ratio})
		kept := 0
		const n = 20000
		for i := range n {
			id := fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15)
			if a.Wants(id, "allowed") != b.Wants(id, "allowed") {
				t.Fatalf("ratio %v: id %s sampled differently by two logs", ratio, id)
			}
			if a.Wants(id, "allowed") {
				kept++
			}
			if !a.Wants(id, "limited") || !a.Wants(id, "unauthorized") {
				t.Fatalf("ratio %v: a denial was sampled out", ratio)
			}
		}
		if got := float64(kept) / n; got < ratio-0.02 || got > ratio+0.02 {
			t.Errorf("ratio %v kept %v of allowed requests", ratio, got)
		}
	}
	for _, bad := range []float64{-0.1, 1.1} {
		if _, err := NewAccessLog(AccessLogOptions{SampleAllowed: bad}); err == nil {
			t.Errorf("sample_allowed %v accepted", bad)
		}
	}
	if _, err := NewAccessLog(AccessLogOptions{Format: "xml"}); err == nil {
		t.Error("format xml accepted")
	}
}

// A line holds every field of the schema, once, with its value and unit.
func TestAccessLogLine(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewAccessLog(AccessLogOptions{Writer: &buf, SampleAllowed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Record: ledger.Record{RequestID: "r1", KeyID: "abcd", User: "u", Tenant: "t", Model: "m", Flavor: "openai", Status: 429,
		InputTokens: 3, OutputTokens: 4, CostMicroUSD: 5, EstimatedInputTokens: 6, Reserved: 7, ReservedUnit: "tokens"},
		Outcome: "limited", Limit: "rpm", Kind: "chat", EstimatedOutputTokens: 8, Overhead: 1500 * time.Microsecond,
		Upstream: 2 * time.Millisecond, Duration: 3 * time.Millisecond, TraceID: "0af7651916cd43dd8448eb211c80319c"}
	l.Write(&e)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	for _, f := range Fields() {
		if _, ok := m[f]; !ok {
			t.Errorf("no %s in %s", f, buf.Bytes())
		}
	}
	if m["overhead_us"] != 1500.0 || m["upstream_us"] != 2000.0 || m["limit"] != "rpm" || m["status"] != 429.0 ||
		m["trace_id"] != e.TraceID || m["estimated_output_tokens"] != 8.0 || m["client_gone"] != false {
		t.Errorf("line %s", buf.Bytes())
	}
	if got := len(e.SpanAttributes(nil)); got != len(Fields()) {
		t.Errorf("%d span attributes for %d fields", got, len(Fields()))
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("not one line: %q", buf.String())
	}
}

func TestOpenOutput(t *testing.T) {
	if _, _, err := OpenOutput(filepath.Join(t.TempDir(), "no", "such", "dir", "a.log"), 1, 0); err == nil {
		t.Error("a file in a missing directory was accepted")
	}
	path := filepath.Join(t.TempDir(), "a.log")
	w, closeW, err := OpenOutput(path, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeW()
	if _, err := w.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
}

func TestNewTracingRefuses(t *testing.T) {
	for _, o := range []TracingOptions{{SampleRatio: 2, Endpoint: "h:1"}, {SampleRatio: 1}, {SampleRatio: 1, Endpoint: "h:1", Protocol: "thrift"}} {
		if _, err := NewTracing(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// failingWriter takes no line: a full disk under the access log.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestAccessLogWriteErrorsCounted: each line the writer fails to take is
// counted in llmguard_access_log_errors_total (it was dropped unseen); a
// line written is not.
func TestAccessLogWriteErrorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	errs, err := NewAccessLogErrors(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		w    io.Writer
		want float64
	}{
		{"a full disk", failingWriter{}, 3},
		{"a writer that takes them", io.Discard, 3}, // no more
	} {
		l, err := NewAccessLog(AccessLogOptions{Writer: tc.w, SampleAllowed: 1, Errors: errs})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			l.Write(&Entry{Record: ledger.Record{RequestID: "r"}, Outcome: "allowed"})
		}
		if got := testutil.ToFloat64(errs); got != tc.want {
			t.Errorf("%s: llmguard_access_log_errors_total %v, want %v", tc.name, got, tc.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "llmguard_access_log_errors_total"); err != nil || n != 1 {
		t.Errorf("registered series: %d, %v", n, err)
	}
}

// TestAccessLogWriteErrorsLogged walks a fake clock through a full disk
// under the access log: the first lost line is an ERROR in the process
// log at once; losses within the next minute are only counted; the first
// one after it is a line carrying how many were held back; a writer that
// takes lines again logs nothing. Every loss is counted all along (adv51:
// losses were counted and never logged).
func TestAccessLogWriteErrorsLogged(t *testing.T) {
	rec := &recordHandler{}
	clock := fakeclock.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	errs, _ := NewAccessLogErrors(nil)
	var w switchWriter
	l, err := NewAccessLog(AccessLogOptions{Writer: &w, SampleAllowed: 1, Errors: errs, Log: slog.New(rec), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []struct {
		name       string
		advance    time.Duration
		full       bool
		writes     int
		lines      int   // ERROR lines so far
		suppressed int64 // the last line's count
	}{
		{name: "first loss", full: true, writes: 1, lines: 1},
		{name: "a hundred more within the minute", advance: 30 * time.Second, full: true, writes: 100, lines: 1},
		{name: "one just before the minute ends", advance: 30*time.Second - time.Nanosecond, full: true, writes: 1, lines: 1},
		{name: "the minute ends", advance: time.Nanosecond, full: true, writes: 1, lines: 2, suppressed: 101},
		{name: "the disk has room again", advance: time.Hour, writes: 50, lines: 2, suppressed: 101},
	} {
		clock.Advance(s.advance)
		w.full = s.full
		for range s.writes {
			l.Write(&Entry{Record: ledger.Record{RequestID: "r"}, Outcome: "allowed"})
		}
		rec.checkLast(t, fmt.Sprintf("step %d (%s)", i, s.name), s.lines, slog.LevelError, s.suppressed)
	}
	if got := testutil.ToFloat64(errs); got != 103 {
		t.Errorf("llmguard_access_log_errors_total %v, want 103", got)
	}
}

// switchWriter fails every line (a full disk) while full, and takes them
// otherwise.
type switchWriter struct{ full bool }

func (w *switchWriter) Write(p []byte) (int, error) {
	if w.full {
		return 0, syscall.ENOSPC
	}
	return len(p), nil
}
