package weigher

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestHeaderCostMicroUSD: LiteLLM's cost header read as micro-USD rounded
// up, bounded, and 0 for anything that is not a positive decimal.
func TestHeaderCostMicroUSD(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int64
	}{
		{"0.25", 250_000},
		{" 0.000415 ", 415},
		{"1.5e-05", 15},
		{"0.0000001", 1}, // rounded up
		{"0.000123", 123},
		{"1e12", 1e18},
		{"1e300", 1e18},
		{"inf", 1e18},
		{"+Inf", 1e18},
		{"1e999", 1e18},
		{"", 0},
		{"0", 0},
		{"0.0", 0},
		{"-5", 0},
		{"-inf", 0},
		{"NaN", 0},
		{"None", 0},
		{"0.25USD", 0},
		{"0,25", 0},
		{"1e-999", 0},
		{strings.Repeat("0", 64), 0},
		{"0." + strings.Repeat("0", 61) + "25", 0}, // 65 bytes
	} {
		if got := HeaderCostMicroUSD([]byte(tc.v)); got != tc.want {
			t.Errorf("HeaderCostMicroUSD(%q) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// FuzzHeaderCostMicroUSD: any header value reads as 0 to $1e12 in
// micro-USD, never panics, and a positive decimal it accepts is never
// read as less than it says.
func FuzzHeaderCostMicroUSD(f *testing.F) {
	for _, s := range []string{"0.25", "1.5e-05", "inf", "NaN", "-1", "", "1e12", "0x1p-2", "1_0", " 7 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got := HeaderCostMicroUSD(v)
		if got < 0 || got > int64(maxBilledUSD*1e6) {
			t.Fatalf("HeaderCostMicroUSD(%q) = %d, outside 0 to %d", v, got, int64(maxBilledUSD*1e6))
		}
		s := strings.TrimSpace(string(v))
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || len(s) > maxCostHeaderBytes || !(f > 0) || math.IsInf(f, 0) {
			return
		}
		if want := math.Min(f, maxBilledUSD) * 1e6; float64(got) < want*(1-1e-9)-1e-6 {
			t.Fatalf("HeaderCostMicroUSD(%q) = %d, below %v", v, got, want)
		}
	})
}
