package proxy

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

func TestFillTimeIsExact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     bucket.Limit
		level int64
		want  time.Duration
	}{
		{"1 USD an hour in µUSD, from empty", bucket.Limit{Capacity: 1_000_000, Rate: 1_000_000, Per: time.Hour}, 0, time.Hour},
		{"1000 tokens a day, half full", bucket.Limit{Capacity: 1000, Rate: 1000, Per: 24 * time.Hour}, 500, 12 * time.Hour},
		{"rounds up to the nanosecond", bucket.Limit{Capacity: 3, Rate: 3, Per: time.Nanosecond * 10}, 2, 4},
		{"full", bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}, 10, 0},
		{"in debt", bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}, -5, 15 * time.Second},
	} {
		if got := fillTime(tc.l, tc.level); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if ceilSeconds(fillTime(bucket.Limit{Capacity: 1_000_000, Rate: 1_000_000, Per: time.Hour}, 0)) != 3600 {
		t.Error("w for 1 USD an hour is not 3600")
	}
}

func TestGoDurationAndCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 250 * time.Millisecond: "250ms", 90 * time.Second: "1m30s",
		1500*time.Microsecond + 1: "2ms", 6 * time.Minute: "6m0s",
	} {
		if got := goDuration(d); got != want {
			t.Errorf("goDuration(%v) = %q, want %q", d, got, want)
		}
	}
	// appendGoDuration writes what time.Duration.String writes of the
	// duration rounded up to the millisecond.
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 20000 {
		d := time.Duration(r.Int64N(int64(1 << (10 + i%44))))
		want := ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
		if d <= 0 {
			want = "0s"
		}
		if got := string(appendGoDuration(nil, d)); got != want {
			t.Fatalf("appendGoDuration(%d) = %q, want %q", d, got, want)
		}
	}
	if ceilSeconds(1) != 1 || ceilSeconds(time.Second) != 1 || ceilSeconds(time.Second+1) != 2 || ceilSeconds(0) != 0 {
		t.Error("ceilSeconds does not round up")
	}
	// Near math.MaxInt64 (fillTime saturates there) rounding up must not
	// overflow into a negative figure.
	if got, want := ceilSeconds(math.MaxInt64), int64(math.MaxInt64/int64(time.Second))+1; got != want {
		t.Errorf("ceilSeconds(MaxInt64) = %d, want %d", got, want)
	}
	if got, want := ceilMS(math.MaxInt64), int64(math.MaxInt64/int64(time.Millisecond))+1; got != want {
		t.Errorf("ceilMS(MaxInt64) = %d, want %d", got, want)
	}
	if got := string(appendGoDuration(nil, math.MaxInt64)); got != "2562047h47m16.855s" {
		t.Errorf("appendGoDuration(MaxInt64) = %q", got)
	}
}

// appendQuoted quotes as strconv.AppendQuote does, plain names and others.
func TestAppendQuotedIsAppendQuote(t *testing.T) {
	for _, s := range []string{"", "user-tpm", "a b~", `a"b`, `a\b`, "tab\there", "é", "\x7f", "日本", "\xff"} {
		if got, want := string(appendQuoted([]byte("x"), s)), string(strconv.AppendQuote([]byte("x"), s)); got != want {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
}
