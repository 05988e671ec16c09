package bucket

import (
	"encoding/binary"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLoneArgs: a committing take whose buckets are all token buckets goes
// in the lone layout (its marker TTL and limits as one text, then each
// bucket's cost packed, then now only when pinned); any other take
// (a quota, a window counter, an in-flight limit among its buckets, more
// than lua.LoneBuckets buckets, or a check) keeps take.lua's single
// layout.
func TestLoneArgs(t *testing.T) {
	r := &Redis{voidFor: "60000"}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	tpm := Limit{Capacity: 500, Rate: 3, Per: time.Minute}
	rps := Limit{Capacity: 7, Rate: 7, Per: time.Second}
	steps := []struct {
		name   string
		id     string     // the request id; "" is "r1", "-" none
		now    *time.Time // a pinned clock (RedisOptions.Now); nil: Redis TIME
		items  []Item
		commit bool
		want   []any // nil: the single layout stays
	}{
		{name: "token buckets", items: []Item{{Key: "k:{t}:a", Limit: tpm, Cost: 300}, {Key: "k:{t}:b", Limit: rps, Cost: 1}}, commit: true,
			want: []any{"L 60000 500 3 60000000 7 7 1000000", packedCosts(300, 1)}},
		{name: "no request id", id: "-", items: []Item{{Key: "k:{t}:b", Limit: rps, Cost: 0}}, commit: true,
			want: []any{"L 0 7 7 1000000", packedCosts(0)}},
		{name: "a pinned clock", now: &now, items: []Item{{Key: "k:{t}:b", Limit: rps, Cost: 2}}, commit: true,
			want: []any{"L 60000 7 7 1000000", packedCosts(2), "1773144000000000"}},
		{name: "a cost past 2^53", items: []Item{{Key: "k:{t}:b", Limit: Limit{Capacity: 1 << 62, Rate: 7, Per: time.Second}, Cost: 1<<53 + 1}}, commit: true,
			want: []any{"L 60000 4611686018427387904 7 1000000", "\x00\x00\x00\x00\x00\x00\x40\x43"}}, // 2^53: float64 rounds 2^53 + 1 to even, as strtod does
		{name: "more buckets than the lone layout's runs take", items: []Item{{Key: "k:{t}:1", Limit: rps, Cost: 1}, {Key: "k:{t}:2", Limit: rps, Cost: 1},
			{Key: "k:{t}:3", Limit: rps, Cost: 1}, {Key: "k:{t}:4", Limit: rps, Cost: 1}, {Key: "k:{t}:5", Limit: rps, Cost: 1}}, commit: true},
		{name: "a check", items: []Item{{Key: "k:{t}:a", Limit: tpm, Cost: 300}}},
		{name: "a quota among them", items: []Item{{Key: "k:{t}:a", Limit: tpm, Cost: 1}, {Key: "k:{t}:q", Limit: Quota(5, now, now.Add(time.Hour)), Cost: 1}}, commit: true},
		{name: "an in-flight limit", items: []Item{{Key: "k:{t}:c", Limit: Limit{Capacity: 2, Concurrent: true}, Cost: 1}}, commit: true},
		{name: "a window counter", items: []Item{{Key: "k:{t}:w", Limit: Limit{Capacity: 10, Per: time.Minute, Algorithm: SlidingWindow}, Cost: 1}}, commit: true},
	}
	for i, s := range steps {
		r.now = nil
		if s.now != nil {
			r.now = func() time.Time { return *s.now }
		}
		id := s.id
		switch id {
		case "":
			id = "r1"
		case "-":
			id = ""
		}
		_, args := r.takeArgs(id, s.items, nil, s.commit)
		got := loneArgs(args)
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d (%s): lone layout %#v, want %#v", i, s.name, got, s.want)
		}
	}
}

// FuzzLimitText: a limit's text reads back, by the pattern of lua/core.lua's
// limitOf (five decimal integers, each with an optional minus, separated
// by single spaces), as the five numbers it was made from.
func FuzzLimitText(f *testing.F) {
	f.Add(int64(500), int64(3), int64(60000000), int64(0), int64(0))
	f.Add(int64(6), int64(0), int64(0), int64(1773100800000000), int64(1775692800000000))
	f.Add(int64(10), int64(0), int64(60000000), int64(-1), int64(-2))
	f.Add(int64(-1<<63), int64(1<<63-1), int64(0), int64(-7), int64(1))
	f.Fuzz(func(t *testing.T, a, b, c, d, e int64) {
		text := limitText(a, b, c, d, e)
		fields := strings.Split(text, " ")
		if len(fields) != 5 {
			t.Fatalf("%q: %d fields", text, len(fields))
		}
		for i, want := range []int64{a, b, c, d, e} {
			f := fields[i]
			digits := strings.TrimPrefix(f, "-")
			if digits == "" || strings.Trim(digits, "0123456789") != "" {
				t.Fatalf("%q: field %d %q is not -?%%d+", text, i, f)
			}
			if got, err := strconv.ParseInt(f, 10, 64); err != nil || got != want {
				t.Fatalf("%q: field %d reads %d (%v), want %d", text, i, got, err, want)
			}
		}
	})
}

// packedCosts is costs as loneArgs packs them: 8 bytes each, the
// little-endian IEEE 754 double of the cost.
func packedCosts(costs ...int64) string {
	var b []byte
	for _, c := range costs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(c)))
	}
	return string(b)
}
