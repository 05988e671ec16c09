package bucket

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// w0 is a window boundary of every window length the tests use (a whole
// number of days since the Unix epoch).
var w0 = time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)

// TestWindowTimeline walks both window counters through fixed instants:
// the burst at a boundary that the fixed window admits twice and the
// sliding window does not, the exact Retry-After of each, the sliding
// window's linear recovery, and reconciliation into the window of the take.
func TestWindowTimeline(t *testing.T) {
	sliding := Window(SlidingWindow, 100, time.Minute)
	fixed := Window(FixedWindow, 100, time.Minute)
	type step struct {
		name      string
		limit     Limit
		at        time.Duration // since w0
		op        string        // take, apply
		cost      int64
		window    time.Duration // apply: the take's window, since w0; -1: the current one
		ok        bool
		wait      time.Duration
		remaining int64
		reset     time.Duration
	}
	run := func(t *testing.T, steps []step) {
		t.Helper()
		var s WindowState
		for i, st := range steps {
			now := w0.Add(st.at)
			var v Verdict
			switch st.op {
			case "take":
				s, v = TakeWindow(s, st.limit, now, st.cost)
			case "apply":
				l := st.limit
				if st.window >= 0 {
					l.WindowStart = w0.Add(st.window)
				}
				s, v.Status, v.OK = ApplyWindow(s, l, now, st.cost)
			}
			if v.OK != st.ok || v.Wait != st.wait || v.Status.Remaining != st.remaining || v.Status.Reset != st.reset {
				t.Errorf("step %d (%s): got ok=%v wait=%v remaining=%d reset=%v; want ok=%v wait=%v remaining=%d reset=%v",
					i+1, st.name, v.OK, v.Wait, v.Status.Remaining, v.Status.Reset, st.ok, st.wait, st.remaining, st.reset)
			}
		}
	}
	t.Run("fixed", func(t *testing.T) {
		run(t, []step{
			{name: "burst late in window 0", limit: fixed, at: 59 * time.Second, op: "take", cost: 100, ok: true, remaining: 0, reset: time.Second},
			{name: "full: wait for the boundary", limit: fixed, at: 59*time.Second + 500*time.Millisecond, op: "take", cost: 1, wait: 500 * time.Millisecond, remaining: 0, reset: 500 * time.Millisecond},
			{name: "second burst right after the boundary", limit: fixed, at: 60 * time.Second, op: "take", cost: 100, ok: true, remaining: 0, reset: time.Minute},
			{name: "refund into the take's window", limit: fixed, at: 61 * time.Second, op: "apply", cost: -30, window: time.Minute, ok: true, remaining: 30, reset: 59 * time.Second},
			{name: "a past window's refund applies to nothing", limit: fixed, at: 62 * time.Second, op: "apply", cost: -50, window: 0, ok: false, remaining: 30, reset: 58 * time.Second},
			{name: "a charge into the current window (unknown take window)", limit: fixed, at: 62 * time.Second, op: "apply", cost: 40, window: -1, ok: true, remaining: -10, reset: 58 * time.Second},
		})
	})
	t.Run("sliding", func(t *testing.T) {
		run(t, []step{
			{name: "burst late in window 0", limit: sliding, at: 59 * time.Second, op: "take", cost: 100, ok: true, remaining: 0, reset: 61 * time.Second},
			// At the boundary prev = 100 weighs fully: one unit fits once
			// prev × (60 − e)/60 <= 99, e >= 0.6s.
			{name: "boundary: wait 0.6s for one unit", limit: sliding, at: 60 * time.Second, op: "take", cost: 1, wait: 600 * time.Millisecond, remaining: 0, reset: time.Minute},
			{name: "0.6s in: it fits", limit: sliding, at: 60*time.Second + 600*time.Millisecond, op: "take", cost: 1, ok: true, remaining: 0, reset: 119*time.Second + 400*time.Millisecond},
			// Half way: prev weighs 50, cur 1: 49 fit, 50 wait until
			// 100 × (60 − e)/60 + 1 <= 50, e >= 30.6s.
			{name: "half way: 50 wait 0.6s", limit: sliding, at: 90 * time.Second, op: "take", cost: 50, wait: 600 * time.Millisecond, remaining: 49, reset: 90 * time.Second},
			{name: "half way: 49 fit", limit: sliding, at: 90 * time.Second, op: "take", cost: 49, ok: true, remaining: 0, reset: 90 * time.Second},
			// Window 2: prev = 50 (1 + 49); 60 units fit once
			// 50 × (60 − e)/60 <= 40, e >= 12s.
			{name: "next window: 60 wait 12s", limit: sliding, at: 120 * time.Second, op: "take", cost: 60, wait: 12 * time.Second, remaining: 50, reset: time.Minute},
			{name: "refund into the previous window lowers prev", limit: sliding, at: 120 * time.Second, op: "apply", cost: -10, window: time.Minute, ok: true, remaining: 60, reset: time.Minute},
			{name: "now 60 fit at once", limit: sliding, at: 120 * time.Second, op: "take", cost: 60, ok: true, remaining: 0, reset: 2 * time.Minute},
			{name: "a refund two windows back applies to nothing", limit: sliding, at: 121 * time.Second, op: "apply", cost: -50, window: 0, ok: false, remaining: 0, reset: 119 * time.Second},
			// Debt: a charge beyond capacity; the next window cannot fit
			// 100 until both windows pass.
			// 40 × 59/60 + 60 + 80 = 179.33: 80 units short.
			{name: "a charge into the current window", limit: sliding, at: 121 * time.Second, op: "apply", cost: 80, window: 2 * time.Minute, ok: true, remaining: -80, reset: 119 * time.Second},
			{name: "in debt: 100 wait until both windows pass", limit: sliding, at: 121 * time.Second, op: "take", cost: 100, wait: 119 * time.Second, remaining: -80, reset: 119 * time.Second},
			{name: "too large", limit: sliding, at: 121 * time.Second, op: "take", cost: 101, remaining: -80, reset: 119 * time.Second},
			{name: "two windows later: empty", limit: sliding, at: 240 * time.Second, op: "take", cost: 100, ok: true, remaining: 0, reset: 2 * time.Minute},
		})
	})
}

