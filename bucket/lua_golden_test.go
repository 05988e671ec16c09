package bucket

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/lua"
)

// goldenCase is one call into the arithmetic from a given state: the same
// inputs go through the Go functions (Take, Check, Apply, or for a quota
// limit TakeQuota, CheckQuota, ApplyQuota) and through the scripts (take.lua
// committing, take.lua checking, reconcile.lua), which must give the same
// verdict, status and stored state, bit for bit.
type goldenCase struct {
	name  string
	state State      // a token bucket's; the zero State is a missing key
	quota QuotaState // a quota's; the zero QuotaState is a missing key
	limit Limit
	now   time.Time
	op    string // "take", "check" or "apply"
	cost  int64  // units taken (take, check) or delta units (apply)
}

// TestLuaGolden replays the math timelines of TestTokenBucketTimeline and
// TestQuotaTimeline, hand picked edge cases and thousands of random cases
// through Go and through the scripts, on miniredis (gopher-lua) and on a real
// redis-server (Lua 5.1).
func TestLuaGolden(t *testing.T) {
	cases := goldenCases()
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		runGolden(t, c, miniredisSample(cases, func(gc goldenCase) bool { return !strings.HasPrefix(gc.name, "random") }))
	})
	t.Run("redis-server", func(t *testing.T) {
		runGolden(t, redistest.Shared(t).Client(), cases)
	})
}

