package bucket

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

// mathStep is one call into the pure arithmetic on the state the previous
// step left. It is the table the Lua scripts replay (issue 3): every input
// and output has the script's name.
type mathStep struct {
	name  string
	at    time.Duration // now, as an offset from t0
	limit Limit
	op    string // "take", "check" or "apply"
	cost  int64  // units taken (take, check) or delta units (apply)

	wantOK, wantTooLarge bool
	wantWait             time.Duration
	wantLevel            float64       // level after the call
	wantUpdated          time.Duration // updated after the call, as an offset from t0
	wantStatus           Status
}

func runMath(t *testing.T, steps []mathStep) {
	t.Helper()
	var s State
	for i, st := range steps {
		now := t0.Add(st.at)
		var (
			v      Verdict
			status Status
		)
		switch st.op {
		case "take":
			s, v = Take(s, st.limit, now, st.cost)
			status = v.Status
		case "check":
			s, v = Check(s, st.limit, now, st.cost)
			status = v.Status
		case "apply":
			s, status = Apply(s, st.limit, now, st.cost)
		default:
			t.Fatalf("step %d (%s): unknown op %q", i+1, st.name, st.op)
		}
		if v.OK != st.wantOK || v.TooLarge != st.wantTooLarge || v.Wait != st.wantWait {
			t.Errorf("step %d (%s): verdict ok=%v tooLarge=%v wait=%v, want ok=%v tooLarge=%v wait=%v",
				i+1, st.name, v.OK, v.TooLarge, v.Wait, st.wantOK, st.wantTooLarge, st.wantWait)
		}
		if s.Level != st.wantLevel || !s.Updated.Equal(t0.Add(st.wantUpdated)) {
			t.Errorf("step %d (%s): state level=%v updated=+%v, want level=%v updated=+%v",
				i+1, st.name, s.Level, s.Updated.Sub(t0), st.wantLevel, st.wantUpdated)
		}
		// The status describes the bucket at now, whatever state came back.
		if again := Refill(s, st.limit, now).Status(st.limit); status != st.wantStatus || again != st.wantStatus {
			t.Errorf("step %d (%s): status %+v (State.Status %+v), want %+v",
				i+1, st.name, status, again, st.wantStatus)
		}
	}
}

func TestTokenBucketTimeline(t *testing.T) {
	runMath(t, tokenBucketSteps())
}

// tokenBucketSteps is the timeline of TestTokenBucketTimeline, which the
// golden test of the Lua scripts replays too.
func tokenBucketSteps() []mathStep {
	ten := Limit{Capacity: 10, Rate: 10, Per: time.Second} // 1 unit per 100ms
	five := Limit{Capacity: 5, Rate: 10, Per: time.Second}
	ms := time.Millisecond
	return []mathStep{
		{name: "a new bucket is full", at: 0, limit: ten, op: "take", cost: 4,
			wantOK: true, wantLevel: 6, wantUpdated: 0, wantStatus: Status{6, 400 * ms}},
		{name: "check spends nothing", at: 0, limit: ten, op: "check", cost: 6,
			wantOK: true, wantLevel: 6, wantUpdated: 0, wantStatus: Status{6, 400 * ms}},
		{name: "short by one unit", at: 0, limit: ten, op: "take", cost: 7,
			wantWait: 100 * ms, wantLevel: 6, wantUpdated: 0, wantStatus: Status{6, 400 * ms}},
		{name: "too large", at: 0, limit: ten, op: "take", cost: 11,
			wantTooLarge: true, wantLevel: 6, wantUpdated: 0, wantStatus: Status{6, 400 * ms}},
		{name: "exact refill of one unit", at: 100 * ms, limit: ten, op: "take", cost: 7,
			wantOK: true, wantLevel: 0, wantUpdated: 100 * ms, wantStatus: Status{0, time.Second}},
		{name: "clock steps back: no refill, updated stays", at: 50 * ms, limit: ten, op: "check", cost: 1,
			wantWait: 100 * ms, wantLevel: 0, wantUpdated: 100 * ms, wantStatus: Status{0, time.Second}},
		{name: "a denial returns the state untouched", at: 150 * ms, limit: ten, op: "take", cost: 1,
			wantWait: 50 * ms, wantLevel: 0, wantUpdated: 100 * ms, wantStatus: Status{0, 950 * ms}},
		{name: "a charge goes into debt", at: 150 * ms, limit: ten, op: "apply", cost: 3,
			wantLevel: -2.5, wantUpdated: 150 * ms, wantStatus: Status{-3, 1250 * ms}},
		{name: "cost zero passes in debt", at: 150 * ms, limit: ten, op: "take", cost: 0,
			wantOK: true, wantLevel: -2.5, wantUpdated: 150 * ms, wantStatus: Status{-3, 1250 * ms}},
		{name: "waits out the debt", at: 150 * ms, limit: ten, op: "take", cost: 1,
			wantWait: 350 * ms, wantLevel: -2.5, wantUpdated: 150 * ms, wantStatus: Status{-3, 1250 * ms}},
		{name: "a refund clamps at capacity", at: 150 * ms, limit: ten, op: "apply", cost: -20,
			wantLevel: 10, wantUpdated: 150 * ms, wantStatus: Status{10, 0}},
		{name: "a lowered capacity clamps at once", at: 150 * ms, limit: five, op: "check", cost: 5,
			wantOK: true, wantLevel: 5, wantUpdated: 150 * ms, wantStatus: Status{5, 0}},
		{name: "an hour idle fills to capacity only", at: time.Hour, limit: ten, op: "take", cost: 0,
			wantOK: true, wantLevel: 10, wantUpdated: time.Hour, wantStatus: Status{10, 0}},
	}
}

