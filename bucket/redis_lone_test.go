package bucket_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// loneSteps is a timeline of lone takes on token buckets that a tenant's
// requests share, the clock moving between them (forward, by a little and
// by a lot, and once back): each step's items, its request id and the
// instant it runs at, µs after start. The buckets fill, go short, pay
// exactly, are asked too much, and are written, read back and rewritten
// take after take, so that the values a script wrote are read by the next
// (core.lua's encodedLevel), the shapes are read from their text over and
// over (take.lua's loneShapeOf) and TTLs recur (its pxTexts).
func loneSteps() (steps []takeBatchStep, at []int64) {
	tpm := bucket.Limit{Capacity: 500, Rate: 3, Per: time.Minute}
	usd := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Hour}
	rps := bucket.Limit{Capacity: 7, Rate: 7, Per: time.Second}
	odd := bucket.Limit{Capacity: 1e9, Rate: 333333, Per: 7 * time.Second} // a level with a fraction after a refill
	var t int64
	for i := range 48 {
		user := []string{"alice", "bob"}[i%2]
		items := []bucket.Item{
			{Key: "k:{PFX}:user:" + user, Limit: tpm, Cost: int64(37 * (i % 5))},
			{Key: "k:{PFX}:usd", Limit: usd, Cost: int64(i % 3)},
			{Key: "k:{PFX}:rps", Limit: rps, Cost: 1},
		}
		switch i % 8 {
		case 3:
			items[0].Cost = 501 // too large
		case 5:
			items = append(items, bucket.Item{Key: "k:{PFX}:odd", Limit: odd, Cost: 123456789})
		case 6:
			items = items[1:2] // one bucket
		case 7: // a limit that differs from tpm in its rate and per alone
			items = append(items, bucket.Item{Key: "k:{PFX}:burst", Limit: bucket.Limit{Capacity: 500, Rate: 50, Per: time.Second}, Cost: 450})
		}
		id := fmt.Sprintf("lone-%d", i)
		if i%4 == 1 {
			id = "" // no marker
		}
		steps = append(steps, takeBatchStep{name: fmt.Sprintf("take %d", i), id: id, items: items})
		at = append(at, t)
		switch i % 6 {
		case 0, 1, 2:
			t += 1 // the same instant, nearly: the buckets go short
		case 3:
			t += 3_000_000 + int64(i)*7919
		case 4:
			t -= 500 // the clock steps back
		default:
			t += 400_000_000 // a long pause: buckets refill to full and are deleted
		}
	}
	return steps, at
}

// loneBackend is the Redis a lone-take test runs on, by backend:
// "miniredis" (a new one, its clock at now unless now is zero),
// "redis-server" (the shared one) or "redis-server, EVALSHA" (the shared
// one through a client without FCall: the scripts by EVALSHA). client is
// what the store is given, c the plain client for reads, mr nil but on
// miniredis.
func loneBackend(t *testing.T, backend string, now time.Time) (client bucket.RedisScripter, c *redis.Client, mr *miniredis.Miniredis) {
	t.Helper()
	if backend == "miniredis" {
		mr = miniredis.RunT(t)
		if !now.IsZero() {
			mr.SetTime(now)
		}
		c = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { c.Close() })
	} else {
		c = redistest.Shared(t).Client()
	}
	client = c
	if strings.HasSuffix(backend, "EVALSHA") {
		client = struct{ bucket.RedisScripter }{c} // no FCall: the scripts by EVALSHA
	}
	return client, c, mr
}

