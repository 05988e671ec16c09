package bucket

import (
	"errors"
	"testing"
	"time"
)

// The calendar days around t0 (noon, 1 March 2025 UTC), as the proxy would
// compute them for a daily quota in UTC.
var (
	day1 = time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)
	day2 = day1.Add(24 * time.Hour)
	day3 = day2.Add(24 * time.Hour)
)

// quotaStep is one call into the pure quota arithmetic on the state the
// previous step left. The golden test of the Lua scripts replays it.
type quotaStep struct {
	name  string
	at    time.Duration // now, as an offset from t0
	limit Limit
	op    string // "take", "check" or "apply"
	cost  int64  // units taken (take, check) or delta units (apply)

	wantOK, wantTooLarge bool
	wantWait             time.Duration
	wantUsed             int64     // used after the call
	wantWindow           time.Time // window after the call
	wantStatus           Status
}

func runQuotaMath(t *testing.T, steps []quotaStep) {
	t.Helper()
	var s QuotaState
	for i, st := range steps {
		now := t0.Add(st.at)
		var (
			v      Verdict
			status Status
		)
		switch st.op {
		case "take":
			s, v = TakeQuota(s, st.limit, now, st.cost)
			status = v.Status
		case "check":
			s, v = CheckQuota(s, st.limit, now, st.cost)
			status = v.Status
		case "apply":
			s, status = ApplyQuota(s, st.limit, now, st.cost)
		default:
			t.Fatalf("step %d (%s): unknown op %q", i+1, st.name, st.op)
		}
		if v.OK != st.wantOK || v.TooLarge != st.wantTooLarge || v.Wait != st.wantWait {
			t.Errorf("step %d (%s): verdict ok=%v tooLarge=%v wait=%v, want ok=%v tooLarge=%v wait=%v",
				i+1, st.name, v.OK, v.TooLarge, v.Wait, st.wantOK, st.wantTooLarge, st.wantWait)
		}
		if s.Used != st.wantUsed || !s.Window.Equal(st.wantWindow) {
			t.Errorf("step %d (%s): state used=%d window=%v, want used=%d window=%v",
				i+1, st.name, s.Used, s.Window, st.wantUsed, st.wantWindow)
		}
		if again := s.Status(st.limit, now); status != st.wantStatus || again != st.wantStatus {
			t.Errorf("step %d (%s): status %+v (QuotaState.Status %+v), want %+v",
				i+1, st.name, status, again, st.wantStatus)
		}
	}
}

func TestQuotaTimeline(t *testing.T) {
	runQuotaMath(t, quotaSteps())
}

