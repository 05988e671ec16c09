package main

import (
	"slices"
	"testing"
	"time"
)

// TestParseFlags: the lists, -quick's short runs (unless -requests or
// -duration is given), and the errors a bad value gets.
func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-sizes", "2k,300", "-concurrency", "4", "-stream", "sse", "-mode", "warm", "-targets", "bare,memory", "-q"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Sizes, []int{2048, 300}) || !slices.Equal(o.Concurrency, []int{4}) || !slices.Equal(o.Streams, []bool{true}) ||
		!slices.Equal(o.Warm, []bool{true}) || !slices.Equal(o.Targets, []string{"bare", "memory"}) || o.Progress != nil {
		t.Errorf("options %+v", o)
	}
	if o.Requests != 5000 || o.Duration != 3*time.Second {
		t.Errorf("default run bounds %d, %v", o.Requests, o.Duration)
	}
	o, err = parseFlags([]string{"-quick"})
	if err != nil || o.Requests != 300 || o.Duration != 400*time.Millisecond || len(o.Streams) != 2 || len(o.Warm) != 2 {
		t.Errorf("-quick: %d requests, %v, streams %v, modes %v, %v", o.Requests, o.Duration, o.Streams, o.Warm, err)
	}
	o, err = parseFlags([]string{"-quick", "-requests", "50"})
	if err != nil || o.Requests != 50 || o.Duration != 400*time.Millisecond {
		t.Errorf("-quick -requests 50: %d requests, %v, %v", o.Requests, o.Duration, err)
	}
	for _, bad := range [][]string{{"-sizes", "big"}, {"-concurrency", "x"}, {"-stream", "maybe"}, {"-mode", "hot"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestParseRedisWorkFlags: the -redis-work options, their defaults, and a
// bad list item.
func TestParseRedisWorkFlags(t *testing.T) {
	o, err := parseRedisWorkFlags([]string{"-redis-work", "-stores", "cluster", "-concurrency", "2,8", "-rounds", "5", "-compare", "/tmp/b", "-callgrind", "-pace-floors", "-q"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Stores, []string{"cluster"}) || !slices.Equal(o.Concurrency, []int{2, 8}) || o.Rounds != 5 || o.Compare != "/tmp/b" || !o.Callgrind || !o.PaceFloors || o.Progress != nil {
		t.Errorf("options %+v", o)
	}
	o, err = parseRedisWorkFlags([]string{"-redis-work"})
	if err != nil || o.Requests != 4000 || o.Duration != 5*time.Second || o.Rounds != 3 || len(o.Stores) != 2 || !slices.Equal(o.Concurrency, []int{1, 32}) || o.Callgrind || o.PaceFloors {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	if _, err := parseRedisWorkFlags([]string{"-redis-work", "-concurrency", "x"}); err == nil {
		t.Error("-concurrency x: no error")
	}
}
