package bucket

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
)

// splitTake returns a queued take of n buckets in take.lua's single layout
// (now, "1", marker TTL, then 6 ARGV per bucket), the last a window counter
// (windowEnd -1) when window is set, for splitReplies.
func splitTake(n int, window bool) *queuedTake {
	args := []any{"", "1", "0"}
	for j := range n {
		end := int64(0)
		if window && j == n-1 {
			end = -1
		}
		args = append(args, int64(10), int64(1), int64(1000), int64(0), end, int64(1))
	}
	return &queuedTake{args: args}
}

// flatOf is takebatch.lua's reply for take.lua's replies: in order, each
// allowed one without the -1, 0, 0 after its 1.
func flatOf(replies [][]int64) []int64 {
	var flat []int64
	for _, r := range replies {
		if r[0] == 1 {
			flat = append(append(flat, 1), r[4:]...)
		} else {
			flat = append(flat, r...)
		}
	}
	return flat
}

// TestSplitReplies checks that splitReplies gives each take of a batch its
// take.lua reply back from takebatch.lua's flat reply (allowed, denied and
// voided takes; a window counter's extra start, an allowed take's
// statuses before it with a sliding window), and rejects a reply that
// is cut short, runs past the last take or opens a take with another
// number.
func TestSplitReplies(t *testing.T) {
	takes := []*queuedTake{splitTake(3, false), splitTake(1, false), splitTake(2, true), splitTake(2, false), splitTake(1, true)}
	want := [][]int64{
		{1, -1, 0, 0, 9, 1000, 8, 2000, 7, 3000},
		{-1},
		{0, 1, 0, 500, 4, 100, 0, 900, 0, 1741561440000000},
		{0, 0, 1, 0, 3, 0, 2, 0},
		{1, -1, 0, 0, 5, 60, 1741561440000000, 6, 0}, // a sliding window: its status before the take follows
	}
	flat := flatOf(want)
	if err := splitReplies(flat, takes); err != nil {
		t.Fatal(err)
	}
	for i, q := range takes {
		if !slices.Equal(q.reply, want[i]) {
			t.Errorf("take %d: reply %v, want %v", i, q.reply, want[i])
		}
	}
	for name, bad := range map[string][]int64{
		"cut short":       flat[:len(flat)-1],
		"a take missing":  flat[:len(flat)-4],
		"past the last":   append(slices.Clone(flat), 1),
		"another opening": append([]int64{2}, flat[1:]...),
		"empty":           nil,
	} {
		if err := splitReplies(bad, takes); !errors.Is(err, errTakeReply) {
			t.Errorf("%s: error %v, want errTakeReply", name, err)
		}
	}
}

