package bucket

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/logbuf"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestRetryLoadsOnce checks that the calls a Redis that lost the library
// fails all at once (every one sent before any load) load it once between
// them, not once each: a load compiles the whole library inside Redis,
// blocking it meanwhile.
func TestRetryLoadsOnce(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client()
	ctx := context.Background()
	var logged syncBuffer
	r, err := NewRedis(RedisOptions{Client: srv.Client(), Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	loads := func() int {
		info, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_function|load:calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
				return n
			}
		}
		return 0
	}
	missing := replyError("ERR Function not found")
	seen := r.fns.loads.Load() // what each of the failed calls saw when it was sent
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.retryable(ctx, missing, seen) {
				t.Error("a missing function is not retried")
			}
		}()
	}
	wg.Wait()
	if n := loads(); n != 1 {
		t.Errorf("%d FUNCTION LOAD for 16 calls that missed the library together; want 1", n)
	}
	if r.retryable(ctx, replyError("ERR other"), seen) {
		t.Error("another error is retried")
	}
	// The operator hears of the reload once, not once per call.
	if got := strings.Count(logged.String(), "loaded it again"); got != 1 {
		t.Errorf("%d log lines of the reload; want 1:\n%s", got, logged.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, for a logger.
type syncBuffer = logbuf.Buffer

// replyError is an error reply of Redis, as go-redis reads one (a
// redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

// TestLoadWaitEndsWithContext checks that a call which missed the library
// while another call is loading it stops waiting when its own context
// ends, and is not retried (its error stands), rather than waiting out the
// other call's load.
func TestLoadWaitEndsWithContext(t *testing.T) {
	srv := redistest.Shared(t)
	r, err := NewRedis(RedisOptions{Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.fns.lock(context.Background()) { // another call is loading
		t.Fatal("the free load slot was not taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- r.retryable(ctx, replyError("ERR Function not found"), r.fns.loads.Load()) }()
	cancel()
	// A hang detector, not a speed bound: the call must end once its
	// context has, whatever the other load does.
	select {
	case retried := <-done:
		if retried {
			t.Error("a call whose context ended waiting for the load is retried")
		}
	case <-time.After(time.Minute):
		t.Fatal("a call waits for another call's load past the end of its own context")
	}
	r.fns.unlock()
	// Once the slot is free, a call with a live context loads and retries.
	if !r.retryable(context.Background(), replyError("ERR Function not found"), r.fns.loads.Load()) {
		t.Error("a missing function is not retried once the load slot is free")
	}
}
