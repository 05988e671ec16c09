package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
)

// Chart geometry, in SVG user units (CSS pixels at 100 %).
const (
	chartW   = 760.0
	chartH   = 240.0
	padLeft  = 70.0
	padRight = 20.0
	padTop   = 16.0
	padBot   = 30.0
	hbarH    = 22.0 // one horizontal bar's row
	hbarGap  = 6.0
	hbarName = 180.0 // the label column of horizontal bars
)

// view is what the template draws: the report plus every coordinate,
// computed here so that the template only prints numbers and escaped text.
type view struct {
	*Report
	DayBars   []bar
	DayTicks  []tick
	YTicks    []tick
	Burn      burn
	ModelBars []bar
	UserBars  []bar
	ModelsH   float64
	UsersH    float64
	W, H      float64
	PlotLeft  float64
	PlotRight float64
	PlotTop   float64
	PlotBot   float64
}

type bar struct {
	X, Y, W, H float64
	Label      string // the tooltip / row label
	Value      string
	TextY      float64
}

type tick struct {
	Pos   float64
	Label string
	Value int64 // micro-USD, of a y tick
}

// burn is the burn-down chart: remaining budget (or cumulative spend
// without a budget) at each day's end, and the ideal line.
type burn struct {
	HasBudget                  bool
	Points                     []point
	Line                       string // the polyline's points attribute
	IdealX1, IdealY1           float64
	IdealX2, IdealY2           float64
	YTicks                     []tick
	ZeroY                      float64
	OverBudget                 bool
	RemainingLabel, BudgetText string
}

type point struct {
	X, Y  float64
	Label string
}

// Render writes r as one self-contained HTML page. Errors: w's.
func Render(w io.Writer, r *Report) error {
	v := &view{Report: r, W: chartW, H: chartH, PlotLeft: padLeft, PlotRight: chartW - padRight, PlotTop: padTop, PlotBot: chartH - padBot}
	plotW, plotH := chartW-padLeft-padRight, chartH-padTop-padBot
	n := float64(len(r.Days))
	usd := pageUSD(r)

	// Spend per day.
	var maxDay int64 = 1
	for _, d := range r.Days {
		maxDay = max(maxDay, d.CostMicroUSD)
	}
	dayAxis := newYAxis(0, maxDay, padTop, plotH)
	v.YTicks = dayAxis.Ticks
	slot := plotW / n
	for i, d := range r.Days {
		h := plotH * float64(d.CostMicroUSD) / float64(dayAxis.Hi)
		value := usd(d.CostMicroUSD)
		if d.Future { // a day still to come has no spend yet, not a spend of $0.00
			value = "not yet"
		}
		v.DayBars = append(v.DayBars, bar{X: padLeft + float64(i)*slot + slot*0.15, Y: padTop + plotH - h, W: slot * 0.7, H: h,
			Label: d.Date.Format("Mon 2 Jan 2006"), Value: value})
		if i == 0 || (i+1)%5 == 0 {
			v.DayTicks = append(v.DayTicks, tick{Pos: padLeft + (float64(i)+0.5)*slot, Label: strconv.Itoa(i + 1)})
		}
	}

	// Burn-down: remaining budget at each day's end against the straight
	// line from the whole budget on the 1st to nothing at the month's end.
	b := &v.Burn
	b.HasBudget = r.Budget > 0
	lo, hi := int64(0), max(r.Budget, r.Total.CostMicroUSD, 1)
	if b.HasBudget {
		lo, hi = min(0, r.Budget-r.Total.CostMicroUSD), r.Budget
	}
	burnAxis := newYAxis(lo, hi, padTop, plotH)
	b.YTicks = burnAxis.Ticks
	y := func(v int64) float64 {
		return padTop + plotH*(float64(burnAxis.Hi)-float64(v))/math.Max(float64(burnAxis.Hi)-float64(burnAxis.Lo), 1)
	}
	b.ZeroY = y(0)
	b.IdealX1, b.IdealY1, b.IdealX2, b.IdealY2 = padLeft, y(hi), padLeft+plotW, y(0)
	if !b.HasBudget {
		b.IdealY1 = y(0)
		b.IdealY2 = y(r.Total.CostMicroUSD)
	}
	line := fmt.Sprintf("%.1f,%.1f", padLeft, y(map[bool]int64{true: r.Budget, false: 0}[b.HasBudget]))
	for i, d := range r.Days {
		if d.Future {
			break
		}
		val := d.Cumulative
		if b.HasBudget {
			val = r.Budget - d.Cumulative
		}
		p := point{X: padLeft + float64(i+1)*slot, Y: y(val), Label: d.Date.Format("2 Jan") + ": " + usd(val)}
		b.Points = append(b.Points, p)
		line += fmt.Sprintf(" %.1f,%.1f", p.X, p.Y)
	}
	b.Line = line
	if b.HasBudget {
		b.BudgetText = usd(r.Budget)
		b.RemainingLabel = usd(r.Budget - r.Total.CostMicroUSD)
		b.OverBudget = r.Total.CostMicroUSD > r.Budget
	}

	v.ModelBars, v.ModelsH = hbars(r.Models, usd)
	v.UserBars, v.UsersH = hbars(r.Users, usd)
	t, err := page.Clone()
	if err != nil {
		return err
	}
	return t.Funcs(template.FuncMap{"usd": usd}).Execute(w, v)
}