// TestTakeLoneMatchesGeneric: a lone take of token buckets, sent in the
// lone layout to take.lua's fast path (takeLone), gives the reply take.lua's
// generic body gives the same take in the single layout, and leaves the
// same stored state (values bit for bit; TTLs exactly on miniredis, whose
// clock stands still, within the runs' spread on redis-server), step after
// step of loneSteps and of the batch timeline (whose quota takes go by the
// generic body both ways), on miniredis (EVAL) and on a real redis-server,
// by FCALL (Functions: the limits' and values' tables last from call to
// call) and by EVALSHA (Redis before 7.0; they are made again each call).
func TestTakeLoneMatchesGeneric(t *testing.T) {
	start := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, backend := range []string{"miniredis", "redis-server", "redis-server, EVALSHA"} {
		t.Run(backend, func(t *testing.T) {
			now := start
			clock := func() time.Time { return now }
			client, c, mr := loneBackend(t, backend, now)
			ctx := context.Background()
			fast := newRedis(t, bucket.RedisOptions{Client: client, Now: clock, TakeBatch: 1})
			generic := newRedis(t, bucket.RedisOptions{Client: client, Now: clock, TakeBatch: 1})
			generic.SendLoneTakesGeneric()
			steps, at := loneSteps()
			batch, _ := takeBatchSteps(start)
			for range batch {
				at = append(at, at[len(at)-1]+1)
			}
			steps = append(steps, batch...)
			begun := time.Now() // a key's two writes are apart by at most the run so far
			for _, p := range []string{"fast", "gen"} {
				for _, id := range []string{"void-me", setID(start, 8), "lone-10"} {
					if err := fast.Void(ctx, id, named(steps[0].items, p)); err != nil {
						t.Fatal(err)
					}
				}
			}
			keys := map[string]bool{}
			allowed, denied := 0, 0
			for i, s := range steps {
				now = start.Add(time.Duration(at[i]) * time.Microsecond)
				if mr != nil {
					mr.SetTime(now)
				}
				got := resultOf(fast.Take(ctx, s.id, named(s.items, "fast")))
				want := resultOf(generic.Take(ctx, s.id, named(s.items, "gen")))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("step %d (%s): fast path %+v, generic body %+v", i, s.name, got, want)
				}
				if got.d.Allowed {
					allowed++
				} else if got.err == "" && !got.voided {
					denied++
				}
				for _, it := range s.items {
					keys[it.Key] = true
				}
				if s.id != "" {
					keys["llmguard:{PFX}::tk:"+s.id] = true
				}
				for k := range keys {
					fk, gk := strings.ReplaceAll(k, "PFX", "fast"), strings.ReplaceAll(k, "PFX", "gen")
					fv, fe := c.Get(ctx, fk).Result()
					gv, ge := c.Get(ctx, gk).Result()
					if fv != gv || (fe == nil) != (ge == nil) {
						t.Errorf("step %d (%s): %s: fast path %q (%v), generic body %q (%v)", i, s.name, k, fv, fe, gv, ge)
					}
					ft, gt := c.PTTL(ctx, fk).Val(), c.PTTL(ctx, gk).Val()
					// The two TTLs differ by the wall time between the two
					// writes plus that between the two reads, both within
					// the run so far (measured after the reads: a loaded
					// machine can hold the test up between them), and each
					// PTTL rounds to a millisecond.
					spread := time.Since(begun)
					diff := max(ft-gt, gt-ft)
					if (ft > 0) != (gt > 0) || (mr != nil && diff != 0) || diff > spread+2*time.Millisecond {
						t.Errorf("step %d (%s): %s: TTL fast path %v, generic body %v", i, s.name, k, ft, gt)
					}
				}
			}
			if mr == nil { // the path the backend names was the one taken
				info := c.Info(ctx, "commandstats").Val()
				fcall, evalsha := strings.Contains(info, "cmdstat_fcall:"), strings.Contains(info, "cmdstat_evalsha:")
				if fcall == strings.HasSuffix(backend, "EVALSHA") || evalsha != strings.HasSuffix(backend, "EVALSHA") {
					t.Errorf("FCALL run %v, EVALSHA run %v", fcall, evalsha)
				}
			}
			// The timeline must reach both verdicts many times, or it
			// compares little.
			if allowed < 15 || denied < 10 {
				t.Errorf("%d takes allowed, %d denied; the timeline should have at least 15 and 10", allowed, denied)
			}
		})
	}
}

