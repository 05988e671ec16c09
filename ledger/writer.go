package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Flush once Close has been called.
var ErrClosed = errors.New("ledger: writer closed")

// Defaults of Options' zero fields.
const (
	DefaultBuffer       = 65536           // records
	DefaultMaxSizeMB    = 100             // megabytes
	DefaultRedisTimeout = 2 * time.Second // per pipelined batch

	// DefaultRedisRetryBytes bounds the records kept in memory for the
	// stream while Redis does not take them: 64 MiB of JSON lines, some
	// 200,000 records of about 300 bytes.
	DefaultRedisRetryBytes = 64 << 20
	// DefaultRedisRetryFor is how long a record is kept for the stream
	// before it is given up. ScanStream reads this far past its range's end,
	// as a record sent late gets a late stream id.
	DefaultRedisRetryFor = time.Hour

	// maxBatch is the most records written between two flushes.
	maxBatch = 4096
	// flushEvery bounds how long an encoded record waits in the file
	// sink's buffer (the batch flushes when it ends, which is sooner but
	// for a batch that never ends).
	flushEvery = 100 * time.Millisecond
	// redisBackoff is how long after a failed send the Redis sink waits
	// before it sends the records it kept again.
	redisBackoff = time.Second
	// dropLogEvery is the least time between two log lines about drops.
	dropLogEvery = 10 * time.Second
)

// Options configure a Writer. At least one of File and Redis must be set.
// The zero value of every other field is a documented default.
type Options struct {
	// File is the JSON-lines file appended to, one Record per line; empty
	// for no file. It is rotated by size: backups are named
	// <name>-<UTC timestamp>.<ext> beside it (lumberjack's names).
	File string
	// MaxSizeMB is the size in megabytes (MiB) at which the file is rotated;
	// zero means DefaultMaxSizeMB.
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept; zero keeps all.
	MaxBackups int
	// MaxAgeDays is how many days rotated files are kept; zero keeps them
	// regardless of age.
	MaxAgeDays int
	// Compress gzips rotated files (<name>-<timestamp>.<ext>.gz); ReadFiles
	// reads them either way.
	Compress bool

	// Redis, when not nil, also receives every record on Stream. A
	// *redis.Client or *redis.ClusterClient (the stream is one key).
	Redis redis.UniversalClient
	// Stream is the stream's key; required with Redis. Each entry has one
	// field, "r", holding the record's JSON (the same bytes as the file's
	// line, without the newline).
	Stream string
	// MaxLen trims the stream with XADD MAXLEN ~ MaxLen: Redis keeps at
	// least MaxLen entries and trims whole nodes, so a little more; zero
	// never trims.
	MaxLen int64
	// RedisTimeout bounds one pipelined batch of XADDs; zero means
	// DefaultRedisTimeout.
	RedisTimeout time.Duration
	// RedisRetryBytes bounds, in bytes of JSON lines, the records kept in
	// memory to be sent again while Redis does not take them (down, slow,
	// refusing); past it the oldest are given up and counted in
	// llmguard_ledger_errors_total{sink="redis"}. Zero means
	// DefaultRedisRetryBytes.
	RedisRetryBytes int64
	// RedisRetryFor is how long a record is kept to be sent again before it
	// is given up; zero means DefaultRedisRetryFor, which is also the most:
	// ScanStream reads that far past a range's end for records sent late.
	RedisRetryFor time.Duration

	// Buffer is how many records Write may queue before it drops; zero
	// means DefaultBuffer.
	Buffer int
	// Registerer, when not nil, gets the writer's metrics (see Writer).
	Registerer prometheus.Registerer
	// Logger receives write errors and drop reports (rate-limited); nil
	// means slog.Default().
	Logger *slog.Logger

	// Test hooks.
	maxBytes    int64                     // rotation size in bytes, overriding MaxSizeMB
	now         func() time.Time          // the Redis sink's clock; nil: time.Now
	beforeBatch func()                    // called by the goroutine before it waits for records
	fileWriter  func(io.Writer) io.Writer // wraps the file's writer (a disk that fills)
}

// Writer queues Records and writes them to the file and the stream from one
// goroutine. Write never blocks; Flush waits for what was written before it;
// Close drains everything. Safe for concurrent use.
//
// Metrics (on Options.Registerer):
//
//	llmguard_ledger_dropped_total           records Write refused: buffer full, or Writer closed
//	llmguard_ledger_records_total{sink}     records written, sink = file | redis (only the sinks configured)
//	llmguard_ledger_errors_total{sink}      records a sink failed to write (redis: given up)
//	llmguard_ledger_pending{sink="redis"}   records kept to be sent to the stream again
type Writer struct {
	mu     sync.RWMutex // guards closed and sending on ch against close(ch)
	closed bool
	ch     chan Record

	flushReq chan chan error
	dropSig  chan struct{} // wakes the drop reporter; capacity 1
	dropped  atomic.Uint64

	file    *fileSink  // nil without a file
	redis   *redisSink // nil without Redis
	m       *metrics
	log     *slog.Logger
	hook    func()
	done    chan struct{} // closed when the writing goroutine has ended
	stopLog chan struct{} // stops the drop reporter
	logDone chan struct{}
	once    sync.Once
	err     error // Close's result
}