// FuzzSplitReplies feeds splitReplies takes of 1 to 4 buckets (some with
// a window counter) and any flat reply: it must not panic, and when it
// accepts one, putting the replies it gave back together must give that
// reply again (each number read once, in order, none left over).
//
//	go test -run X -fuzz FuzzSplitReplies -fuzztime 60s -fuzzminimizetime 1x ./bucket/
func FuzzSplitReplies(f *testing.F) {
	f.Add([]byte{0x12, 0x30}, []byte{})
	ok := flatOf([][]int64{{1, -1, 0, 0, 9, 1000, 8, 2000}, {-1}, {0, 1, 0, 500, 4, 100, 0}})
	buf := make([]byte, 0, 8*len(ok))
	for _, v := range ok {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	f.Add([]byte{0x02, 0x00, 0x11}, buf)
	f.Fuzz(func(t *testing.T, shapes, numbers []byte) {
		if len(shapes) > 64 {
			shapes = shapes[:64]
		}
		var takes []*queuedTake
		for _, s := range shapes {
			takes = append(takes, splitTake(1+int(s&3), s&4 != 0))
		}
		var flat []int64
		for i := 0; i+8 <= len(numbers); i += 8 {
			v := int64(binary.LittleEndian.Uint64(numbers[i:]))
			if b := numbers[i]; b < 0xc0 { // mostly -1, 0 and 1, so that replies parse
				v = int64(b%3) - 1
			}
			flat = append(flat, v)
		}
		if err := splitReplies(flat, takes); err != nil {
			if !errors.Is(err, errTakeReply) {
				t.Fatalf("error %v is not errTakeReply", err)
			}
			return
		}
		var replies [][]int64
		for _, q := range takes {
			replies = append(replies, q.reply)
		}
		if got := flatOf(replies); !slices.Equal(got, flat) && !(len(got) == 0 && len(flat) == 0) {
			t.Fatalf("replies %v make %v, not the reply %v", replies, got, flat)
		}
	})
}

// TestSplitNumbersLevels checks a packed reply with a run's levels (3, then
// each bucket's level; 2 for an allowed take of the run): each allowed
// take's reply is worked out from the levels less its costs, in order (the
// units floored, the reset wait's µs to capacity), past a voided and a
// denied take of the run, which change no level; and a 2 without levels
// of its width, or in an array reply, or levels cut short, is refused.
func TestSplitNumbersLevels(t *testing.T) {
	take := func(costs ...int64) *queuedTake {
		args := []any{"", "1", "0"}
		for _, c := range costs {
			args = append(args, int64(10), int64(1), int64(1000), int64(0), int64(0), c) // 10 units, 1 a ms
		}
		return &queuedTake{args: args}
	}
	takes := []*queuedTake{take(3, 1), take(2, 0), take(0, 0), take(9, 9), take(4, 2)}
	f := []float64{3, 9.5, 10, 2, 2, -1, 0, 0, 0, 0, 4, 0, 4, 0, 2}
	if err := splitNumbers(batchNumbers{f: f}, takes); err != nil {
		t.Fatal(err)
	}
	want := [][]int64{
		{1, -1, 0, 0, 6, 3500, 9, 1000}, // 6.5 and 9 left: 3.5 ms and 1 ms to 10
		{1, -1, 0, 0, 4, 5500, 9, 1000}, // 4.5 and 9
		{-1},
		{0, 0, 0, 0, 4, 0, 4, 0},        // as the script sent it
		{1, -1, 0, 0, 0, 9500, 7, 3000}, // 0.5 and 7
	}
	for i, q := range takes {
		if !slices.Equal(q.reply, want[i]) {
			t.Errorf("take %d: reply %v, want %v", i, q.reply, want[i])
		}
	}
	for name, bad := range map[string]batchNumbers{
		"2 without levels":    {f: []float64{2}},
		"levels of one width": {f: []float64{3, 1, 2}},
		"levels cut short":    {f: []float64{3, 1}},
		"2 in an array":       {i: []int64{2}},
	} {
		if err := splitNumbers(bad, takes[:1]); !errors.Is(err, errTakeReply) {
			t.Errorf("%s: error %v, want errTakeReply", name, err)
		}
	}
}

// FuzzSplitNumbers feeds splitNumbers takes of 1 to 4 buckets (some with a
// window counter) and any packed reply, its numbers mostly -1 to 3 so that
// runs' levels and their allowed takes parse: it must not panic, refuses
// only with errTakeReply, and each take it accepts gets a reply of its
// shape: -1 alone, or 4 numbers and 2 (3 with a window counter) a bucket.
//
//	go test -run X -fuzz FuzzSplitNumbers -fuzztime 60s -fuzzminimizetime 1x ./bucket/
func FuzzSplitNumbers(f *testing.F) {
	f.Add([]byte{0x01, 0x01}, []byte{})
	f.Fuzz(func(t *testing.T, shapes, numbers []byte) {
		if len(shapes) > 64 {
			shapes = shapes[:64]
		}
		var takes []*queuedTake
		for _, s := range shapes {
			takes = append(takes, splitTake(1+int(s&3), s&4 != 0))
		}
		var nums []float64
		for i := 0; i+8 <= len(numbers); i += 8 {
			v := math.Float64frombits(binary.LittleEndian.Uint64(numbers[i:]))
			if b := numbers[i]; b < 0xc0 {
				v = float64(int(b%5) - 1)
			}
			nums = append(nums, v)
		}
		if nums == nil {
			nums = []float64{}
		}
		if err := splitNumbers(batchNumbers{f: nums}, takes); err != nil {
			if !errors.Is(err, errTakeReply) {
				t.Fatalf("error %v is not errTakeReply", err)
			}
			return
		}
		for i, q := range takes {
			n := (len(q.args) - 3) / 6
			if len(q.reply) != 1 && len(q.reply) != 4+2*n && len(q.reply) != 4+3*n {
				t.Fatalf("take %d of %d buckets: reply %v", i, n, q.reply)
			}
		}
	})
}

// splitReplies is splitNumbers of an array reply, flat: what the tests
// written for the array form (before packed runs) feed the batcher's
// reader; no production code builds one.
func splitReplies(flat []int64, takes []*queuedTake) error {
	return splitNumbers(batchNumbers{i: flat}, takes)
}
