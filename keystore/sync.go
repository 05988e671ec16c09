package keystore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SyncOptions configures a Syncer.
type SyncOptions struct {
	// Client is the store's Redis; Registry reads it.
	Client   redis.UniversalClient
	Registry *Registry
	// Cache receives the records.
	Cache *Cache
	// Resync is the period of the whole reads. Zero: 30s.
	Resync time.Duration
	// Timeout bounds one whole read of the registry. Zero: 10s.
	Timeout time.Duration
	// PingEvery is how long the subscription may stay silent before it is
	// pinged; a ping unanswered for as long again drops the connection and
	// subscribes anew. Zero: 5s.
	PingEvery time.Duration
	// OnError runs after a failed subscription call (a cluster client
	// reloads its slot map there, to follow a failover). nil: nothing.
	OnError func()
	// Logger receives the syncer's warnings; nil: slog.Default().
	Logger *slog.Logger
	// Metrics counts reads and notifications; nil: none.
	Metrics *Metrics
}

// Syncer keeps a Cache equal to the registry: it applies every record
// published on Channel, and reads the whole registry when its subscription
// is confirmed (at start and after every reconnection, so changes made
// while it was cut off are read) and every Resync. While Redis is down the
// Cache keeps what it had. Build it with StartSyncer; stop it with Close.
// Safe for concurrent use.
type Syncer struct {
	o       SyncOptions
	log     *slog.Logger
	trigger chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup

	mu sync.Mutex
	ps *redis.PubSub // the current subscription, closed by Close
}

// StartSyncer starts o's subscription and periodic reads in their own
// goroutines; the first whole read follows the subscription's
// confirmation. Use Resync first to load the cache before serving.
func StartSyncer(o SyncOptions) *Syncer {
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.PingEvery <= 0 {
		o.PingEvery = 5 * time.Second
	}
	s := &Syncer{o: o, log: o.Logger, trigger: make(chan struct{}, 1), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.wg.Add(2)
	go s.subscribe()
	go s.resyncLoop()
	return s
}

// Resync reads the whole registry now into the cache. Errors: the store's;
// the cache is then unchanged.
func (s *Syncer) Resync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	since := s.o.Cache.Mark() // before the read: what was applied until now, the read shows
	snap, err := s.o.Registry.List(ctx)
	if err != nil {
		s.o.Metrics.resynced(false, time.Time{})
		return err
	}
	snap.Since = since
	changed, removed := s.o.Cache.Replace(snap)
	s.o.Metrics.resynced(true, time.Now())
	if snap.Bad > 0 || snap.Truncated {
		s.log.Warn("key store: some registry records were not read", "unreadable", snap.Bad, "over_max_keys", snap.Truncated)
	}
	if changed > 0 || removed > 0 {
		s.log.Info("key store: resync changed keys", "changed", changed, "removed", removed, "keys", len(snap.Records))
	}
	return nil
}

// Close stops the syncer and waits for its goroutines; the cache keeps
// what it holds.
func (s *Syncer) Close() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	close(s.done)
	s.mu.Lock()
	if s.ps != nil {
		s.ps.Close() // ends a blocked receive
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// requestResync asks the resync loop for a whole read soon; requests made
// while one is pending are one.
func (s *Syncer) requestResync() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// resyncLoop reads the whole registry every Resync and when asked; a read
// that fails is tried again after 1 s, then 2 s, 4 s… up to Resync, so
// that the read a reconnection asked for is not put off to the next period
// by a store still coming back.
func (s *Syncer) resyncLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.o.Resync)
	defer t.Stop()
	var retry <-chan time.Time
	wait := minRetry
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		case <-s.trigger:
		case <-retry:
		}
		retry = nil
		if err := s.Resync(context.Background()); err != nil {
			s.log.Warn("key store: resync failed; serving the keys known so far", "err", err, "retry_in", wait)
			retry = time.After(wait)
			wait = min(2*wait, s.o.Resync)
			continue
		}
		wait = minRetry
	}
}

// minRetry is the first wait before a failed whole read is tried again.
const minRetry = time.Second

// Subscription back-off bounds after a failed receive.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// subscribe receives notifications until Close, subscribing anew after a
// silent connection; go-redis reconnects (and resubscribes) after an
// error by itself, and every confirmation asks for a whole read.
func (s *Syncer) subscribe() {
	defer s.wg.Done()
	ctx := context.Background()
	backoff := minBackoff
	for {
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			return
		default:
		}
		ps := s.o.Client.Subscribe(ctx, Channel)
		s.ps = ps
		s.mu.Unlock()
		pinged := false
		for {
			msg, err := ps.ReceiveTimeout(ctx, s.o.PingEvery)
			select {
			case <-s.done:
				ps.Close()
				return
			default:
			}
			if err != nil {
				if isTimeout(err) && !pinged {
					pinged = true
					if ps.Ping(ctx) == nil {
						continue
					}
				}
				s.o.Metrics.setSubscribed(false)
				if s.o.OnError != nil {
					s.o.OnError()
				}
				if !s.sleep(backoff) {
					ps.Close()
					return
				}
				backoff = min(2*backoff, maxBackoff)
				if isTimeout(err) {
					break // pinged, no answer: a new subscription
				}
				continue
			}
			backoff, pinged = minBackoff, false
			switch m := msg.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					s.o.Metrics.setSubscribed(true)
					s.requestResync() // what changed while not subscribed
				}
			case *redis.Message:
				s.apply(m.Payload)
			}
		}
		ps.Close()
	}
}

// apply takes one notification's record.
func (s *Syncer) apply(payload string) {
	rec, err := ParseRecord([]byte(payload))
	if err != nil {
		s.o.Metrics.notified("invalid")
		s.log.Warn("key store: unreadable notification ignored", "err", err)
		return
	}
	if s.o.Cache.Apply(rec) {
		s.o.Metrics.notified("applied")
	} else {
		s.o.Metrics.notified("stale")
	}
}

// sleep waits d, or less when Close is called (then false).
func (s *Syncer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
		return false
	case <-t.C:
		return true
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