// quotaSteps is the timeline of TestQuotaTimeline, which the golden test of
// the Lua scripts replays too: a daily quota of 10 units, from noon on day 1.
func quotaSteps() []quotaStep {
	ten1 := Quota(10, day1, day2)
	ten2 := Quota(10, day2, day3)
	five2 := Quota(5, day2, day3)
	h := time.Hour
	return []quotaStep{
		{name: "a new quota has nothing used", at: 0, limit: ten1, op: "take", cost: 4,
			wantOK: true, wantUsed: 4, wantWindow: day1, wantStatus: Status{6, 12 * h}},
		{name: "check uses nothing", at: 0, limit: ten1, op: "check", cost: 6,
			wantOK: true, wantUsed: 4, wantWindow: day1, wantStatus: Status{6, 12 * h}},
		{name: "uses the rest", at: h, limit: ten1, op: "take", cost: 6,
			wantOK: true, wantUsed: 10, wantWindow: day1, wantStatus: Status{0, 11 * h}},
		{name: "one more waits for the window's end", at: 2 * h, limit: ten1, op: "take", cost: 1,
			wantWait: 10 * h, wantUsed: 10, wantWindow: day1, wantStatus: Status{0, 10 * h}},
		{name: "cost zero passes a quota used up", at: 2 * h, limit: ten1, op: "take", cost: 0,
			wantOK: true, wantUsed: 10, wantWindow: day1, wantStatus: Status{0, 10 * h}},
		{name: "above capacity is too large, not a wait", at: 2 * h, limit: ten1, op: "take", cost: 11,
			wantTooLarge: true, wantUsed: 10, wantWindow: day1, wantStatus: Status{0, 10 * h}},
		{name: "a charge goes beyond capacity", at: 3 * h, limit: ten1, op: "apply", cost: 5,
			wantUsed: 15, wantWindow: day1, wantStatus: Status{-5, 9 * h}},
		{name: "a refund floors at nothing used", at: 3 * h, limit: ten1, op: "apply", cost: -20,
			wantUsed: 0, wantWindow: day1, wantStatus: Status{10, 9 * h}},
		{name: "charge 7", at: 3 * h, limit: ten1, op: "apply", cost: 7,
			wantUsed: 7, wantWindow: day1, wantStatus: Status{3, 9 * h}},
		{name: "one microsecond before the end", at: 12*h - time.Microsecond, limit: ten1, op: "take", cost: 5,
			wantWait: time.Microsecond, wantUsed: 7, wantWindow: day1, wantStatus: Status{3, time.Microsecond}},
		{name: "the old window has ended: no wait", at: 12 * h, limit: ten1, op: "take", cost: 5,
			wantUsed: 7, wantWindow: day1, wantStatus: Status{3, 0}},
		{name: "the next window starts from nothing used", at: 12 * h, limit: ten2, op: "take", cost: 5,
			wantOK: true, wantUsed: 5, wantWindow: day2, wantStatus: Status{5, 24 * h}},
		{name: "a lagging caller's take counts in the later window", at: 12 * h, limit: ten1, op: "take", cost: 2,
			wantOK: true, wantUsed: 7, wantWindow: day2, wantStatus: Status{3, 0}},
		{name: "a delta for the past window applies to nothing", at: 12 * h, limit: ten1, op: "apply", cost: 100,
			wantUsed: 7, wantWindow: day2, wantStatus: Status{3, 0}},
		{name: "a lowered capacity keeps used", at: 13 * h, limit: five2, op: "check", cost: 0,
			wantOK: true, wantUsed: 7, wantWindow: day2, wantStatus: Status{-2, 23 * h}},
		{name: "and denies", at: 13 * h, limit: five2, op: "take", cost: 1,
			wantWait: 23 * h, wantUsed: 7, wantWindow: day2, wantStatus: Status{-2, 23 * h}},
		{name: "capacity back to 10", at: 13 * h, limit: ten2, op: "take", cost: 3,
			wantOK: true, wantUsed: 10, wantWindow: day2, wantStatus: Status{0, 23 * h}},
		{name: "a delta for a later window starts it", at: 14 * h, limit: Quota(10, day3, day3.Add(24*h)), op: "apply", cost: 4,
			wantUsed: 4, wantWindow: day3, wantStatus: Status{6, 46 * h}},
	}
}

func TestQuotaExtremes(t *testing.T) {
	huge := Quota(1<<53, day1, day2)
	s, v := TakeQuota(QuotaState{}, huge, t0, 1<<53-1)
	if !v.OK || s.Used != 1<<53-1 {
		t.Fatalf("take 2^53-1: %+v %+v", s, v)
	}
	if s, v = TakeQuota(s, huge, t0, 1); !v.OK || s.Used != 1<<53 || v.Status.Remaining != 0 {
		t.Fatalf("take the last unit: %+v %+v", s, v)
	}
	if _, v = TakeQuota(s, huge, t0, 1); v.OK || v.TooLarge {
		t.Fatalf("one more: %+v", v)
	}
	if s, _ = ApplyQuota(s, huge, t0, 1<<62); s.Used != 1<<53 {
		t.Fatalf("a huge charge saturates at 2^53: %+v", s)
	}
	if s, _ = ApplyQuota(s, huge, t0, -1<<63); s.Used != 0 {
		t.Fatalf("a huge refund floors at 0: %+v", s)
	}
}

func TestQuotaValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit Limit
		ok    bool
	}{
		{name: "a day", limit: Quota(10, day1, day2), ok: true},
		{name: "rate and per are ignored", limit: Limit{Capacity: 10, Rate: -1, WindowStart: day1, WindowEnd: day2}, ok: true},
		{name: "one microsecond", limit: Quota(1, day1, day1.Add(time.Microsecond)), ok: true},
		{name: "the epoch", limit: Quota(1, time.UnixMicro(0), time.UnixMicro(1)), ok: true},
		{name: "zero capacity", limit: Quota(0, day1, day2)},
		{name: "capacity above 2^53", limit: Quota(1<<53+1, day1, day2)},
		{name: "no start", limit: Quota(10, time.Time{}, day2)},
		{name: "no end", limit: Quota(10, day1, time.Time{})},
		{name: "empty", limit: Quota(10, day1, day1)},
		{name: "under a microsecond", limit: Quota(10, day1, day1.Add(999))},
		{name: "backwards", limit: Quota(10, day2, day1)},
		{name: "before 1970", limit: Quota(10, time.UnixMicro(-1), day1)},
		{name: "past 2^53µs", limit: Quota(10, day1, time.UnixMicro(1<<53))},
	} {
		err := tc.limit.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
