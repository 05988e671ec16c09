package ledger

import (
	"context"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithMaxBytes sets the rotation size in bytes, below lumberjack's 1 MB.
func WithMaxBytes(o Options, n int64) Options { o.maxBytes = n; return o }

// WithBeforeBatch has the writing goroutine call f each time before it
// waits for records: a blocking f holds the sink, so that the buffer fills.
func WithBeforeBatch(o Options, f func()) Options { o.beforeBatch = f; return o }

// WithFileWriter has the file sink write through wrap(file) instead of
// the file: a wrapper that stops part way through a write stands for a
// disk that fills.
func WithFileWriter(o Options, wrap func(io.Writer) io.Writer) Options { o.fileWriter = wrap; return o }

// WithClock gives the Redis sink a clock of its own (the age of kept
// records is read from it).
func WithClock(o Options, now func() time.Time) Options { o.now = now; return o }

// ReadStream is ScanStream collecting the records, oldest entry first. Tests
// only: it holds them all.
func ReadStream(ctx context.Context, client redis.Cmdable, stream string, from, to time.Time) (recs []Record, bad int, err error) {
	bad, err = ScanStream(ctx, client, stream, from, to, func(r Record) { recs = append(recs, r) })
	if err != nil {
		return nil, bad, err
	}
	return recs, bad, nil
}
