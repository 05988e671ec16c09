package bucket_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/lua"
)

// scriptsOnly is a client that can run scripts and pipelines but has no
// FCALL or FUNCTION LOAD (a wrapper such as a test's fault injector): the
// store runs its scripts by EVALSHA.
type scriptsOnly struct {
	redis.Scripter
	pipe func() redis.Pipeliner
}

func (s scriptsOnly) Pipeline() redis.Pipeliner { return s.pipe() }

// commandCount is how many times admin's server ran cmd (lower case, as
// INFO commandstats names it).
func commandCount(t *testing.T, admin *redis.Client, cmd string) int {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
			if err != nil {
				t.Fatalf("commandstats line %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// libraryLoaded reports whether c's server holds lua.Library.
func libraryLoaded(t *testing.T, c *redis.Client) bool {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: lua.LibraryName}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(libs) == 1 && libs[0].Name == lua.LibraryName
}

// TestRedisFunctions checks, on a real redis-server, that the store loads
// its scripts as one Redis Functions library and calls them by FCALL (no
// EVALSHA, no EVAL); that a server that lost the library (FUNCTION FLUSH,
// as after a restart without persistence) has it loaded again by the first
// take, batch or reconciliation that misses it, each still applied once;
// that a library of another llmguard version loaded beside it replaces
// none of its functions (a rolling upgrade); and that a client without
// FCALL is served by EVALSHA.
func TestRedisFunctions(t *testing.T) {
	srv := redistest.Shared(t)
	admin := srv.Client()
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { client.Close() })
	r := newRedis(t, bucket.RedisOptions{Client: client, TakeBatch: 1})
	if !libraryLoaded(t, admin) {
		t.Fatalf("after Load: library %s not on the server", lua.LibraryName)
	}
	count := func(cmd string) int { return commandCount(t, admin, cmd) }
	// One unit a day: no refill between steps on redis-server's real clock,
	// however slow a loaded machine makes them (one a 600 ms refilled a
	// unit under load: 46 left where 45 were expected).
	limit := bucket.Limit{Capacity: 100, Rate: 1, Per: 24 * time.Hour}
	items := []bucket.Item{{Key: "llmguard:{t}:a", Limit: limit, Cost: 10}, {Key: "llmguard:{t}:b", Limit: limit, Cost: 1}}
	take := func(step, id string, remaining int64) {
		t.Helper()
		d, err := r.Take(ctx, id, items)
		if err != nil || !d.Allowed || d.Buckets[0].Remaining != remaining {
			t.Fatalf("%s: take %s: %+v, %v; want allowed, %d left", step, id, d, err, remaining)
		}
	}
	take("step 1 (loaded)", "r1", 90)
	if f, s, e := count("fcall"), count("evalsha"), count("eval"); f != 1 || s != 0 || e != 0 {
		t.Errorf("step 1: %d FCALL, %d EVALSHA, %d EVAL; want 1, 0, 0", f, s, e)
	}

	// Another version's library (another hash) loads beside this one.
	other := strings.ReplaceAll(lua.Library, lua.Version, "000000000000")
	if err := admin.FunctionLoad(ctx, other).Err(); err != nil {
		t.Fatalf("step 2 (another version): %v", err)
	}
	take("step 2 (another version loaded)", "r2", 80)
	if !libraryLoaded(t, admin) {
		t.Fatal("step 2: this version's library was replaced")
	}

	// Lost: the first call of each kind loads it again and applies once.
	if err := admin.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	take("step 3 (flushed: take)", "r3", 70)
	if !libraryLoaded(t, admin) {
		t.Fatal("step 3: the take did not load the library again")
	}
	if err := admin.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(ctx, "r3", []bucket.Delta{{Key: items[0].Key, Limit: limit, Units: 5}}); err != nil {
		t.Fatalf("step 4 (flushed: reconcile): %v", err)
	}
	if err := r.Reconcile(ctx, "r3", []bucket.Delta{{Key: items[0].Key, Limit: limit, Units: 5}}); err != nil {
		t.Fatalf("step 4 (retry): %v", err)
	}
	take("step 4 (reconciled once: 70 - 5 - 10)", "r4", 55)

	// A client without FCALL runs the same scripts by EVALSHA, on the same
	// state.
	plain := newRedis(t, bucket.RedisOptions{Client: scriptsOnly{Scripter: client, pipe: client.Pipeline}})
	sha0 := count("evalsha")
	d, err := plain.Take(ctx, "r5", items)
	if err != nil || !d.Allowed || d.Buckets[0].Remaining != 45 {
		t.Fatalf("step 5 (EVALSHA): %+v, %v; want allowed, 45 left", d, err)
	}
	if n := count("evalsha"); n != sha0+1 {
		t.Errorf("step 5: %d EVALSHA; want 1", n-sha0)
	}
}

// TestRedisFunctionsCluster checks that the library is loaded on every
// master of a cluster and loaded again on a master that lost it, by a
// pipelined batch (one script per slot).
func TestRedisFunctionsCluster(t *testing.T) {
	cl := redistest.SharedCluster(t, 3)
	client := cl.Client()
	ctx := context.Background()
	r := newRedis(t, bucket.RedisOptions{Client: client})
	masters := mastersOf(t, client)
	for _, m := range masters {
		if !libraryLoaded(t, m) {
			t.Errorf("master %s: no library after Load", m.Options().Addr)
		}
		if err := m.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	limit := bucket.Limit{Capacity: 100, Rate: 100, Per: time.Minute}
	var batch []bucket.Reconciliation
	tenants := []string{"a", "b", "c", "d", "e", "f"}
	for _, tn := range tenants {
		batch = append(batch, bucket.Reconciliation{RequestID: "r-" + tn, Deltas: []bucket.Delta{{Key: "llmguard:{" + tn + "}:k", Limit: limit, Units: 7}}})
	}
	for i, err := range r.ReconcileBatch(ctx, batch) {
		if err != nil {
			t.Fatalf("element %d after FUNCTION FLUSH: %v", i, err)
		}
	}
	for i, err := range r.ReconcileBatch(ctx, batch) { // a retry applies nothing more
		if err != nil {
			t.Fatalf("retry of element %d: %v", i, err)
		}
	}
	for _, tn := range tenants {
		d, err := r.Take(ctx, "", []bucket.Item{{Key: "llmguard:{" + tn + "}:k", Limit: limit}})
		if err != nil || d.Buckets[0].Remaining != 93 {
			t.Errorf("tenant %s: %+v, %v; want 93 left (the delta of 7 applied once)", tn, d, err)
		}
	}
	loaded := 0
	for _, m := range masters {
		if libraryLoaded(t, m) {
			loaded++
		}
	}
	if loaded != len(masters) {
		t.Errorf("%d of %d masters hold the library again; want every one (the reload loads it on every master)", loaded, len(masters))
	}
}

// mastersOf returns a client of each master of c's cluster.
func mastersOf(t *testing.T, c *redis.ClusterClient) []*redis.Client {
	t.Helper()
	var mu sync.Mutex
	var out []*redis.Client
	err := c.ForEachMaster(context.Background(), func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRedisFunctionsRefusedByACL checks that a client whose ACL user may
// run scripts but not functions (FCALL and FUNCTION refused with NOPERM) is
// served by EVALSHA: Load and every call succeed.
func TestRedisFunctionsRefusedByACL(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "scripts", "on", ">pw", "+@all", "-fcall", "-function", "~*").Err(); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "scripts", Password: "pw"})
	t.Cleanup(func() { client.Close() })
	var logged strings.Builder // written only by Load, before the takes
	r := newRedis(t, bucket.RedisOptions{Client: client, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	limit := bucket.Limit{Capacity: 100, Rate: 100, Per: time.Minute}
	for i, want := range []int64{90, 80} {
		d, err := r.Take(ctx, "", []bucket.Item{{Key: "llmguard:{t}:a", Limit: limit, Cost: 10}})
		if err != nil || !d.Allowed || d.Buckets[0].Remaining != want {
			t.Fatalf("take %d: %+v, %v; want allowed, %d left", i, d, err, want)
		}
	}
	if n := commandCount(t, admin, "evalsha"); n != 2 {
		t.Errorf("%d EVALSHA; want 2", n)
	}
	if got := strings.Count(logged.String(), "by EVALSHA from now on"); got != 1 {
		t.Errorf("%d log lines saying the store runs by EVALSHA; want 1:\n%s", got, logged.String())
	}
}