// New checks o, opens the sinks and starts the writing goroutine.
//
// Errors: neither File nor Redis set, Redis without Stream, negative sizes,
// an existing File that cannot be read, and metric registration conflicts.
func New(o Options) (*Writer, error) {
	switch {
	case o.File == "" && o.Redis == nil:
		return nil, errors.New("ledger: options: neither File nor Redis set")
	case o.Redis != nil && o.Stream == "":
		return nil, errors.New("ledger: options: Redis set without Stream")
	case o.MaxSizeMB < 0 || o.MaxBackups < 0 || o.MaxAgeDays < 0 || o.MaxLen < 0 || o.Buffer < 0 || o.RedisTimeout < 0 ||
		o.RedisRetryBytes < 0 || o.RedisRetryFor < 0:
		return nil, fmt.Errorf("ledger: options: negative size, count or timeout (MaxSizeMB %d, MaxBackups %d, MaxAgeDays %d, MaxLen %d, Buffer %d, RedisTimeout %v, RedisRetryBytes %d, RedisRetryFor %v)",
			o.MaxSizeMB, o.MaxBackups, o.MaxAgeDays, o.MaxLen, o.Buffer, o.RedisTimeout, o.RedisRetryBytes, o.RedisRetryFor)
	}
	if o.MaxSizeMB == 0 {
		o.MaxSizeMB = DefaultMaxSizeMB
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	if o.RedisTimeout == 0 {
		o.RedisTimeout = DefaultRedisTimeout
	}
	if o.RedisRetryBytes == 0 {
		o.RedisRetryBytes = DefaultRedisRetryBytes
	}
	if o.RedisRetryFor == 0 || o.RedisRetryFor > DefaultRedisRetryFor {
		o.RedisRetryFor = DefaultRedisRetryFor
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m, err := newMetrics(o.Registerer, o.File != "", o.Redis != nil)
	if err != nil {
		return nil, fmt.Errorf("ledger: metrics: %w", err)
	}
	w := &Writer{
		ch:       make(chan Record, o.Buffer),
		flushReq: make(chan chan error),
		dropSig:  make(chan struct{}, 1),
		m:        m,
		log:      o.Logger,
		hook:     o.beforeBatch,
		done:     make(chan struct{}),
		stopLog:  make(chan struct{}),
		logDone:  make(chan struct{}),
	}
	if o.File != "" {
		if w.file, err = openFileSink(o, m); err != nil {
			return nil, err
		}
	}
	if o.Redis != nil {
		w.redis = startRedisSink(o, m)
	}
	go w.run()
	go w.reportDrops()
	return w, nil
}

// Write queues r and reports whether it was queued. It never blocks: when the
// buffer is full, or the Writer is closed, r is dropped, counted
// (llmguard_ledger_dropped_total, Dropped) and reported in a log line at
// most every 10 s. A zero r.TS is set to the current time. It allocates
// nothing.
func (w *Writer) Write(r Record) bool {
	if r.TS.IsZero() {
		r.TS = time.Now()
	}
	w.mu.RLock()
	if !w.closed {
		select {
		case w.ch <- r:
			w.mu.RUnlock()
			return true
		default:
		}
	}
	w.mu.RUnlock()
	w.dropped.Add(1)
	w.m.dropped.Inc()
	select {
	case w.dropSig <- struct{}{}:
	default:
	}
	return false
}

// Dropped returns how many records Write has dropped since New.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Flush waits until every record queued before the call has been written to
// the file (and flushed to the OS) and handed to the Redis sink, which has
// then sent one pipeline of its oldest records: in normal running that adds
// them all; after an outage, the rest are kept and sent again
// (llmguard_ledger_pending), so a Flush never waits for a backlog to drain.
// Sink errors are counted, not returned.
//
// Errors: ErrClosed after Close; ctx's error when it ends first (the records
// are still written later).
func (w *Writer) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case w.flushReq <- reply:
	case <-w.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("ledger: flush: %w", ctx.Err())
	}
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ledger: flush: %w", ctx.Err())
	}
}

// Close stops Write from queuing (later Writes drop), writes and flushes
// every queued record, waits for Redis (at most about one RedisTimeout when
// Redis is down) and closes the file. Calling it again returns the first
// call's result.
//
// Errors: the last file write or close error, if any.
func (w *Writer) Close() error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		close(w.ch)
		w.mu.Unlock()
		<-w.done
		close(w.stopLog)
		<-w.logDone
	})
	return w.err
}