// TestTakeLoneWritesRedisTime: a lone take on Redis's own clock (no Now:
// TIME) stores each bucket's updated as '%d' writes TIME's instant in µs,
// which takeLone builds from TIME's two texts (the seconds, then the
// microseconds padded to six digits): every value read back after a take
// is "<level> <updated>" with updated in decimal without leading zeros and
// between TIME read just before the take and just after it. It takes at
// least 300 times, and on until 20 values were written at a microseconds
// below 100000 (a text of fewer than six digits), on miniredis (EVAL,
// gopher-lua) and on redis-server by FCALL and by EVALSHA.
func TestTakeLoneWritesRedisTime(t *testing.T) {
	for _, backend := range []string{"miniredis", "redis-server", "redis-server, EVALSHA"} {
		t.Run(backend, func(t *testing.T) {
			client, c, _ := loneBackend(t, backend, time.Time{})
			ctx := context.Background()
			r := newRedis(t, bucket.RedisOptions{Client: client, TakeBatch: 1})
			tag := "k:{time-" + strings.ReplaceAll(backend, " ", "") + "}:"
			items := []bucket.Item{
				{Key: tag + "whole", Limit: bucket.Limit{Capacity: 1e12, Rate: 1, Per: time.Hour}, Cost: 3},
				{Key: tag + "odd", Limit: bucket.Limit{Capacity: 1e9, Rate: 333333, Per: 7 * time.Second}, Cost: 1000},
			}
			micros := func() int64 {
				tm, err := c.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				return tm.UnixMicro()
			}
			short, i := 0, 0
			for ; i < 300 || short < 20 && i < 50_000; i++ { // until 20 such values (TIME's microseconds run through 0–99999 a tenth of each second)
				before := micros()
				d, err := r.Take(ctx, fmt.Sprintf("time-%d", i), items)
				if err != nil || !d.Allowed {
					t.Fatalf("take %d: %+v, %v", i, d, err)
				}
				after := micros()
				for _, it := range items {
					v, err := c.Get(ctx, it.Key).Result()
					if err != nil {
						t.Fatalf("take %d: %s: %v", i, it.Key, err)
					}
					_, text, ok := strings.Cut(v, " ")
					updated, perr := strconv.ParseInt(text, 10, 64)
					if !ok || perr != nil || strconv.FormatInt(updated, 10) != text || updated < before || updated > after {
						t.Fatalf("take %d: %s holds %q; want '<level> <updated>', updated in [%d, %d] as '%%d' writes it", i, it.Key, v, before, after)
					}
					if updated%1_000_000 < 100_000 {
						short++
					}
				}
			}
			if short == 0 {
				t.Fatalf("%d takes wrote no value at a microseconds below 100000: the padding went untested", i)
			}
			t.Logf("%d takes, %d values written at a microseconds below 100000", i, short)
		})
	}
}

// TestTakeLoneTTLAtWaitSteps: a lone take works out a bucket's TTL
// (floor((updated + reset - now) / 1000) + 1000 ms) from wait's first guess
// floor(q) and runs wait's steps (at most two more µs) only when floor(q)
// and floor(q) + 2 give different whole milliseconds; the TTL must be the
// one the steps give. Each step below takes 1 unit from a full bucket of
// 10 whose q = per / rate is not whole, its floor 999 or 1999 (mod 1000):
// wait raises it by one to a whole 1000 or 2000 µs, a TTL of 1001 or 1002
// ms, where floor(q) alone gives 1000 or 1001. On miniredis (its clock
// stands still, so TTLs compare exactly) against take.lua's generic body
// and against the TTL stated here; the reply's reset too.
func TestTakeLoneTTLAtWaitSteps(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	client, c, _ := loneBackend(t, "miniredis", now)
	ctx := context.Background()
	clock := func() time.Time { return now }
	fast := newRedis(t, bucket.RedisOptions{Client: client, Now: clock, TakeBatch: 1})
	generic := newRedis(t, bucket.RedisOptions{Client: client, Now: clock, TakeBatch: 1})
	generic.SendLoneTakesGeneric()
	for i, s := range []struct {
		name  string
		per   time.Duration // per rate 2: q = per / 2 µs
		reset time.Duration // wait's, after its step
		ttl   time.Duration
	}{
		{name: "q 999.5", per: 1999 * time.Microsecond, reset: 1000 * time.Microsecond, ttl: 1001 * time.Millisecond},
		{name: "q 1999.5", per: 3999 * time.Microsecond, reset: 2000 * time.Microsecond, ttl: 1002 * time.Millisecond},
		{name: "q 1499.5 (no step changes the TTL)", per: 2999 * time.Microsecond, reset: 1500 * time.Microsecond, ttl: 1001 * time.Millisecond},
	} {
		lim := bucket.Limit{Capacity: 10, Rate: 2, Per: s.per}
		key := fmt.Sprintf("k:{PFX}:step%d", i)
		for _, p := range []struct {
			name string
			r    *bucket.Redis
		}{{"fast", fast}, {"gen", generic}} {
			k := strings.ReplaceAll(key, "PFX", p.name)
			d, err := p.r.Take(ctx, "", []bucket.Item{{Key: k, Limit: lim, Cost: 1}})
			if err != nil {
				t.Fatalf("step %d (%s), %s: %v", i, s.name, p.name, err)
			}
			if !d.Allowed || len(d.Buckets) != 1 || d.Buckets[0].Reset != s.reset {
				t.Errorf("step %d (%s), %s: %+v; want allowed, reset %v", i, s.name, p.name, d, s.reset)
			}
			if got := c.PTTL(ctx, k).Val(); got != s.ttl {
				t.Errorf("step %d (%s), %s: TTL %v, want %v", i, s.name, p.name, got, s.ttl)
			}
		}
	}
}
