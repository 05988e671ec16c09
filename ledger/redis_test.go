package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/ledger"
)

// redisClientStub is a client that is never used.
func redisClientStub() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
}

// TestRedisStreamTrimmed adds every record to the stream, trimmed to about
// MaxLen entries, and ReadStream gives back the newest records.
func TestRedisStreamTrimmed(t *testing.T) {
	const n, maxLen = 2000, 300
	srv := redistest.Start(t)
	client := srv.Client()
	reg := prometheus.NewPedanticRegistry()
	w := mustNew(t, ledger.Options{File: filePath(t), Redis: client, Stream: "ledger", MaxLen: maxLen, Registerer: reg})
	for i := range n {
		w.Write(rec(i))
		if i%300 == 0 {
			flush(t, w)
		}
	}
	flush(t, w)

	ctx := context.Background()
	xlen, err := client.XLen(ctx, "ledger").Result()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole nodes of stream-node-max-entries (100) entries.
	if xlen < maxLen || xlen > maxLen+100 {
		t.Errorf("XLEN = %d, want in [%d, %d]", xlen, maxLen, maxLen+100)
	}
	if got := counter(t, reg, "llmguard_ledger_records_total", "redis"); got != n {
		t.Errorf("records_total{sink=redis} = %v, want %d", got, n)
	}
	recs, bad, err := ledger.ReadStream(ctx, client, "ledger", time.Time{}, time.Time{})
	if err != nil || bad != 0 {
		t.Fatal(err, bad)
	}
	if int64(len(recs)) != xlen {
		t.Fatalf("ReadStream returned %d records, XLEN %d", len(recs), xlen)
	}
	for i, r := range recs {
		if want := rec(n - len(recs) + i); r != want {
			t.Fatalf("stream record %d = %+v, want %+v", i, r, want)
		}
	}
	// Each entry is one field, "r", holding the JSON line.
	msgs, err := client.XRevRangeN(ctx, "ledger", "+", "-", 1).Result()
	if err != nil || len(msgs) != 1 || len(msgs[0].Values) != 1 || msgs[0].Values["r"] == nil {
		t.Errorf("last entry %+v (err %v), want one field r", msgs, err)
	}
}

