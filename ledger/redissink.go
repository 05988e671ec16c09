package ledger

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// streamField is the one field of each stream entry: the record's JSON.
const streamField = "r"

// redisBatch is a batch of encoded lines (each ending in '\n') for Redis.
type redisBatch struct {
	data []byte
	ends []int // end offset of each line in data
}

// pendingLine is a record the stream has not taken yet: its JSON line
// (without the newline; a slice of its batch's buffer) and when it was
// written.
type pendingLine struct {
	line []byte
	at   time.Time
}

// redisSink adds batches to a stream from a goroutine of its own, so that a
// slow or dead Redis never holds up the file: send puts a batch's lines in
// an inbox and returns at once.
//
// Records Redis did not take (a failed or timed-out pipeline, a failed XADD)
// are kept, oldest first, and sent again every redisBackoff and before any
// newer record, so the stream gets them in the order they were written and
// an outage within the bounds loses nothing: at most retryBytes of lines
// kept for a retry, and as much again arriving while a send is in flight
// (past that, the oldest of those arriving are given up), and none older
// than retryFor. Past either bound the oldest are given up,
// counted in llmguard_ledger_errors_total{sink="redis"} and logged. A
// pipeline that timed out may have been applied before its answer was
// lost: its records are then added twice, and ScanStream reads such an
// identical copy once.
type redisSink struct {
	client     redis.UniversalClient
	stream     string
	maxLen     int64
	timeout    time.Duration
	retryBytes int64
	retryFor   time.Duration
	hasFile    bool
	now        func() time.Time
	wake       chan struct{} // capacity 1: the inbox changed
	done       chan struct{}
	m          *metrics
	log        *slog.Logger

	mu         sync.Mutex // guards the inbox
	inbox      []pendingLine
	inboxBytes int64
	inboxLost  int             // lines send gave up past retryBytes
	waiters    []chan struct{} // answered once the inbox before them is handled
	closing    bool

	// The goroutine's own state.
	pending      []pendingLine // oldest first
	pendingBytes int64
	failedAt     time.Time // the last failed send; zero after a success
	loggedAt     time.Time // the last log line about a failed send
	// downSince is the first failed send since the last that succeeded
	// (zero while sends succeed); downLogged, that a line about a failed
	// send was written since then, so that the run's end is logged too
	// (trial3: a Redis restart logged the records "not added to the
	// stream yet" and never that they were).
	downSince  time.Time
	downLogged bool
	lostAt     time.Time // the last log line about records given up
}

func startRedisSink(o Options, m *metrics) *redisSink {
	s := &redisSink{
		client:     o.Redis,
		stream:     o.Stream,
		maxLen:     o.MaxLen,
		timeout:    o.RedisTimeout,
		retryBytes: o.RedisRetryBytes,
		retryFor:   o.RedisRetryFor,
		hasFile:    o.File != "",
		now:        o.now,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		m:          m,
		log:        o.Logger,
	}
	if s.now == nil {
		s.now = time.Now
	}
	go s.run()
	return s
}

// signal wakes the goroutine without blocking.
func (s *redisSink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// send puts b's lines into the inbox without waiting for Redis; b.data
// becomes the sink's (the lines are slices of it). Past retryBytes the inbox
// gives up its oldest lines (counted by the goroutine).
func (s *redisSink) send(b redisBatch) {
	now := s.now()
	s.mu.Lock()
	from := 0
	for _, end := range b.ends {
		line := b.data[from : end-1 : end-1] // without '\n'
		s.inbox = append(s.inbox, pendingLine{line: line, at: now})
		s.inboxBytes += int64(len(line))
		from = end
	}
	n := 0
	for n < len(s.inbox)-1 && s.inboxBytes > s.retryBytes {
		s.inboxBytes -= int64(len(s.inbox[n].line))
		n++
	}
	if n > 0 {
		clear(s.inbox[:n])
		s.inbox = s.inbox[n:]
		s.inboxLost += n
	}
	s.m.redisPendingAdd(len(b.ends)) // the lines given up here leave it in giveUp
	s.mu.Unlock()
	s.signal()
}

// wait returns once every batch sent before it has been handled (added, or
// kept for a retry).
func (s *redisSink) wait() {
	done := make(chan struct{})
	s.mu.Lock()
	s.waiters = append(s.waiters, done)
	s.mu.Unlock()
	s.signal()
	<-done
}

// close handles the inbox, tries the kept records once more and stops the
// goroutine; what Redis still does not take is given up (counted and
// logged).
func (s *redisSink) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.signal()
	<-s.done
}

// run is the sink's goroutine. Each turn it takes the inbox, sends one
// pipeline of the oldest pending lines (unless a failure is under
// redisBackoff), and answers the waiters: a Flush waits for one pipeline at
// most, not for a backlog after an outage to drain. It waits only when
// nothing can be sent now.
func (s *redisSink) run() {
	defer close(s.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		backoff := s.backoffLeft()
		switch {
		case len(s.pending) == 0:
			<-s.wake
		case backoff > 0:
			retry.Reset(backoff)
			select {
			case <-s.wake:
			case <-retry.C:
			}
			retry.Stop()
		default:
			select { // a backlog to send: look at the inbox without waiting
			case <-s.wake:
			default:
			}
		}
		s.mu.Lock()
		in, lost, waiters, closing := s.inbox, s.inboxLost, s.waiters, s.closing
		s.inbox, s.inboxBytes, s.inboxLost, s.waiters = nil, 0, 0, nil
		s.mu.Unlock()
		s.giveUp(lost, "past the retry bounds")
		s.keep(in)
		if closing {
			// One last try of every pipeline, whatever the backoff, until
			// one fails.
			s.failedAt = time.Time{}
			for len(s.pending) > 0 && s.failedAt.IsZero() {
				s.sendOne()
			}
			for _, w := range waiters {
				close(w)
			}
			s.giveUp(len(s.pending), "the ledger closed")
			s.pending, s.pendingBytes = nil, 0
			return
		}
		if s.backoffLeft() == 0 {
			s.sendOne()
		}
		for _, w := range waiters {
			close(w)
		}
	}
}