func goldenCases() []goldenCase {
	var cases []goldenCase
	// The timeline, each step from the state the Go functions left.
	var s State
	for _, st := range tokenBucketSteps() {
		c := goldenCase{name: "timeline: " + st.name, state: s, limit: st.limit, now: t0.Add(st.at), op: st.op, cost: st.cost}
		cases = append(cases, c)
		s, _, _ = c.goRun()
	}

	// Edges.
	huge := Limit{Capacity: 1 << 53, Rate: 1 << 53, Per: time.Microsecond}
	slow := Limit{Capacity: 1 << 53, Rate: 1, Per: 24 * time.Hour}
	thirds := Limit{Capacity: 3, Rate: 2, Per: 3 * time.Second}
	at := func(level float64, ago time.Duration) State { return State{Level: level, Updated: t0.Add(-ago)} }
	cases = append(cases,
		goldenCase{name: "largest limit, full", limit: huge, now: t0, op: "take", cost: 1 << 53},
		goldenCase{name: "largest limit, 1µs refills it", state: at(0, time.Microsecond), limit: huge, now: t0, op: "take", cost: 1 << 53},
		goldenCase{name: "a wait capped at 2^53µs", state: at(-(1 << 53), 0), limit: slow, now: t0, op: "take", cost: 1},
		goldenCase{name: "debt beyond int64 saturates", state: at(-9.2e18, 0), limit: thirds, now: t0, op: "apply", cost: math.MaxInt64},
		goldenCase{name: "refund beyond int64 clamps", state: at(-9.2e18, 0), limit: thirds, now: t0, op: "apply", cost: math.MinInt64},
		goldenCase{name: "a third short", state: at(2.0/3, 0), limit: thirds, now: t0.Add(time.Microsecond), op: "take", cost: 1},
		goldenCase{name: "clock back, debt", state: at(-2.5, -time.Second), limit: thirds, now: t0, op: "check", cost: 1},
		goldenCase{name: "cost above capacity", state: at(1.5, time.Second), limit: thirds, now: t0, op: "take", cost: 4},
		goldenCase{name: "cost zero in debt", state: at(-1.25, time.Second), limit: thirds, now: t0, op: "take", cost: 0},
	)

	// The quota timeline, each step from the state the Go functions left.
	var q QuotaState
	for _, st := range quotaSteps() {
		c := goldenCase{name: "quota timeline: " + st.name, quota: q, limit: st.limit, now: t0.Add(st.at), op: st.op, cost: st.cost}
		cases = append(cases, c)
		q, _, _ = c.goQuota()
	}

	// Quota edges.
	hugeQuota := Quota(1<<53, day1, day2)
	usedIn := func(used int64, window time.Time) QuotaState { return QuotaState{Used: used, Window: window} }
	cases = append(cases,
		goldenCase{name: "quota: the largest capacity, all of it", limit: hugeQuota, now: t0, op: "take", cost: 1 << 53},
		goldenCase{name: "quota: the last unit of 2^53", quota: usedIn(1<<53-1, day1), limit: hugeQuota, now: t0, op: "take", cost: 1},
		goldenCase{name: "quota: 2^53 used, one more", quota: usedIn(1<<53, day1), limit: hugeQuota, now: t0, op: "take", cost: 1},
		goldenCase{name: "quota: a cost rounding to 2^53", limit: hugeQuota, now: t0, op: "take", cost: 1<<53 + 1},
		goldenCase{name: "quota: a charge saturates at 2^53", quota: usedIn(5, day1), limit: hugeQuota, now: t0, op: "apply", cost: math.MaxInt64},
		goldenCase{name: "quota: a refund beyond int64 floors at 0", quota: usedIn(1<<53, day1), limit: hugeQuota, now: t0, op: "apply", cost: math.MinInt64},
		goldenCase{name: "quota: a past window resets", quota: usedIn(9, day1), limit: Quota(10, day2, day3), now: day2, op: "take", cost: 10},
		goldenCase{name: "quota: a later window is kept", quota: usedIn(9, day2), limit: Quota(10, day1, day2), now: day2, op: "take", cost: 1},
		goldenCase{name: "quota: a delta for a past window", quota: usedIn(9, day2), limit: Quota(10, day1, day2), now: day2, op: "apply", cost: -9},
		goldenCase{name: "quota: the clock past the window's end", quota: usedIn(10, day1), limit: Quota(10, day1, day2), now: day3, op: "check", cost: 1},
	)

	// Random cases: limits from a few requests a minute to micro-USD
	// budgets, levels in debt or not, clocks forward and back.
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		l := randomLimit(r)
		c := goldenCase{name: fmt.Sprint("random ", i), limit: l, now: t0}
		if r.IntN(5) != 0 {
			c.state = State{
				Level:   (r.Float64()*2 - 0.5) * float64(l.Capacity),
				Updated: t0.Add(-time.Duration(r.Int64N(int64(2*time.Hour/time.Microsecond))) * time.Microsecond),
			}
		}
		if !c.state.Updated.IsZero() && r.IntN(10) == 0 {
			c.now = c.state.Updated.Add(-time.Duration(r.Int64N(1e6)) * time.Microsecond) // stepped back
		}
		c.op = []string{"take", "check", "apply"}[r.IntN(3)]
		switch k := r.IntN(10); {
		case k == 0:
			c.cost = 0
		case k == 1:
			c.cost = l.Capacity + 1 + r.Int64N(l.Capacity)
		default:
			c.cost = r.Int64N(l.Capacity) + 1
		}
		if c.op == "apply" && r.IntN(2) == 0 {
			c.cost = -c.cost
		}
		cases = append(cases, c)
	}

	// Random quotas: windows from a minute to a month, used from nothing to
	// twice the capacity, stored windows past, current or later, clocks
	// within the window or past it.
	for i := range 2000 {
		capacity := randomLimit(r).Capacity
		length := []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 31 * 24 * time.Hour}[r.IntN(5)]
		start := t0.Add(-time.Duration(r.Int64N(int64(length/time.Microsecond))) * time.Microsecond)
		l := Quota(capacity, start, start.Add(length))
		c := goldenCase{name: fmt.Sprint("random quota ", i), limit: l, now: t0}
		if r.IntN(5) != 0 {
			c.quota = QuotaState{Used: min(1<<53, 1+r.Int64N(2*capacity)), Window: start}
			switch r.IntN(6) {
			case 0:
				c.quota.Window = start.Add(-length) // a past period
			case 1:
				c.quota.Window = start.Add(length) // a later period
			}
		}
		if r.IntN(10) == 0 {
			c.now = l.WindowEnd.Add(time.Duration(r.Int64N(1e9)) * time.Microsecond) // past the window
		}
		c.op = []string{"take", "check", "apply"}[r.IntN(3)]
		switch k := r.IntN(10); {
		case k == 0:
			c.cost = 0
		case k == 1:
			c.cost = capacity + 1 + r.Int64N(capacity)
		default:
			c.cost = r.Int64N(capacity) + 1
		}
		if c.op == "apply" && r.IntN(2) == 0 {
			c.cost = -c.cost
		}
		cases = append(cases, c)
	}
	return cases
}

// goQuota is a quota case through the Go functions, as goRun.
func (c goldenCase) goQuota() (QuotaState, Verdict, Status) {
	switch c.op {
	case "take":
		s, v := TakeQuota(c.quota, c.limit, c.now, c.cost)
		return s, v, v.Status
	case "check":
		_, v := CheckQuota(c.quota, c.limit, c.now, c.cost)
		return c.quota, v, v.Status
	default:
		s, st := ApplyQuota(c.quota, c.limit, c.now, c.cost)
		return s, Verdict{}, st
	}
}

