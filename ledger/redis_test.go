package ledger_test

import (
	"context"
	"fmt"
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
	recs, err := ledger.ReadStream(ctx, client, "ledger", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
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
	flush(t, w)

	ctx := context.Background()
	all, err := ledger.ReadStream(ctx, client, "ledger", time.Time{}, time.Time{})
	if err != nil || len(all) != n {
		t.Fatalf("ReadStream everything: %d records, err %v; want %d", len(all), err, n)
	}
	from, to := now.Add(-2000*time.Millisecond), now.Add(-500*time.Millisecond)
	part, err := ledger.ReadStream(ctx, client, "ledger", from, to)
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

// TestRedisKilledFileGoesOn kills Redis: every record still reaches the
// file, Flush does not hang, the stream's losses are counted exactly, and
// the stream resumes once Redis is back.
func TestRedisKilledFileGoesOn(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	path := filePath(t)
	reg := prometheus.NewPedanticRegistry()
	logger, logs := newLogger()
	w := mustNew(t, ledger.Options{File: path, Redis: client, Stream: "ledger", RedisTimeout: 500 * time.Millisecond, Registerer: reg, Logger: logger})
	for i := range 100 {
		w.Write(rec(i))
	}
	flush(t, w)

	srv.Kill()
	start := time.Now()
	for i := 100; i < 600; i++ {
		w.Write(rec(i))
		if i%100 == 0 {
			flush(t, w)
		}
	}
	flush(t, w)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("writing and flushing 500 records with Redis down took %v", d)
	}
	if got := len(mustRead(t, path)); got != 600 {
		t.Errorf("file holds %d records, want 600", got)
	}
	if got := counter(t, reg, "llmguard_ledger_records_total", "redis"); got != 100 {
		t.Errorf("records_total{sink=redis} = %v, want 100", got)
	}
	if got := counter(t, reg, "llmguard_ledger_errors_total", "redis"); got != 500 {
		t.Errorf("errors_total{sink=redis} = %v, want 500 (each lost record once)", got)
	}
	if got := counter(t, reg, "llmguard_ledger_records_total", "file"); got != 600 {
		t.Errorf("records_total{sink=file} = %v, want 600", got)
	}
	waitFor(t, func() bool { return len(logs.String()) > 0 })

	srv.Restart()
	i := 600
	waitFor(t, func() bool {
		w.Write(rec(i))
		i++
		flush(t, w)
		n, _ := client.XLen(context.Background(), "ledger").Result()
		return n > 0
	})
	w.Close()
	if got := len(mustRead(t, path)); got != i {
		t.Errorf("file holds %d records, want %d", got, i)
	}
	if got := counter(t, reg, "llmguard_ledger_records_total", "redis") + counter(t, reg, "llmguard_ledger_errors_total", "redis"); got != float64(i) {
		t.Errorf("redis records + errors = %v, want %d: every record accounted once", got, i)
	}
}
