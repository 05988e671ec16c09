package ledger

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// streamField is the one field of each stream entry: the record's JSON.
const streamField = "r"

// redisBatch is a batch of encoded lines (each ending in '\n') for Redis, or,
// with done set, a marker answered once every batch before it is handled.
type redisBatch struct {
	data []byte
	ends []int // end offset of each line in data
	done chan struct{}
}

// redisSink adds batches to a stream from a goroutine of its own, so that a
// slow or dead Redis never holds up the file. Its queue is bounded: a batch
// that does not fit is dropped and counted. After a failed batch it drops
// (and counts) batches for redisBackoff instead of waiting for Redis again.
type redisSink struct {
	client  redis.UniversalClient
	stream  string
	maxLen  int64
	timeout time.Duration
	ch      chan redisBatch
	done    chan struct{}
	m       *metrics
	log     *slog.Logger
}

func startRedisSink(o Options, m *metrics) *redisSink {
	s := &redisSink{
		client:  o.Redis,
		stream:  o.Stream,
		maxLen:  o.MaxLen,
		timeout: o.RedisTimeout,
		ch:      make(chan redisBatch, redisQueue),
		done:    make(chan struct{}),
		m:       m,
		log:     o.Logger,
	}
	go s.run()
	return s
}

// send queues b without blocking; a full queue drops b, counted as errors.
func (s *redisSink) send(b redisBatch) {
	select {
	case s.ch <- b:
	default:
		s.m.redisErrors.Add(float64(len(b.ends)))
	}
}

// wait returns once every batch sent before it has been handled.
func (s *redisSink) wait() {
	done := make(chan struct{})
	s.ch <- redisBatch{done: done}
	<-done
}

// close handles the queued batches and stops the goroutine.
func (s *redisSink) close() {
	close(s.ch)
	<-s.done
}

func (s *redisSink) run() {
	defer close(s.done)
	var failedAt, loggedAt time.Time
	for b := range s.ch {
		if b.done != nil {
			close(b.done)
			continue
		}
		if !failedAt.IsZero() && time.Since(failedAt) < redisBackoff {
			s.m.redisErrors.Add(float64(len(b.ends)))
			continue
		}
		added, err := s.add(b)
		s.m.redisRecords.Add(float64(added))
		if failed := len(b.ends) - added; failed > 0 {
			s.m.redisErrors.Add(float64(failed))
		}
		if err == nil {
			failedAt = time.Time{}
			continue
		}
		failedAt = time.Now()
		if failedAt.Sub(loggedAt) >= dropLogEvery {
			loggedAt = failedAt
			s.log.Error("ledger: redis sink: records not added to the stream (the file has them)",
				"stream", s.stream, "records", len(b.ends)-added, "err", err)
		}
	}
}

// add sends b as one pipeline of XADDs and returns how many were added.
//
// Errors: the first XADD's or the pipeline's error.
func (s *redisSink) add(b redisBatch) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	from := 0
	for _, end := range b.ends {
		pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: s.stream,
			MaxLen: s.maxLen,
			Approx: s.maxLen > 0,
			Values: []any{streamField, b.data[from : end-1]}, // without '\n'
		})
		from = end
	}
	cmds, err := pipe.Exec(ctx)
	added := 0
	for _, c := range cmds {
		if c.Err() == nil {
			added++
		}
	}
	return added, err
}