// backoffLeft is how long sends still wait after the last failure (0: none
// is under way).
func (s *redisSink) backoffLeft() time.Duration {
	if s.failedAt.IsZero() {
		return 0
	}
	return max(0, redisBackoff-s.now().Sub(s.failedAt))
}

// keep appends lines to pending, then gives up the oldest past the bounds.
func (s *redisSink) keep(lines []pendingLine) {
	for _, p := range lines {
		s.pendingBytes += int64(len(p.line))
	}
	s.pending = append(s.pending, lines...)
	s.trim(s.now())
}

// trim gives up the oldest pending lines while they hold more than
// retryBytes or are older than retryFor.
func (s *redisSink) trim(now time.Time) {
	n := 0
	for n < len(s.pending) && (s.pendingBytes > s.retryBytes || now.Sub(s.pending[n].at) > s.retryFor) {
		s.pendingBytes -= int64(len(s.pending[n].line))
		n++
	}
	if n > 0 {
		s.drop(n)
		s.giveUp(n, "past the retry bounds")
	}
}

// drop removes the n oldest pending lines.
func (s *redisSink) drop(n int) {
	clear(s.pending[:n])
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending, s.pendingBytes = nil, 0
	}
}

// giveUp counts and logs n records lost to the stream.
func (s *redisSink) giveUp(n int, why string) {
	if n == 0 {
		return
	}
	s.m.redisLost(n)
	s.m.redisPendingAdd(-n)
	s.logEvery(&s.lostAt, "ledger: redis sink: records given up, never added to the stream ("+why+")"+s.fileNote(true), n, nil)
}

// fileNote says where records the stream does not have are: lost says
// whether they were given up.
func (s *redisSink) fileNote(lost bool) string {
	switch {
	case s.hasFile:
		return "; the ledger file has them"
	case lost:
		return "; no ledger file is configured, so they are lost"
	}
	return "; no ledger file is configured: until then they are only in this process's memory"
}

// sendOne sends the oldest pending lines, at most maxBatch, in one
// pipeline: those Redis took leave pending, the rest stay in order, and a
// failure starts redisBackoff. Past the bounds, the oldest are given up.
func (s *redisSink) sendOne() {
	if len(s.pending) > 0 {
		part := s.pending[:min(len(s.pending), maxBatch)]
		ok, err := s.add(part)
		// The lines Redis did not take move, in order, to the tail of
		// part, just before the rest; the others are dropped from the
		// front (no copy of the backlog behind part).
		first := len(part) // the index of the first line kept
		for i := len(part) - 1; i >= 0; i-- {
			if ok[i] {
				s.pendingBytes -= int64(len(part[i].line))
				s.m.redisRecords.Inc()
				s.m.redisPendingAdd(-1)
				continue
			}
			first--
			part[first] = part[i]
		}
		s.drop(first)
		if err != nil {
			s.failedAt = s.now()
			if s.downSince.IsZero() {
				s.downSince = s.failedAt
			}
			s.m.tally.failed(sinkRedis, err, s.failedAt)
			if s.logEvery(&s.loggedAt, "ledger: redis sink: records not added to the stream yet; kept in memory and sent again (within the retry bounds)"+s.fileNote(false), len(s.pending), err) {
				s.downLogged = true
			}
		} else {
			s.failedAt = time.Time{}
			s.m.tally.ok(sinkRedis)
			if s.downLogged {
				s.log.Info("ledger: redis sink: the stream takes records again", "stream", s.stream,
					"failing_for", s.now().Sub(s.downSince).Round(time.Millisecond), "still_pending", len(s.pending))
			}
			s.downSince, s.downLogged = time.Time{}, false
		}
	}
	s.trim(s.now())
}

// logEvery logs msg unless *last is less than dropLogEvery ago, and
// reports whether it did.
func (s *redisSink) logEvery(last *time.Time, msg string, records int, err error) bool {
	now := s.now()
	if !last.IsZero() && now.Sub(*last) < dropLogEvery {
		return false
	}
	*last = now
	args := []any{"stream", s.stream, "records", records}
	if err != nil {
		args = append(args, "err", err)
	}
	s.log.Error(msg, args...)
	return true
}

// add sends lines as one pipeline of XADDs and reports which were added
// (ok[i]).
//
// Errors: the pipeline's error, or the first failed XADD's.
func (s *redisSink) add(lines []pendingLine) (ok []bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	for _, p := range lines {
		pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: s.stream,
			MaxLen: s.maxLen,
			Approx: s.maxLen > 0,
			Values: []any{streamField, p.line},
		})
	}
	cmds, err := pipe.Exec(ctx)
	ok = make([]bool, len(lines))
	for i, c := range cmds {
		if i < len(ok) && c.Err() == nil {
			ok[i] = true
		} else if err == nil {
			err = c.Err()
		}
	}
	return ok, err
}
