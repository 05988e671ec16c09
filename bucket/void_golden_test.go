package bucket

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/lua"
)

// voidCase is one call into the take marker's state machine from a given
// marker and bucket: the same inputs go through the Go functions
// (takeMarked, voidMark, then Take or Apply; TakeQuota or ApplyQuota) and
// through the scripts (take.lua with a marker, reconcile.lua in void mode),
// which must give the same outcome, marker and stored state, bit for bit.
type voidCase struct {
	name  string
	mark  mark
	state State      // a token bucket's (zero: a missing key)
	quota QuotaState // a quota's (zero: a missing key)
	limit Limit
	op    string // "take" or "void"
	cost  int64
}

// goRun is the case through the Go functions: whether the take was voided,
// its verdict, the marker and the bucket's state afterwards.
func (c voidCase) goRun(now time.Time) (voided bool, v Verdict, m mark, s State, q QuotaState) {
	m, s, q = c.mark, c.state, c.quota
	if c.op == "void" {
		next, refund := voidMark(c.mark)
		m = next
		if refund {
			if c.limit.IsQuota() {
				q, _ = ApplyQuota(q, c.limit, now, -c.cost)
			} else {
				s, _ = Apply(s, c.limit, now, -c.cost)
			}
		}
		return false, Verdict{}, m, s, q
	}
	if takeMarked(c.mark) {
		return true, Verdict{}, m, s, q
	}
	if c.limit.IsQuota() {
		q, v = TakeQuota(q, c.limit, now, c.cost)
	} else {
		s, v = Take(s, c.limit, now, c.cost)
	}
	if v.OK {
		m = markTaken
	}
	return false, v, m, s, q
}

func voidCases() []voidCase {
	thirds := Limit{Capacity: 3, Rate: 2, Per: 3 * time.Second}
	slow := Limit{Capacity: 1 << 40, Rate: 7, Per: time.Hour}
	quota := Quota(10, day1, day2)
	var cases []voidCase
	for _, m := range []mark{markNone, markTaken, markVoided} {
		for _, b := range []struct {
			name  string
			state State
			quota QuotaState
			limit Limit
			cost  int64
		}{
			{"a new bucket", State{}, QuotaState{}, thirds, 2},
			{"a third short", State{Level: 2.0 / 3, Updated: t0.Add(-time.Microsecond)}, QuotaState{}, thirds, 1},
			{"in debt", State{Level: -1.25, Updated: t0.Add(-time.Second)}, QuotaState{}, thirds, 1},
			{"nearly full", State{Level: 2.5, Updated: t0.Add(-500 * time.Millisecond)}, QuotaState{}, thirds, 2},
			{"a large bucket", State{Level: 1e12 + 1.0/3, Updated: t0.Add(-time.Hour)}, QuotaState{}, slow, 123456789},
			{"a quota with room", State{}, QuotaState{Used: 4, Window: day1}, quota, 5},
			{"a quota used up", State{}, QuotaState{Used: 10, Window: day1}, quota, 1},
			{"a quota of a past window", State{}, QuotaState{Used: 9, Window: day1.Add(-24 * time.Hour)}, quota, 3},
			{"a quota moved on", State{}, QuotaState{Used: 2, Window: day2}, quota, 3},
		} {
			for _, op := range []string{"take", "void"} {
				cases = append(cases, voidCase{
					name: fmt.Sprintf("%s, marker %q, %s", b.name, markText(m), op),
					mark: m, state: b.state, quota: b.quota, limit: b.limit, op: op, cost: b.cost,
				})
			}
		}
	}
	return cases
}

// markText is a marker as the scripts store it; "" for none.
func markText(m mark) string {
	return [...]string{"", "t", "v"}[m]
}

// TestVoidGolden runs every marker state through a take and a void, in Go
// and in the scripts, on miniredis (gopher-lua) and on a real redis-server
// (Lua 5.1).
func TestVoidGolden(t *testing.T) {
	cases := voidCases()
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		runVoidGolden(t, c, cases)
	})
	t.Run("redis-server", func(t *testing.T) {
		runVoidGolden(t, redistest.Shared(t).Client(), cases)
	})
}