// goRun is the case through the Go functions: the state a store would hold
// afterwards (Check and a denied Take write nothing), the verdict and status.
func (c goldenCase) goRun() (State, Verdict, Status) {
	switch c.op {
	case "take":
		s, v := Take(c.state, c.limit, c.now, c.cost)
		return s, v, v.Status
	case "check":
		_, v := Check(c.state, c.limit, c.now, c.cost)
		return c.state, v, v.Status
	default:
		s, st := Apply(c.state, c.limit, c.now, c.cost)
		return s, Verdict{}, st
	}
}

func runGolden(t *testing.T, c *redis.Client, cases []goldenCase) {
	ctx := context.Background()
	const key = "golden:{g}:a"
	for i, gc := range cases {
		where := fmt.Sprintf("case %d (%s) %+v %+v at %v, %s %d", i+1, gc.name, gc.state, gc.limit, gc.now.Sub(t0), gc.op, gc.cost)
		now := gc.now
		r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		quota := gc.limit.IsQuota()
		switch {
		case quota && !gc.quota.Window.IsZero():
			where = fmt.Sprintf("case %d (%s) %+v %+v at %v, %s %d", i+1, gc.name, gc.quota, gc.limit, gc.now.Sub(t0), gc.op, gc.cost)
			err = c.Set(ctx, key, fmt.Sprintf("q %d %d", gc.quota.Used, gc.quota.Window.UnixMicro()), 0).Err()
		case quota || gc.state.Updated.IsZero():
			err = c.Del(ctx, key).Err()
		default:
			err = c.Set(ctx, key, fmt.Sprintf("%s %d", strconv.FormatFloat(gc.state.Level, 'g', 17, 64), gc.state.Updated.UnixMicro()), 0).Err()
		}
		if err != nil {
			t.Fatal(err)
		}

		var (
			wantState  State
			wantQuota  QuotaState
			wantV      Verdict
			wantStatus Status
		)
		if quota {
			wantQuota, wantV, wantStatus = gc.goQuota()
		} else {
			wantState, wantV, wantStatus = gc.goRun()
		}
		var got Decision
		switch gc.op {
		case "take":
			got, err = r.Take(ctx, "", []Item{{Key: key, Limit: gc.limit, Cost: gc.cost}})
		case "check":
			got, err = r.check(ctx, Item{Key: key, Limit: gc.limit, Cost: gc.cost})
		case "apply":
			deltas := []Delta{{Key: key, Limit: gc.limit, Units: gc.cost}}
			if gc.cost == 0 {
				err = r.applyScript(ctx, deltas) // the store sends no delta of zero units
			} else {
				err = r.Reconcile(ctx, "", deltas)
			}
			if err == nil {
				got, err = r.check(ctx, Item{Key: key, Limit: gc.limit})
				wantV = Verdict{OK: true}
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		want := Decision{Allowed: wantV.OK, DeniedBy: -1, TooLarge: wantV.TooLarge, RetryAfter: wantV.Wait, Buckets: []Status{wantStatus}}
		if !wantV.OK {
			want.DeniedBy = 0
		}
		if !sameDecision(got, want) {
			t.Errorf("%s:\n\tLua %+v\n\tGo  %+v", where, got, want)
		}

		if quota {
			gotQuota, found := readQuota(t, c, key)
			switch {
			case !found && wantQuota.Window.IsZero():
			case !found:
				if wantQuota.Used > 0 {
					t.Errorf("%s: Lua deleted the key, Go left %+v", where, wantQuota)
				}
			case gotQuota.Used != wantQuota.Used || !gotQuota.Window.Equal(wantQuota.Window):
				t.Errorf("%s: Lua stored %d @%d, Go %d @%d", where,
					gotQuota.Used, gotQuota.Window.UnixMicro(), wantQuota.Used, wantQuota.Window.UnixMicro())
			}
			continue
		}
		gotState, found := readState(t, c, key)
		switch {
		case !found && wantState.Updated.IsZero():
		case !found:
			if wantState.Level < float64(gc.limit.Capacity) {
				t.Errorf("%s: Lua deleted the key, Go left %+v below capacity", where, wantState)
			}
		case math.Float64bits(gotState.Level) != math.Float64bits(wantState.Level) || !gotState.Updated.Equal(wantState.Updated):
			t.Errorf("%s: Lua stored %v @%d, Go %v @%d", where,
				gotState.Level, gotState.Updated.UnixMicro(), wantState.Level, wantState.Updated.UnixMicro())
		}
	}
}

// check runs take.lua without committing, as Check.
func (r *Redis) check(ctx context.Context, it Item) (Decision, error) {
	items := []Item{it}
	d := Decision{Buckets: make([]Status, 1)}
	keys, args := r.takeArgs("", items, nil, false)
	reply, err := r.call(ctx, r.take, keys, args...).Int64Slice()
	if err == nil {
		err = decide(&d, reply, nil)
	}
	return d, err
}

// applyScript runs reconcile.lua on deltas as one entry with no marker,
// zero units included: the store leaves deltas of zero units out (they
// change nothing a take can see), but the script's arithmetic must agree
// with Apply's on them all the same. The ARGV come from the map-based
// builder the store's is held to (intern_oracle_test.go), which alone can
// send them.
func (r *Redis) applyScript(ctx context.Context, deltas []Delta) error {
	c := newMapReconcileCall(r)
	c.zeroUnits = true
	c.entry(0, rcEntry{mode: 'n'}, len(deltas), func(j int) Delta { return deltas[j] })
	return r.call(ctx, r.reconcile, c.keys, c.args(r)...).Err()
}

// readState reads a bucket key as the scripts store it.
func readState(t testing.TB, c redis.Cmdable, key string) (State, bool) {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return State{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	levelText, updatedText, ok := strings.Cut(v, " ")
	level, err1 := strconv.ParseFloat(levelText, 64)
	updated, err2 := strconv.ParseInt(updatedText, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("key %s holds %q, not '<level> <updated>'", key, v)
	}
	return State{Level: level, Updated: time.UnixMicro(updated).UTC()}, true
}

// readQuota reads a quota key as the scripts store it.
func readQuota(t testing.TB, c redis.Cmdable, key string) (QuotaState, bool) {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return QuotaState{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var used, window int64
	if n, err := fmt.Sscanf(v, "q %d %d", &used, &window); n != 2 || err != nil || fmt.Sprintf("q %d %d", used, window) != v {
		t.Fatalf("key %s holds %q, not 'q <used> <window>'", key, v)
	}
	return QuotaState{Used: used, Window: time.UnixMicro(window).UTC()}, true
}

func sameDecision(a, b Decision) bool {
	if a.Allowed != b.Allowed || a.DeniedBy != b.DeniedBy || a.TooLarge != b.TooLarge ||
		a.RetryAfter != b.RetryAfter || len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i := range a.Buckets {
		if a.Buckets[i] != b.Buckets[i] {
			return false
		}
	}
	return true
}

// TestLuaCoreIsShared checks that the core functions the two scripts share
// are the same text in both (package lua inserts core.lua into each), so
// that mirroring Go in one mirrors it in both.
func TestLuaCoreIsShared(t *testing.T) {
	fn := regexp.MustCompile(`(?ms)^local function (\w+)\(.*?^end$`)
	take := map[string]string{}
	for _, m := range fn.FindAllStringSubmatch(lua.Take, -1) {
		take[m[1]] = m[0]
	}
	shared := 0
	for _, m := range fn.FindAllStringSubmatch(lua.Reconcile, -1) {
		if body, ok := take[m[1]]; ok {
			shared++
			if body != m[0] {
				t.Errorf("function %s differs between take.lua and reconcile.lua", m[1])
			}
		}
	}
	if shared < 10 { // refill, wait, load, put, roll, charge, untilEnd, quotaExpiry, loadQuota, putQuota
		t.Errorf("only %d functions shared; the regexp no longer finds them", shared)
	}
	// The Go core's functions have their Lua twins under the same names.
	for _, name := range []string{"refill", "check", "wait", "apply", "floorUnits",
		"roll", "checkQuota", "charge", "untilEnd", "applyQuota", "quotaExpiry"} {
		def := "local function " + name + "("
		if !strings.Contains(lua.Take, def) && !strings.Contains(lua.Reconcile, def) {
			t.Errorf("no script defines %s, the twin of bucket.%s", name, name)
		}
	}
	for _, src := range []string{lua.Take, lua.Reconcile} {
		if strings.Contains(src, "-- @core: the shared core") {
			t.Error("a script still has its @core marker: core.lua was not inserted")
		}
		if !strings.Contains(src, "local maxWait = 2 ^ 53\n") {
			t.Error("a script lost maxWait = 2^53")
		}
		if !strings.Contains(src, "local maxUnits = 2 ^ 53\n") {
			t.Error("a script lost maxUnits = 2^53")
		}
		if want := fmt.Sprintf("local quotaMargin = %d\n", quotaMargin); !strings.Contains(src, want) {
			t.Errorf("a script lost %q (bucket.quotaMargin)", want)
		}
	}
}
