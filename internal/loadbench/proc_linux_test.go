package loadbench

import (
	"fmt"
	"os"
	"testing"
)

// TestParseStatTimes: utime and stime are fields 14 and 15 counted after
// the command name's last ')', which may hold spaces and parentheses.
func TestParseStatTimes(t *testing.T) {
	const rest = " S 1 2 3 4 5 6 7 8 9 10 %s %s 0 0 20 0 1 0 100 0 0\n"
	for _, tc := range []struct {
		name      string
		line      string
		user, sys int64 // µs
		ok        bool
	}{
		{name: "plain", line: "42 (llmguard-bench)" + fmt.Sprintf(rest, "250", "17"), user: 2_500_000, sys: 170_000, ok: true},
		{name: "spaces and parentheses in the name", line: "42 (a) b (c))" + fmt.Sprintf(rest, "3", "4"), user: 30_000, sys: 40_000, ok: true},
		{name: "no name", line: "42 S 1 2 3 4 5 6 7 8 9 10 3 4", ok: false},
		{name: "too few fields", line: "42 (x) S 1 2 3 4 5 6 7 8 9 10 3", ok: false},
		{name: "not a number", line: "42 (x)" + fmt.Sprintf(rest, "3", "x"), ok: false},
		{name: "negative", line: "42 (x)" + fmt.Sprintf(rest, "-3", "4"), ok: false},
		{name: "too large for µs", line: "42 (x)" + fmt.Sprintf(rest, "9223372036854775", "4"), ok: false},
	} {
		user, sys, ok := parseStatTimes(tc.line)
		if ok != tc.ok || user != tc.user || sys != tc.sys {
			t.Errorf("%s: %d µs user, %d µs sys, ok %v; want %d, %d, %v", tc.name, user, sys, ok, tc.user, tc.sys, tc.ok)
		}
	}
	// This process's own line parses, and its sum is procCPU's.
	user, sys, err := procTimes(os.Getpid())
	if err != nil || user < 0 || sys < 0 {
		t.Fatalf("own /proc/self/stat: %d, %d, %v", user, sys, err)
	}
}

// FuzzParseStatTimes: any line gives either ok false or two non-negative
// figures that are whole ticks; nothing panics.
func FuzzParseStatTimes(f *testing.F) {
	f.Add("42 (llmguard-bench) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0 1 0 100 0 0\n")
	f.Add("42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 3 4 0")
	f.Add(")")
	f.Fuzz(func(t *testing.T, s string) {
		user, sys, ok := parseStatTimes(s)
		if !ok {
			if user != 0 || sys != 0 {
				t.Fatalf("not ok, yet %d, %d", user, sys)
			}
			return
		}
		if user < 0 || sys < 0 || user%(1e6/clockTicks) != 0 || sys%(1e6/clockTicks) != 0 {
			t.Fatalf("%q: %d µs user, %d µs sys", s, user, sys)
		}
	})
}