// pageUSD is how the page writes an amount: USD (to the cent, an amount
// under a cent to the micro-dollar), or, when the page shows any amount
// under a cent but not zero, every amount to the micro-dollar, so that
// one page does not mix "$0.02" with "$0.007521" and its rows add up to
// its total as printed (trial3: $0.02 + $0.007521 + $0.002706 under a
// total of $0.03).
func pageUSD(r *Report) func(int64) string {
	subCent := func(m int64) bool { return m != 0 && m > -10_000 && m < 10_000 }
	exact := subCent(r.Total.CostMicroUSD) || subCent(r.Budget) || subCent(r.Budget-r.Total.CostMicroUSD)
	for _, d := range r.Days {
		exact = exact || subCent(d.CostMicroUSD) || subCent(d.Cumulative) || (r.Budget > 0 && subCent(r.Budget-d.Cumulative))
	}
	for _, rows := range [][]Row{r.Models, r.Users} {
		for _, x := range rows {
			exact = exact || subCent(x.CostMicroUSD)
		}
	}
	if !exact {
		return USD
	}
	return func(m int64) string { return usdFixed(m, 6) }
}

// hbars lays out one horizontal bar per row, scaled to the largest spend,
// each labelled with usd of its spend.
func hbars(rows []Row, usd func(int64) string) ([]bar, float64) {
	var most int64 = 1
	for _, r := range rows {
		most = max(most, r.CostMicroUSD)
	}
	width := chartW - hbarName - 110
	var out []bar
	for i, r := range rows {
		y := padTop + float64(i)*(hbarH+hbarGap)
		out = append(out, bar{X: hbarName, Y: y, W: math.Max(1, width*float64(r.CostMicroUSD)/float64(most)), H: hbarH,
			Label: short(r.Name), Value: usd(r.CostMicroUSD), TextY: y + hbarH*0.7})
	}
	return out, padTop*2 + float64(len(rows))*(hbarH+hbarGap)
}

// yAxis is the labelled axis of a chart whose values run from lo to hi
// (micro-USD): one round step (1, 2 or 5 × a power of ten micro-USD, the
// smallest for which at most 5 intervals reach from a multiple at or below
// lo to one at or above hi), the axis running from that bottom multiple
// to that top one, so that the tallest bar and the lowest point sit under
// a label (trial9: a $0.001936 day under ticks ending at $0.0015), and a
// tick at each multiple, labelled with the decimals the step needs (at
// least cents) so that the labels of one axis are distinct and alike:
// "$0.00 $0.01 $0.02 $0.03 $0.04", not the quarters of hi ("$0.00
// $0.008574 $0.02 $0.03 $0.03", trial3). Pos runs from top+plotH at the
// axis bottom to top at its top. An empty range (hi ≤ lo) has the one
// level lo; an end that would pass the int64 range (an amount within one
// step of ±$9.2 trillion) stays at hi or lo, with the last tick inside.
type yAxis struct {
	Lo, Hi int64 // the axis ends, micro-USD: Lo ≤ lo, Hi ≥ hi
	Ticks  []tick
}