// TestWindowWaitExact checks every denial's wait at random states: after
// the wait the cost fits, and 1µs before it does not (so Retry-After is
// exact, as the core computes it).
func TestWindowWaitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	denials := 0
	for i := range 20000 {
		l := randomWindow(r)
		per := l.Per
		start := time.UnixMicro(w0.UnixMicro() / int64(per/time.Microsecond) * int64(per/time.Microsecond)).UTC()
		s := WindowState{Prev: r.Int64N(2 * l.Capacity), Cur: r.Int64N(l.Capacity + l.Capacity/2 + 1), Start: start}
		if l.Algorithm == FixedWindow {
			s.Prev = 0
		}
		now := start.Add(time.Duration(r.Int64N(int64(per/time.Microsecond))) * time.Microsecond)
		cost := 1 + r.Int64N(l.Capacity)
		_, v := CheckWindow(s, l, now, cost)
		if v.OK || v.TooLarge {
			continue
		}
		denials++
		if v.Wait <= 0 || v.Wait > 2*per {
			t.Fatalf("case %d %+v %+v at %v cost %d: wait %v", i, s, l, now.Sub(w0), cost, v.Wait)
		}
		if _, after := CheckWindow(s, l, now.Add(v.Wait), cost); !after.OK {
			t.Fatalf("case %d %+v %+v at %v cost %d: wait %v does not suffice", i, s, l, now.Sub(w0), cost, v.Wait)
		}
		if _, before := CheckWindow(s, l, now.Add(v.Wait-time.Microsecond), cost); before.OK && v.Wait > time.Microsecond {
			t.Fatalf("case %d %+v %+v at %v cost %d: wait %v is 1µs too long", i, s, l, now.Sub(w0), cost, v.Wait)
		}
	}
	if denials < 1000 {
		t.Fatalf("only %d denials: the cases do not exercise the wait", denials)
	}
}

// randomWindow is a window counter from a few units a second to 10^12 a
// month.
func randomWindow(r *rand.Rand) Limit {
	pers := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 30 * 24 * time.Hour}
	a := []Algorithm{SlidingWindow, FixedWindow}[r.IntN(2)]
	return Window(a, int64(math.Pow(10, r.Float64()*12))+1, pers[r.IntN(len(pers))])
}

// windowGolden is one window case through Go and the scripts.
type windowGolden struct {
	name  string
	state WindowState // the zero WindowState: a missing key
	limit Limit
	now   time.Time
	op    string // take, check, apply
	cost  int64
}

func (c windowGolden) goRun() (WindowState, Verdict, Status) {
	switch c.op {
	case "take":
		s, v := TakeWindow(c.state, c.limit, c.now, c.cost)
		return s, v, v.Status
	case "check":
		_, v := CheckWindow(c.state, c.limit, c.now, c.cost)
		return c.state, v, v.Status
	default:
		s, st, _ := ApplyWindow(c.state, c.limit, c.now, c.cost)
		return s, Verdict{}, st
	}
}

