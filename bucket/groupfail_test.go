package bucket_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
)

// groupFailClient runs scripts on a real server, but fails every call for
// keys of the tag "{b}" and holds the second call for keys of "{a}" (the
// refund of the first group's take) until release is closed or its
// context ends. No FCall: the store calls scripts by EVALSHA.
type groupFailClient struct {
	bucket.RedisScripter
	aCalls  atomic.Int32
	release chan struct{}
	held    atomic.Bool // the refund call returned
}

func (c *groupFailClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if len(keys) > 0 && strings.Contains(keys[0], "{b}") {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errors.New("injected: the second slot group's master is down"))
		return cmd
	}
	if len(keys) > 0 && strings.Contains(keys[0], "{a}") && c.aCalls.Add(1) == 2 {
		defer c.held.Store(true)
		select {
		case <-c.release:
		case <-ctx.Done():
		}
	}
	return c.RedisScripter.EvalSha(ctx, sha, keys, args...)
}

// A take over two slot groups whose second group fails returns its error
// without waiting for the first group's refund, which goes on in the
// background (at most 100 ms) and still lands. Before, the request waited
// for the refund, up to 100 ms past store.timeout, which the README says
// a request never does (adv24, read in takeGroups).
func TestFailedGroupRefundDoesNotHoldTheRequest(t *testing.T) {
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	now := time.Unix(1_700_000_000, 0)
	client := &groupFailClient{RedisScripter: rc, release: make(chan struct{})}
	r := newRedis(t, bucket.RedisOptions{Client: client, Cluster: true, TakeBatch: 1, Now: func() time.Time { return now }})
	lim := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Second}
	items := []bucket.Item{{Key: "llmguard:{a}:x", Limit: lim, Cost: 10}, {Key: "llmguard:{b}:y", Limit: lim, Cost: 10}}
	_, err := r.Take(context.Background(), "", items)
	if err == nil {
		t.Fatal("the take succeeded though its second group failed")
	}
	if client.held.Load() {
		t.Fatal("Take returned only after the first group's refund call did: the request waited for it")
	}
	close(client.release)
	// The refund lands: group {a}'s bucket is full again (the clock is
	// fixed: no refill), so a take of its whole capacity is allowed.
	for deadline := time.Now().Add(5 * time.Second); !client.held.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the refund never ran")
		}
	}
	d, err := r.Take(context.Background(), "", []bucket.Item{{Key: "llmguard:{a}:x", Limit: lim, Cost: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		t.Errorf("group {a} was not refunded: a take of its capacity was denied (%+v)", d.Buckets)
	}
}
