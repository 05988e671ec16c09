package weigher

import (
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// TestUSDFigureStringAsNumber: a cost written as a numeric string reads as
// the same figure written as a number, out of range too (adv47 read the
// string "1e400" as no cost and the number 1e400 as the $1e12 bound).
func TestUSDFigureStringAsNumber(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int64
	}{
		{"0.25", 250_000},
		{"0.000123", 123},
		{"1e400", 1e18},
		{"1e12", 1e18},
		{"1e-400", 0},
		{"-1e400", 0},
		{"0", 0},
	} {
		num := usdFigure(gjson.Parse(tc.raw))
		str := usdFigure(gjson.Parse(strconv.Quote(tc.raw)))
		if num != tc.want || str != tc.want {
			t.Errorf("cost %s: %d as a number, %d as a string, want %d", tc.raw, num, str, tc.want)
		}
	}
	// A string that is no decimal is no cost.
	for _, s := range []string{`"0.25USD"`, `"None"`, `""`, `"NaN"`, `"-inf"`} {
		if got := usdFigure(gjson.Parse(s)); got != 0 {
			t.Errorf("cost %s: %d, want 0", s, got)
		}
	}
}

// FuzzUSDFigureStringAsNumber: any JSON number reads as the same cost
// written as a string, and no figure reads outside 0 to $1e12.
func FuzzUSDFigureStringAsNumber(f *testing.F) {
	for _, s := range []string{"0.25", "1e400", "-1e400", "1e-400", "0", "123456789012345678901234567890", "1E+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v := gjson.Parse(raw)
		if v.Type == gjson.String {
			if got := usdFigure(v); got < 0 || got > int64(maxBilledUSD*1e6) {
				t.Fatalf("cost %s: %d, outside 0 to %d", raw, got, int64(maxBilledUSD*1e6))
			}
			return
		}
		if v.Type != gjson.Number || !gjson.Valid(raw) {
			return
		}
		num, str := usdFigure(v), usdFigure(gjson.Parse(strconv.Quote(raw)))
		if num != str {
			t.Fatalf("cost %s: %d as a number, %d as a string", raw, num, str)
		}
		if num < 0 || num > int64(maxBilledUSD*1e6) {
			t.Fatalf("cost %s: %d, outside 0 to %d", raw, num, int64(maxBilledUSD*1e6))
		}
	})
}