// newYAxis lays out the axis of values lo to hi (micro-USD) over plotH
// units from top; see yAxis.
func newYAxis(lo, hi int64, top, plotH float64) yAxis {
	if hi <= lo {
		return yAxis{Lo: lo, Hi: lo, Ticks: []tick{{Pos: top + plotH, Label: usdFixed(lo, 2), Value: lo}}}
	}
	var s int64
search:
	for m := int64(1); ; m *= 10 {
		for _, k := range [...]int64{1, 2, 5} {
			// m ≤ 10^18: k·m fits in an int64 (k = 1 at m = 10^18); the
			// interval count is a difference of two int64s, exact as a
			// uint64.
			if m >= 1e18 || uint64(ceilDiv(hi, k*m))-uint64(floorDiv(lo, k*m)) <= 5 {
				s = k * m
				break search
			}
		}
	}
	a := yAxis{Lo: lo, Hi: hi}
	if q := ceilDiv(hi, s); q <= math.MaxInt64/s {
		a.Hi = q * s
	}
	if q := floorDiv(lo, s); q >= math.MinInt64/s {
		a.Lo = q * s
	}
	decimals := 6
	for d := int64(10); decimals > 2 && s%d == 0; d *= 10 {
		decimals--
	}
	span := float64(a.Hi) - float64(a.Lo)
	for v := ceilDiv(a.Lo, s) * s; v <= a.Hi; v += s {
		a.Ticks = append(a.Ticks, tick{Pos: top + plotH*(float64(a.Hi)-float64(v))/span, Label: usdFixed(v, decimals), Value: v})
		if v > a.Hi-s { // the next step would pass the top (or overflow)
			break
		}
	}
	return a
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// ceilDiv is a/b rounded toward plus infinity (b > 0).
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}

// usdFixed formats micro-USD as dollars with the given decimals (2 to 6),
// rounded half away from zero, e.g. usdFixed(1234567, 2) = "$1.23",
// usdFixed(-5000, 3) = "-$0.005".
func usdFixed(micro int64, decimals int) string {
	sign := ""
	u := uint64(micro)
	if micro < 0 {
		sign, u = "-", uint64(-(micro+1))+1
	}
	unit := uint64(1)
	for range 6 - decimals {
		unit *= 10
	}
	q := u/unit + (u%unit*2)/unit // rounded half up
	scale := uint64(1)
	for range decimals {
		scale *= 10
	}
	whole := strconv.FormatUint(q/scale, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return fmt.Sprintf("%s$%s.%0*d", sign, whole, decimals, q%scale)
}

// USD formats micro-USD as dollars rounded to the cent, e.g. "$1,234.57"
// or "-$0.50"; an amount under a cent (but not zero) to the micro-dollar,
// e.g. "$0.004999", so that a small budget does not read as $0.00.
func USD(micro int64) string {
	sign := ""
	if micro < 0 {
		sign = "-"
		micro = -max(micro, -math.MaxInt64)
	}
	if micro > 0 && micro < 10_000 {
		return fmt.Sprintf("%s$0.%06d", sign, micro)
	}
	cents := (micro + 5000) / 10000
	whole := strconv.FormatInt(cents/100, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return fmt.Sprintf("%s$%s.%02d", sign, whole, cents%100)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"usd": USD,
	"f":   func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) },
	"add": func(a, b float64) float64 { return a + b },
	"rfc": func(t interface{ Format(string) string }) string { return t.Format("2006-01-02T15:04:05Z07:00") },
	// counted is "1 request", "2 requests": n and one or many.
	"counted": func(n int64, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.FormatInt(n, 10) + " " + many
	},
}).Parse(pageHTML))

// short cuts a chart label to 28 characters (the tables keep the whole
// name).
func short(s string) string {
	if r := []rune(s); len(r) > 28 {
		return string(r[:27]) + "…"
	}
	return s
}