// TestReadStreamRangeAndPages reads a time range over several XRANGE pages,
// and the summary from the stream equals the summary from the file.
func TestReadStreamRangeAndPages(t *testing.T) {
	const n = 2500 // three pages
	srv := redistest.Start(t)
	client := srv.Client()
	path := filePath(t)
	w := mustNew(t, ledger.Options{File: path, Redis: client, Stream: "ledger"})
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range n {
		r := rec(i)
		r.TS = now.Add(time.Duration(i-n) * time.Millisecond)
		w.Write(r)
	}
	ctx := context.Background()
	// A Flush sends the stream one pipeline of what is pending: on a
	// loaded machine the 2500 records may all be pending at the first, so
	// flush until the stream holds them (a liveness wait, not a bound).
	for deadline := time.Now().Add(time.Minute); ; {
		flush(t, w)
		if l, err := client.XLen(ctx, "ledger").Result(); err == nil && l >= n || time.Now().After(deadline) {
			break
		}
	}
	all, _, err := ledger.ReadStream(ctx, client, "ledger", time.Time{}, time.Time{})
	if err != nil || len(all) != n {
		t.Fatalf("ReadStream everything: %d records, err %v; want %d", len(all), err, n)
	}
	from, to := now.Add(-2000*time.Millisecond), now.Add(-500*time.Millisecond)
	part, _, err := ledger.ReadStream(ctx, client, "ledger", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(part) != 1500 || part[0].RequestID != rec(500).RequestID || part[len(part)-1].RequestID != rec(1999).RequestID {
		t.Fatalf("ReadStream [from, to): %d records, want 1500 from req-000500 to req-001999", len(part))
	}
	w.Close()
	f := ledger.Filter{Tenant: "acme", From: from, To: to}
	fromFile, fromStream := ledger.Summarize(mustRead(t, path), f), ledger.Summarize(all, f)
	if fmt.Sprint(fromFile) != fmt.Sprint(fromStream) || fromFile.Total.Requests != 750 {
		t.Errorf("summaries differ or miscount:\nfile   %+v\nstream %+v", fromFile.Total, fromStream.Total)
	}
}

// TestRedisKilledRecordsKept kills Redis, with and without a file: every
// record still reaches the file, Flush does not hang, the records the
// stream missed are kept (llmguard_ledger_pending) and not counted as
// lost, and once Redis is back the stream gets every one of them, in
// order, exactly once.
func TestRedisKilledRecordsKept(t *testing.T) {
	for _, withFile := range []bool{true, false} {
		t.Run(fmt.Sprint("file=", withFile), func(t *testing.T) {
			srv := redistest.Start(t)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			t.Cleanup(func() { client.Close() })
			path := ""
			if withFile {
				path = filePath(t)
			}
			reg := prometheus.NewPedanticRegistry()
			logger, logs := newLogger()
			w := mustNew(t, ledger.Options{File: path, Redis: client, Stream: "ledger", RedisTimeout: 500 * time.Millisecond, Registerer: reg, Logger: logger})
			for i := range 100 {
				w.Write(rec(i))
			}
			flush(t, w)

			srv.Kill()
			for i := 100; i < 600; i++ {
				w.Write(rec(i))
				if i%100 == 0 {
					flush(t, w)
				}
			}
			flush(t, w)
			if withFile {
				if got := len(mustRead(t, path)); got != 600 {
					t.Errorf("file holds %d records, want 600", got)
				}
			}
			if got := counter(t, reg, "llmguard_ledger_records_total", "redis"); got != 100 {
				t.Errorf("records_total{sink=redis} = %v, want 100", got)
			}
			if got := counter(t, reg, "llmguard_ledger_errors_total", "redis"); got != 0 {
				t.Errorf("errors_total{sink=redis} = %v, want 0: nothing is given up within the retry bounds", got)
			}
			if got := gauge(t, reg, "llmguard_ledger_pending", "redis"); got != 500 {
				t.Errorf("pending{sink=redis} = %v, want 500", got)
			}
			waitFor(t, func() bool { return strings.Contains(logs.String(), "kept in memory and sent again") })
			if !withFile && strings.Contains(logs.String(), "the ledger file has them") {
				t.Errorf("the log speaks of a file there is none of: %s", logs.String())
			}

			const back = "ledger: redis sink: the stream takes records again"
			if strings.Contains(logs.String(), back) {
				t.Fatalf("the stream's return logged while Redis is down: %s", logs.String())
			}
			srv.Restart()
			waitFor(t, func() bool {
				flush(t, w)
				return gauge(t, reg, "llmguard_ledger_pending", "redis") == 0
			})
			// The outage's end is logged as its start was (trial3: only
			// the start was).
			if out := logs.String(); strings.Count(out, back) != 1 || !strings.Contains(out[strings.Index(out, back):], "failing_for=") {
				t.Errorf("want one line saying the stream takes records again, with failing_for: %s", out)
			}
			w.Write(rec(600))
			w.Close()
			if got := counter(t, reg, "llmguard_ledger_records_total", "redis"); got != 601 {
				t.Errorf("records_total{sink=redis} = %v after the restart, want 601 (100 before, the 500 kept and one more)", got)
			}
			// The restarted server kept nothing (no persistence): it holds
			// exactly the records kept during the outage and the one after.
			recs, bad, err := ledger.ReadStream(context.Background(), client, "ledger", time.Time{}, time.Time{})
			if err != nil || bad != 0 || len(recs) != 501 {
				t.Fatalf("ReadStream: %d records, %d bad, err %v; want 501", len(recs), bad, err)
			}
			for i, r := range recs {
				if want := rec(100 + i); r != want {
					t.Fatalf("stream record %d = %+v, want %+v (in order, once each)", i, r, want)
				}
			}
		})
	}
}

// TestRedisRetryBounds gives records up past the retry buffer's bytes and
// past its age, oldest first, counting each in errors_total and saying so
// in the log; the newest are still sent once Redis is back.
func TestRedisRetryBounds(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	reg := prometheus.NewPedanticRegistry()
	logger, logs := newLogger()
	last10 := 0 // the bytes of the last ten records' lines
	for i := 15; i < 25; i++ {
		last10 += len(mustJSON(t, rec(i)))
	}
	o := ledger.WithClock(ledger.Options{Redis: client, Stream: "ledger", RedisTimeout: 300 * time.Millisecond,
		RedisRetryBytes: int64(last10), RedisRetryFor: time.Minute, Registerer: reg, Logger: logger}, clock)
	w := mustNew(t, o)
	srv.Kill()
	for i := range 25 { // 15 past the bytes bound
		w.Write(rec(i))
		flush(t, w)
	}
	flush(t, w)
	if got := counter(t, reg, "llmguard_ledger_errors_total", "redis"); got != 15 {
		t.Fatalf("errors_total = %v, pending %v, want 15 given up past the bytes bound", got, gauge(t, reg, "llmguard_ledger_pending", "redis"))
	}
	if got := gauge(t, reg, "llmguard_ledger_pending", "redis"); got != 10 {
		t.Errorf("pending = %v, want 10 (the bytes bound)", got)
	}
	if !strings.Contains(logs.String(), "given up") || !strings.Contains(logs.String(), "they are lost") {
		t.Errorf("log %q does not say records were given up and lost", logs.String())
	}
	if h := w.Health(); h.Lost != 15 || h.Pending != 10 || !slices.Equal(h.Failing, []string{"redis"}) || h.LastError == "" || h.LastErrorAt != "2026-01-01T00:00:00Z" {
		t.Errorf("Health while Redis is down = %+v, want 15 lost, 10 pending, failing [redis], the last error at the clock's time", h)
	}
	advance(2 * time.Minute) // the 10 kept are now too old
	w.Write(rec(25))
	flush(t, w)
	if got := counter(t, reg, "llmguard_ledger_errors_total", "redis"); got != 25 {
		t.Errorf("errors_total = %v after the age bound, want 25", got)
	}
	srv.Restart()
	waitFor(t, func() bool {
		advance(2 * time.Second) // past the backoff
		flush(t, w)
		return gauge(t, reg, "llmguard_ledger_pending", "redis") == 0
	})
	// Back: nothing failing or pending; what was lost stays counted, and
	// the last error stays shown.
	if h := w.Health(); h.Lost != 25 || h.Pending != 0 || len(h.Failing) != 0 || h.LastError == "" {
		t.Errorf("Health once Redis is back = %+v, want 25 lost, none pending or failing, the last error kept", h)
	}
	w.Close()
	recs, _, err := ledger.ReadStream(context.Background(), client, "ledger", time.Time{}, time.Time{})
	if err != nil || len(recs) != 1 || recs[0] != rec(25) {
		t.Fatalf("stream holds %+v (err %v), want only rec(25)", recs, err)
	}
}

// TestRedisRetryBoundsOneBatch: a batch larger than the retry bound, sent
// while Redis is down, gives up its oldest records at once; the pending
// gauge counts the ones kept (each given up once, not subtracted twice).
func TestRedisRetryBoundsOneBatch(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	last10 := 0
	for i := 15; i < 25; i++ {
		last10 += len(mustJSON(t, rec(i)))
	}
	reg := prometheus.NewPedanticRegistry()
	logger, _ := newLogger()
	w := mustNew(t, ledger.Options{Redis: client, Stream: "ledger", RedisTimeout: 300 * time.Millisecond,
		RedisRetryBytes: int64(last10), Registerer: reg, Logger: logger})
	srv.Kill()
	for i := range 25 {
		w.Write(rec(i))
	}
	flush(t, w)
	if e, p := counter(t, reg, "llmguard_ledger_errors_total", "redis"), gauge(t, reg, "llmguard_ledger_pending", "redis"); e+p != 25 || p != 10 {
		t.Errorf("errors_total %v, pending %v; want 15 given up and 10 kept (25 in all)", e, p)
	}
}

// TestReadStreamDuplicatesAndBadEntries reads an entry sent twice (a
// timed-out pipeline Redis had applied) once, and counts the entries that
// hold no record.
func TestReadStreamDuplicatesAndBadEntries(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	add := func(values ...any) {
		if err := client.XAdd(ctx, &redis.XAddArgs{Stream: "ledger", Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := mustJSON(t, rec(1)), mustJSON(t, rec(2))
	add("r", a)
	add("r", `{"ts":"broken`)
	add("r", b)
	add("other", "x")
	add("r", a) // sent again
	add("r", "")
	recs, bad, err := ledger.ReadStream(ctx, client, "ledger", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0] != rec(1) || recs[1] != rec(2) {
		t.Errorf("records %+v, want rec(1), rec(2) once each", recs)
	}
	if bad != 3 {
		t.Errorf("bad = %d, want 3", bad)
	}
}

// mustJSON is r's ledger line as the Writer writes it (UTC, no newline).
func mustJSON(t *testing.T, r ledger.Record) string {
	t.Helper()
	r.TS = r.TS.UTC()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMetricsNameOnlyConfiguredSinks: a writer's series name the sinks it
// has and no other (a file-only node exported
// llmguard_ledger_records_total{sink="redis"} at 0, and a Redis-only one
// {sink="file"}, as if a sink were configured and idle).
func TestMetricsNameOnlyConfiguredSinks(t *testing.T) {
	for name, tc := range map[string]struct {
		o    ledger.Options
		want string
	}{
		"file":  {ledger.Options{File: filePath(t)}, "file"},
		"redis": {ledger.Options{Redis: redisClientStub(), Stream: "ledger"}, "redis"},
		"both":  {ledger.Options{File: filePath(t), Redis: redisClientStub(), Stream: "ledger"}, "file,redis"},
	} {
		reg := prometheus.NewPedanticRegistry()
		tc.o.Registerer = reg
		w := mustNew(t, tc.o)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, family := range []string{"llmguard_ledger_records_total", "llmguard_ledger_errors_total"} {
			var sinks []string
			for _, mf := range mfs {
				if mf.GetName() != family {
					continue
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "sink" {
							sinks = append(sinks, l.GetValue())
						}
					}
				}
			}
			if got := strings.Join(sinks, ","); got != tc.want {
				t.Errorf("%s: %s names sinks %q, want %q", name, family, got, tc.want)
			}
		}
		w.Close()
	}
}
