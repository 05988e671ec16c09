package bucket

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// oldTakeSource is take.lua as an EVAL script (core.lua inserted) at
// d920abb, before a lone take sent its shape as one text: the oracle of
// TestTakeLoneMatchesOld, sent with the KEYS of takeArgs and the ARGV
// oldLoneArgs builds (its own lone layout, 't', or the single layout).
//
// Its hold is patched to keep an in-flight key's longer TTL, as
// core.lua's hold does since a shorter lease cut older holders short
// (TestShorterLeaseKeepsLongerHolders), and its denial to name the short
// bucket that waits longest, as take.lua's does since a 429 named the
// first short limit with another's wait: the oracle checks the layout.
//
//go:embed testdata/take_d920abb.lua
var oldTakeSource string

var oldTakeScript = redis.NewScript(oldTakeSource)

// oldLoneArgs is loneArgs as it was at d920abb: now, "t", the marker TTL,
// then per bucket its limit's text ("capacity rate per 0 0") and its cost.
func oldLoneArgs(args []any) []any {
	if len(args) < 3 || args[1] != "1" || (len(args)-3)%6 != 0 {
		return nil
	}
	n := (len(args) - 3) / 6
	out := make([]any, 3, 3+2*n)
	out[0], out[1], out[2] = args[0], "t", args[2]
	for j := range n {
		a := args[3+6*j : 9+6*j]
		c, ok1 := a[0].(int64)
		r, ok2 := a[1].(int64)
		p, ok3 := a[2].(int64)
		if !ok1 || !ok2 || !ok3 || r == 0 || a[3] != any(int64(0)) || a[4] != any(int64(0)) {
			return nil
		}
		out = append(out, limitText(c, r, p, 0, 0), a[5])
	}
	return out
}

// loneEdgeLevels are stored token-bucket values whose level is at an edge
// of takeLone's text of a whole level ('%d' where it is what '%.17g' would
// write): zeros of both signs, beyond 2^53, negative, fractional, huge;
// each updated long ago (refilled) and in 2100 (a clock behind it: no
// refill, so a take of cost 0 writes the level back as it was read).
var loneEdgeLevels = func() []string {
	var out []string
	for _, l := range []string{"-0", "0", "9007199254740993", "9007199254740992", "-9007199254740992",
		"-5", "5.5", "1e300", "-1e300", "123456789012345678", "0.1", "-0.0"} {
		out = append(out, l+" 1", l+" 4102444800000000")
	}
	return out
}()

// runTakeLoneCase writes tc's state under tag (the key of each take's
// first bucket, for edge, one of loneEdgeLevels), runs its takes one by
// one, each alone, the clock moving between them (the old script with
// its own ARGV when old, else the store's lone take), and reads back
// every key of the tag. The reply is each take's, in order.
func runTakeLoneCase(t testing.TB, c *redis.Client, tc takeLayoutCase, edge int, tag string, old bool) layoutResult {
	t.Helper()
	ctx := context.Background()
	now := tc.lc.now
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }, TakeBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	lc := tc.lc
	if edge >= 0 && len(tc.takes) > 0 {
		lc.state = map[string]layoutStored{}
		for k, v := range tc.lc.state {
			lc.state[k] = v
		}
		lc.state[layoutKey("@", tc.takes[0].keys[0])] = layoutStored{kind: "string", v: loneEdgeLevels[edge%len(loneEdgeLevels)]}
	}
	var res layoutResult
	stored := runLayoutCaseWith(t, c, lc, tag, func() {
		for i, e := range tc.takes {
			now = tc.lc.now.Add(time.Duration(i*i*7919) * time.Microsecond)
			items := make([]Item, len(e.keys))
			for j, k := range e.keys {
				items[j] = Item{Key: layoutKey(tag, k), Limit: e.lims[j], Cost: e.costs[j]}
			}
			keys, args := r.takeArgs(e.id, items, nil, true)
			var reply []int64
			if old {
				if l := oldLoneArgs(args); l != nil && i%2 == 0 { // the old lone layout, or its generic body
					args = l
				}
				reply, err = oldTakeScript.Run(ctx, c, keys, args...).Int64Slice()
			} else {
				reply, err = r.takes.lone(ctx, keys, args)
				reply = asOldTakeReply(reply, args)
			}
			if err != nil {
				res.err = true
				reply = []int64{-98}
			}
			res.reply = append(append(res.reply, reply...), -99) // -99 ends a take's reply
		}
	})
	res.keys = stored.keys
	return res
}

// compareTakeLone runs tc's takes alone through take.lua at d920abb (the
// oracle) under tag "o" and through the store's lone take under tag "n",
// on the same server, and reports every difference (see compareLayout).
func compareTakeLone(t testing.TB, c *redis.Client, tc takeLayoutCase, edge int, exactTTL bool, where string) {
	t.Helper()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := runTakeLoneCase(t, c, tc, edge, "o", true)
	got := runTakeLoneCase(t, c, tc, edge, "n", false)
	diffLayout(t, got, want, exactTTL, start, where)
}

// TestTakeLoneMatchesOld runs random takes (randomTakeLayoutCase), each
// alone, through the store's lone take (take.lua's lone layout for token
// buckets, the single layout for the rest) and through take.lua and its
// ARGV at d920abb, kept as the oracle: every reply and every key (value,
// members, TTL) must agree, on miniredis and on a real redis-server (by
// FCALL: the library's caches last from call to call).
func TestTakeLoneMatchesOld(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 14))
	var cases []takeLayoutCase
	for range 200 {
		cases = append(cases, randomTakeLayoutCase(rnd))
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		for i, tc := range cases {
			if !onMiniredis(i) {
				continue
			}
			compareTakeLone(t, c, tc, i-len(cases)/2, true, fmt.Sprintf("case %d", i))
		}
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Shared(t).Client()
		for i, tc := range cases {
			compareTakeLone(t, c, tc, i-len(cases)/2, false, fmt.Sprintf("case %d", i))
		}
	})
}

// FuzzTakeLone is TestTakeLoneMatchesOld driven by the fuzzer's seeds, on
// a real redis-server:
//
//	go test -run X -fuzz FuzzTakeLone -fuzztime 60s ./bucket/
func FuzzTakeLone(f *testing.F) {
	f.Add(uint64(1), uint64(2), 0)
	f.Add(uint64(5), uint64(14), -1)
	c := redistest.Shared(f).Client()
	f.Fuzz(func(t *testing.T, s1, s2 uint64, edge int) {
		if edge < -1 {
			edge = -1
		}
		compareTakeLone(t, c, randomTakeLayoutCase(rand.New(rand.NewPCG(s1, s2))), edge, false, fmt.Sprintf("seeds %d %d %d", s1, s2, edge))
	})
}