func runVoidGolden(t *testing.T, c *redis.Client, cases []voidCase) {
	ctx := context.Background()
	const key, id = "golden:{v}:a", "req-1"
	markerKey := takeMarkerKey(key, id)
	now := t0
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i, vc := range cases {
		where := fmt.Sprintf("case %d (%s)", i+1, vc.name)
		// The state before.
		err = c.Del(ctx, key, markerKey).Err()
		switch {
		case vc.limit.IsQuota() && !vc.quota.Window.IsZero():
			err = c.Set(ctx, key, fmt.Sprintf("q %d %d", vc.quota.Used, vc.quota.Window.UnixMicro()), 0).Err()
		case !vc.limit.IsQuota() && !vc.state.Updated.IsZero():
			err = c.Set(ctx, key, fmt.Sprintf("%s %d", strconv.FormatFloat(vc.state.Level, 'g', 17, 64), vc.state.Updated.UnixMicro()), 0).Err()
		}
		if err == nil && vc.mark != markNone {
			err = c.Set(ctx, markerKey, markText(vc.mark), time.Minute).Err()
		}
		if err != nil {
			t.Fatal(err)
		}

		wantVoided, wantV, wantMark, wantState, wantQuota := vc.goRun(now)
		items := []Item{{Key: key, Limit: vc.limit, Cost: vc.cost}}
		if vc.op == "void" {
			err = r.Void(ctx, id, items)
		} else {
			var d Decision
			d, err = r.Take(ctx, id, items)
			if err == nil {
				want := Decision{Allowed: wantV.OK, DeniedBy: -1, TooLarge: wantV.TooLarge, RetryAfter: wantV.Wait, Buckets: []Status{wantV.Status}}
				if !wantV.OK {
					want.DeniedBy = 0
				}
				if !sameDecision(d, want) {
					t.Errorf("%s:\n\tLua %+v\n\tGo  %+v", where, d, want)
				}
			}
		}
		switch {
		case wantVoided && !errors.Is(err, ErrVoided):
			t.Errorf("%s: Lua %v, Go voided the take", where, err)
		case !wantVoided && err != nil:
			t.Errorf("%s: Lua %v", where, err)
		}

		gotMark, err := c.Get(ctx, markerKey).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if gotMark != markText(wantMark) {
			t.Errorf("%s: Lua left the marker %q, Go %q", where, gotMark, markText(wantMark))
		}
		if vc.limit.IsQuota() {
			got, found := readQuota(t, c, key)
			if !found {
				got = QuotaState{}
			}
			if wantQuota.Used == 0 {
				wantQuota = QuotaState{} // a quota with nothing used is deleted
			}
			if got.Used != wantQuota.Used || !got.Window.Equal(wantQuota.Window) {
				t.Errorf("%s: Lua stored %+v, Go %+v", where, got, wantQuota)
			}
			continue
		}
		got, found := readState(t, c, key)
		switch {
		case !found && (wantState.Updated.IsZero() || wantState.Level >= float64(vc.limit.Capacity)):
		case !found:
			t.Errorf("%s: Lua deleted the key, Go left %+v", where, wantState)
		case math.Float64bits(got.Level) != math.Float64bits(wantState.Level) || !got.Updated.Equal(wantState.Updated):
			t.Errorf("%s: Lua stored %v @%d, Go %v @%d", where, got.Level, got.Updated.UnixMicro(), wantState.Level, wantState.Updated.UnixMicro())
		}
	}
}

// TestVoidTwinsDefined checks that the marker functions have their Lua
// twins under the same names, in the script that uses each.
func TestVoidTwinsDefined(t *testing.T) {
	for _, tc := range []struct{ script, src, name string }{
		{"take.lua", lua.Take, "takeMarked"},
		{"reconcile.lua", lua.Reconcile, "voidMark"},
	} {
		if !strings.Contains(tc.src, "local function "+tc.name+"(mark)") {
			t.Errorf("%s does not define %s, the twin of bucket.%s", tc.script, tc.name, tc.name)
		}
	}
}