// TestWindowLuaGolden runs hand-picked and random window cases through the
// Go core and through take.lua and reconcile.lua (miniredis and a real
// redis-server), which must agree on the verdict, wait, status, the window
// reported and the state stored.
func TestWindowLuaGolden(t *testing.T) {
	cases := windowGoldenCases()
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		runWindowGolden(t, c, miniredisSample(cases, func(wg windowGolden) bool { return !strings.HasPrefix(wg.name, "random") }))
	})
	t.Run("redis-server", func(t *testing.T) {
		runWindowGolden(t, redistest.Shared(t).Client(), cases)
	})
}

func windowGoldenCases() []windowGolden {
	sliding := Window(SlidingWindow, 100, time.Minute)
	fixed := Window(FixedWindow, 100, time.Minute)
	huge := Window(SlidingWindow, 1<<53, time.Duration(maxWindowPer)*time.Microsecond)
	in := func(prev, cur int64, start time.Time) WindowState {
		return WindowState{Prev: prev, Cur: cur, Start: start}
	}
	taken := func(l Limit, w time.Time) Limit { l.WindowStart = w; return l }
	cases := []windowGolden{
		{name: "new sliding", limit: sliding, now: w0.Add(time.Second), op: "take", cost: 100},
		{name: "sliding boundary", state: in(0, 100, w0), limit: sliding, now: w0.Add(time.Minute), op: "take", cost: 1},
		{name: "fixed boundary", state: in(0, 100, w0), limit: fixed, now: w0.Add(time.Minute), op: "take", cost: 100},
		{name: "clock back", state: in(40, 50, w0), limit: sliding, now: w0.Add(-time.Second), op: "check", cost: 20},
		{name: "refund to prev", state: in(40, 50, w0), limit: taken(sliding, w0.Add(-time.Minute)), now: w0.Add(time.Second), op: "apply", cost: -30},
		{name: "refund to a past window", state: in(40, 50, w0), limit: taken(sliding, w0.Add(-2*time.Minute)), now: w0.Add(time.Second), op: "apply", cost: -30},
		{name: "fixed: refund to prev applies to nothing", state: in(0, 50, w0), limit: taken(fixed, w0.Add(-time.Minute)), now: w0.Add(time.Second), op: "apply", cost: -30},
		{name: "refund to empty deletes", state: in(0, 30, w0), limit: sliding, now: w0.Add(time.Second), op: "apply", cost: -30},
		{name: "charge saturates", state: in(5, 5, w0), limit: huge, now: w0, op: "apply", cost: 1 << 60},
		{name: "largest", limit: huge, now: w0.Add(time.Hour), op: "take", cost: 1 << 53},
		{name: "zero cost in debt", state: in(300, 200, w0), limit: sliding, now: w0.Add(time.Second), op: "take", cost: 0},
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 3000 {
		l := randomWindow(r)
		per := int64(l.Per / time.Microsecond)
		start := time.UnixMicro(w0.UnixMicro()/per*per + per*r.Int64N(3)).UTC()
		c := windowGolden{name: fmt.Sprint("random ", i), limit: l, now: start.Add(time.Duration(r.Int64N(3*per)) * time.Microsecond)}
		if r.IntN(10) == 0 {
			c.now = start.Add(-time.Duration(r.Int64N(per)) * time.Microsecond) // stepped back
		}
		if r.IntN(5) != 0 {
			c.state = in(r.Int64N(2*l.Capacity), r.Int64N(2*l.Capacity), start)
			if l.Algorithm == FixedWindow {
				c.state.Prev = 0
			}
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
		if c.op == "apply" {
			if r.IntN(2) == 0 {
				c.cost = -c.cost
			}
			if r.IntN(3) != 0 {
				c.limit.WindowStart = start.Add(time.Duration(per*(r.Int64N(4)-1)) * time.Microsecond)
			}
		}
		cases = append(cases, c)
	}
	return cases
}

func runWindowGolden(t *testing.T, c *redis.Client, cases []windowGolden) {
	ctx := context.Background()
	const key = "golden:{g}:w"
	for i, gc := range cases {
		where := fmt.Sprintf("case %d (%s) %+v %+v at %v, %s %d", i+1, gc.name, gc.state, gc.limit, gc.now.Sub(w0), gc.op, gc.cost)
		now := gc.now
		r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		if gc.state.Start.IsZero() {
			err = c.Del(ctx, key).Err()
		} else {
			err = c.Set(ctx, key, fmt.Sprintf("w %d %d %d", gc.state.Prev, gc.state.Cur, gc.state.Start.UnixMicro()), 0).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		wantState, wantV, wantStatus := gc.goRun()
		item := Item{Key: key, Limit: gc.limit, Cost: gc.cost}
		item.Limit.WindowStart = time.Time{}
		var got Decision
		switch gc.op {
		case "take":
			got, err = r.Take(ctx, "", []Item{item})
		case "check":
			got, err = r.check(ctx, item)
		case "apply":
			deltas := []Delta{{Key: key, Limit: gc.limit, Units: gc.cost}}
			if gc.cost == 0 {
				err = r.applyScript(ctx, deltas)
			} else {
				err = r.Reconcile(ctx, "", deltas)
			}
			if err == nil {
				item.Cost = 0
				got, err = r.check(ctx, item)
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
		// The window reported is the one the Go core slid to.
		_, _, wantStart := wantState.load()
		if _, _, s := slide(0, 0, wantStart, int64(gc.limit.Per/time.Microsecond), gc.now.UnixMicro(), false); len(got.Windows) != 1 || got.Windows[0].UnixMicro() != max(s, wantStart) {
			t.Errorf("%s: windows %v, want the window starting at %d", where, got.Windows, max(s, wantStart))
		}
		gotState, found := readWindow(t, c, key)
		switch {
		case !found:
			if wantState.Prev > 0 || wantState.Cur > 0 {
				t.Errorf("%s: Lua deleted the key, Go left %+v", where, wantState)
			}
		case gotState != wantState:
			t.Errorf("%s: Lua stored %+v, Go %+v", where, gotState, wantState)
		}
	}
}

// readWindow reads a window counter's key as the scripts store it.
func readWindow(t testing.TB, c redis.Cmdable, key string) (WindowState, bool) {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return WindowState{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var prev, cur, start int64
	if n, err := fmt.Sscanf(v, "w %d %d %d", &prev, &cur, &start); n != 3 || err != nil || fmt.Sprintf("w %d %d %d", prev, cur, start) != v {
		t.Fatalf("key %s holds %q, not 'w <prev> <cur> <start>'", key, v)
	}
	return WindowState{Prev: prev, Cur: cur, Start: time.UnixMicro(start).UTC()}, true
}

// The wrappers keep a window counter's window in the Decision when it
// shares a take with a leased bucket (Leased) or a sharded one
// (TakeSharded): the meter names it in the take's deltas.
func TestWindowsThroughWrappers(t *testing.T) {
	ctx := context.Background()
	now := w0.Add(90 * time.Second)
	clock := func() time.Time { return now }
	win := Window(SlidingWindow, 100, time.Minute)
	bucketLimit := Limit{Capacity: 1000, Rate: 1000, Per: time.Second}

	leased := NewLeased(NewMemory(MemoryOptions{Now: clock, SweepEvery: -1}), LeaseOptions{Now: clock, SweepEvery: -1})
	d, err := leased.Take(ctx, "r1", []Item{
		{Key: "w:{t}:hot", Limit: bucketLimit, Cost: 1, Lease: Lease{Size: 100, TTL: time.Second}},
		{Key: "w:{t}:win", Limit: win, Cost: 1},
	})
	if err != nil || !d.Allowed {
		t.Fatalf("leased take: %+v %v", d, err)
	}
	if len(d.Windows) != 2 || !d.Windows[1].Equal(w0.Add(time.Minute)) || !d.Windows[0].IsZero() {
		t.Errorf("leased take: windows %v, want [zero, %v]", d.Windows, w0.Add(time.Minute))
	}

	mem := NewMemory(MemoryOptions{Now: clock, SweepEvery: -1})
	sd, err := TakeSharded(ctx, mem, "r2", []ShardedItem{
		{Item: Item{Key: "w:{t}:hot", Limit: bucketLimit, Cost: 1}, Shards: 2, Keys: ShardKeys{Prefix: "w:{s", Suffix: "}:hot"}},
		{Item: Item{Key: "w:{t}:win", Limit: win, Cost: 1}},
	}, nil)
	if err != nil || !sd.Allowed {
		t.Fatalf("sharded take: %+v %v", sd, err)
	}
	if len(sd.Windows) != 2 || !sd.Windows[1].Equal(w0.Add(time.Minute)) {
		t.Errorf("sharded take: windows %v, want [zero, %v]", sd.Windows, w0.Add(time.Minute))
	}
}