// TestWaitIsExact checks, over random limits from one request a second up to
// micro-USD budgets, that a Wait always suffices and one microsecond less
// never does: RetryAfter and Reset are the least whole microsecond.
func TestWaitIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		l := randomLimit(r)
		s := State{Level: r.Float64() * float64(l.Capacity), Updated: t0}
		if r.IntN(4) == 0 {
			s.Level = -s.Level // in debt
		}
		cost := r.Int64N(l.Capacity) + 1
		checkWait(t, i, s, l, cost)
	}
}

func FuzzWait(f *testing.F) {
	f.Add(int64(10), int64(10), int64(1e6), 0.5, int64(3))
	f.Add(int64(1e12), int64(1e12), int64(864e8), 0.5, int64(7))
	f.Add(int64(3), int64(2), int64(3e6), 0.1, int64(2))
	f.Fuzz(func(t *testing.T, capacity, rate, perMicros int64, fill float64, cost int64) {
		l := Limit{Capacity: capacity, Rate: rate, Per: time.Duration(perMicros) * time.Microsecond}
		if l.Validate() != nil || perMicros > 366*24*3600*1e6 || math.IsNaN(fill) || fill < -1 || fill > 1 ||
			cost < 1 || cost > capacity {
			t.Skip()
		}
		// Precision is promised for limits that fill in under a century.
		if float64(capacity)*float64(perMicros)/float64(rate) > 100*365*24*3600*1e6 {
			t.Skip()
		}
		checkWait(t, 0, State{Level: fill * float64(capacity), Updated: t0}, l, cost)
	})
}

func checkWait(t *testing.T, i int, s State, l Limit, cost int64) {
	t.Helper()
	_, v := Check(s, l, t0, cost)
	if v.OK || v.TooLarge {
		return
	}
	if _, at := Check(s, l, t0.Add(v.Wait), cost); !at.OK {
		t.Fatalf("case %d: %+v %+v cost %d: still short after Wait %v", i, s, l, cost, v.Wait)
	}
	if v.Wait > time.Microsecond {
		if _, early := Check(s, l, t0.Add(v.Wait-time.Microsecond), cost); early.OK {
			t.Fatalf("case %d: %+v %+v cost %d: already pays 1µs before Wait %v", i, s, l, cost, v.Wait)
		}
	}
	reset := v.Status.Reset
	if full := Refill(s, l, t0.Add(reset)); full.Level != float64(l.Capacity) {
		t.Fatalf("case %d: %+v %+v: level %v after Reset %v, want full", i, s, l, full.Level, reset)
	}
	if reset > time.Microsecond {
		if s2 := Refill(s, l, t0.Add(reset-time.Microsecond)); s2.Level >= float64(l.Capacity) {
			t.Fatalf("case %d: %+v %+v: full 1µs before Reset %v", i, s, l, reset)
		}
	}
}

// randomLimit draws a limit between a few requests a minute and a micro-USD
// budget of $1M a day.
func randomLimit(r *rand.Rand) Limit {
	pers := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 30 * 24 * time.Hour}
	capacity := int64(math.Pow(10, r.Float64()*12)) + 1
	rate := max(1, int64(float64(capacity)*math.Pow(10, r.Float64()*4-2)))
	return Limit{Capacity: capacity, Rate: rate, Per: pers[r.IntN(len(pers))]}
}

func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit Limit
		ok    bool
	}{
		{name: "zero", limit: Limit{}},
		{name: "ok", limit: Limit{Capacity: 1, Rate: 1, Per: time.Microsecond}, ok: true},
		{name: "largest", limit: Limit{Capacity: 1 << 53, Rate: 1 << 53, Per: time.Hour}, ok: true},
		{name: "capacity above 2^53", limit: Limit{Capacity: 1<<53 + 1, Rate: 1, Per: time.Second}},
		{name: "negative rate", limit: Limit{Capacity: 1, Rate: -1, Per: time.Second}},
		{name: "per under 1µs", limit: Limit{Capacity: 1, Rate: 1, Per: 999}},
	} {
		if err := tc.limit.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func BenchmarkTake(b *testing.B) {
	b.ReportAllocs()
	l := Limit{Capacity: 20000, Rate: 10000, Per: time.Minute}
	s := State{}
	now := t0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		s, _ = Take(s, l, now, 150)
	}
}