// run is the writing goroutine: it takes a batch of whatever is queued (up
// to maxBatch records), writes it, flushes the file, hands the batch to
// Redis, and so on until ch is closed and empty.
func (w *Writer) run() {
	defer close(w.done)
	b := &batcher{w: w}
	b.enc = json.NewEncoder(&b.buf)
	b.enc.SetEscapeHTML(false)
	for {
		if w.hook != nil {
			w.hook()
		}
		select {
		case r, ok := <-w.ch:
			if !ok {
				w.err = b.finish()
				return
			}
			b.add(r)
			b.drain()
			b.end(nil)
		case reply := <-w.flushReq:
			// Every record queued before the Flush call is in ch now,
			// ahead of any queued after it: write exactly those, in
			// batches, then answer. drain's bounds (maxBatch, flushEvery)
			// would answer with some still queued, and waiting for an
			// empty ch could wait forever under load.
			for n := len(w.ch); n > 0; {
				took := b.take(n)
				if took == 0 {
					break // ch closed: Close writes the rest
				}
				if n -= took; n > 0 {
					b.end(nil)
				}
			}
			b.end(reply)
		}
	}
}

// batcher holds the writing goroutine's state.
type batcher struct {
	w       *Writer
	buf     bytes.Buffer // encoded lines of the batch
	enc     *json.Encoder
	ends    []int // end offset of each line in buf
	start   time.Time
	lastErr error     // last file error
	errLog  time.Time // when a file error was last logged
}

// add encodes r into the batch and queues it on the file sink.
func (b *batcher) add(r Record) {
	if len(b.ends) == 0 {
		b.start = time.Now()
	}
	r.TS = r.TS.UTC()
	from := b.buf.Len()
	if err := b.enc.Encode(&r); err != nil {
		// A Record always encodes; guard anyway rather than write half a line.
		b.buf.Truncate(from)
		b.fileError(fmt.Errorf("ledger: encode record %q: %w", r.RequestID, err))
		return
	}
	b.ends = append(b.ends, b.buf.Len())
	if f := b.w.file; f != nil {
		if err := f.add(b.buf.Bytes()[from:]); err != nil {
			b.fileError(err)
		}
	}
}

// take adds at most n queued records without waiting, and no more than
// the batch has room for (maxBatch), and returns how many it added.
func (b *batcher) take(n int) int {
	took := 0
	for took < n && len(b.ends) < maxBatch {
		select {
		case r, ok := <-b.w.ch:
			if !ok {
				return took
			}
			b.add(r)
			took++
		default:
			return took
		}
	}
	return took
}

// drain adds every queued record without waiting, up to maxBatch records or
// flushEvery since the batch started.
func (b *batcher) drain() {
	for len(b.ends) < maxBatch {
		select {
		case r, ok := <-b.w.ch:
			if !ok {
				return
			}
			b.add(r)
			if len(b.ends)%64 == 0 && time.Since(b.start) >= flushEvery {
				return
			}
		default:
			return
		}
	}
}

// end flushes the file, hands the batch to Redis and resets it. With a
// reply channel it also waits for Redis to have handled the batch (and
// everything before it), then answers.
func (b *batcher) end(reply chan error) {
	if f := b.w.file; f != nil {
		if err := f.flush(); err != nil {
			b.fileError(err)
		}
	}
	if s := b.w.redis; s != nil {
		if len(b.ends) > 0 {
			data := bytes.Clone(b.buf.Bytes())
			s.send(redisBatch{data: data, ends: b.ends}) // send keeps no reference to ends
		}
		if reply != nil {
			s.wait()
		}
	}
	b.buf.Reset()
	b.ends = b.ends[:0]
	if reply != nil {
		reply <- nil
	}
}

// finish writes what is left and closes the sinks.
func (b *batcher) finish() error {
	b.end(nil)
	if s := b.w.redis; s != nil {
		s.close()
	}
	if f := b.w.file; f != nil {
		if err := f.close(); err != nil {
			b.fileError(err)
		}
	}
	return b.lastErr
}

// fileError remembers err and logs it, at most once every dropLogEvery.
func (b *batcher) fileError(err error) {
	b.lastErr = err
	now := time.Now()
	b.w.m.tally.failed(sinkFile, err, now)
	if now.Sub(b.errLog) >= dropLogEvery {
		b.errLog = now
		b.w.log.Error("ledger: file sink", "err", err)
	}
}

// reportDrops logs drops: at once after the first, then at most every
// dropLogEvery with the count since the last line.
func (w *Writer) reportDrops() {
	defer close(w.logDone)
	var logged uint64
	for {
		select {
		case <-w.dropSig:
		case <-w.stopLog:
			if d := w.dropped.Load(); d > logged {
				w.log.Warn("ledger: records dropped", "dropped", d-logged, "dropped_total", d)
			}
			return
		}
		d := w.dropped.Load()
		w.log.Warn("ledger: buffer full or writer closed, records dropped", "dropped", d-logged, "dropped_total", d)
		logged = d
		t := time.NewTimer(dropLogEvery)
		select {
		case <-t.C:
		case <-w.stopLog:
			t.Stop()
			if d := w.dropped.Load(); d > logged {
				w.log.Warn("ledger: records dropped", "dropped", d-logged, "dropped_total", d)
			}
			return
		}
	}
}
