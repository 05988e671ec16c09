package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmguard/llmguard/ledger"
)

var newYork = mustZone("America/New_York")

func mustZone(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// hostileUser is a user name that would be markup if not escaped.
const hostileUser = `<script>alert("x")</script>&mallory`

// writeLedger writes a generated ledger file for November 2026 (New York
// time) and returns its path: acme's requests on days 1 to 20 by three
// users on two models, plus records that must not count (another tenant,
// October, December in New York time).
func writeLedger(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	add := func(r ledger.Record) {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	users := []string{"alice", "bob", hostileUser}
	models := []string{"gpt-4o-mini", "claude-sonnet-4-5"}
	for day := 1; day <= 20; day++ {
		for i := range day % 4 {
			add(ledger.Record{TS: time.Date(2026, 11, day, 9+i, 30, 0, 0, newYork).UTC(), RequestID: "r", Tenant: "acme",
				User: users[(day+i)%3], Model: models[(day*i)%2], Status: 200, InputTokens: 1000, OutputTokens: 200,
				CostMicroUSD: int64(250_000 * (1 + (day+i)%3))})
		}
	}
	add(ledger.Record{TS: time.Date(2026, 11, 5, 12, 0, 0, 0, newYork), Tenant: "other", User: "zed", Model: "gpt-4o", Status: 200, CostMicroUSD: 9_000_000})
	add(ledger.Record{TS: time.Date(2026, 10, 31, 23, 0, 0, 0, newYork), Tenant: "acme", User: "alice", Model: "gpt-4o-mini", Status: 200, CostMicroUSD: 7_000_000})
	add(ledger.Record{TS: time.Date(2026, 12, 1, 0, 0, 0, 0, newYork), Tenant: "acme", User: "alice", Model: "gpt-4o-mini", Status: 200, CostMicroUSD: 7_000_000})
	b.WriteString("torn line {\n")
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantTotal is writeLedger's acme spend in November, in micro-USD, and its
// request count.
func wantTotal() (int64, int64) {
	var c, n int64
	for day := 1; day <= 20; day++ {
		for i := range day % 4 {
			c += int64(250_000 * (1 + (day+i)%3))
			n++
		}
	}
	return c, n
}

func build(t *testing.T, budget int64) *Report {
	t.Helper()
	recs, err := ledger.ReadFiles(writeLedger(t))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Build(recs, Options{Tenant: "acme", Year: 2026, Month: time.November, Location: newYork, BudgetMicroUSD: budget,
		BudgetName: "acme-monthly", Now: time.Date(2026, 11, 21, 0, 0, 0, 0, newYork)})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Build keeps the tenant's records of the month in its zone and adds them
// up per day, model and user; the breakdowns add up to the total.
func TestBuild(t *testing.T) {
	rep := build(t, 50_000_000)
	cost, n := wantTotal()
	if rep.Total.CostMicroUSD != cost || rep.Total.Requests != n {
		t.Fatalf("total %d µUSD over %d, want %d over %d", rep.Total.CostMicroUSD, rep.Total.Requests, cost, n)
	}
	if len(rep.Days) != 30 || rep.Days[29].Cumulative != cost || !rep.Days[20].Future || rep.Days[19].Future {
		t.Errorf("days: %d, last cumulative %d, future from day 21", len(rep.Days), rep.Days[29].Cumulative)
	}
	if rep.Start.Format(time.RFC3339) != "2026-11-01T00:00:00-04:00" || rep.End.Format(time.RFC3339) != "2026-12-01T00:00:00-05:00" {
		t.Errorf("period %v – %v", rep.Start, rep.End) // EDT to EST: 1 Nov 2026 is the change
	}
	for _, rows := range [][]Row{rep.Models, rep.Users} {
		var sum int64
		for _, r := range rows {
			sum += r.CostMicroUSD
		}
		if sum != cost {
			t.Errorf("rows %v add up to %d, want %d", rows, sum, cost)
		}
	}
	if len(rep.Models) != 2 || len(rep.Users) != 3 {
		t.Errorf("models %v users %v", rep.Models, rep.Users)
	}
}

// More than MaxRows users fold into one "(N others)" row, keeping the sum.
func TestBuildFoldsRows(t *testing.T) {
	var recs []ledger.Record
	for i := range 100 {
		recs = append(recs, ledger.Record{TS: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Tenant: "a", User: "u" + string(rune('A'+i%26)) + string(rune('a'+i/26)), CostMicroUSD: int64(i + 1)})
	}
	rep, err := Build(recs, Options{Tenant: "a", Year: 2026, Month: 11})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, u := range rep.Users {
		sum += u.CostMicroUSD
	}
	if len(rep.Users) != MaxRows || sum != 5050 || rep.Users[MaxRows-1].Name != "(76 others)" {
		t.Errorf("%d rows, sum %d, last %q", len(rep.Users), sum, rep.Users[len(rep.Users)-1].Name)
	}
}

// The page is self-contained (no URL to fetch, no script) and escapes
// every text.
// A page without a budget says where one comes from: a trial's tenant
// had a daily usd quota (no monthly one) and read only "No budget given".
func TestRenderNoBudgetSaysWhereOneComesFrom(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, build(t, 0)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "No budget given") || !strings.Contains(page, "<code>period: month</code>") || !strings.Contains(page, "<code>--budget-usd</code>") {
		t.Errorf("a page without a budget does not say how to give one")
	}
}

func TestRenderSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, build(t, 50_000_000)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"http://", "https://", "<script", "@import", "url(", "src="} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;mallory") {
		t.Errorf("hostile user name not escaped")
	}
	if n := strings.Count(page, `<rect class="bar day"`); n != 30 {
		t.Errorf("%d day bars, want 30", n)
	}
	// Days after Now (21–30 November) have no spend yet: their bars say
	// so, not $0.00; the 20th, the last day with records, has its spend.
	if n := strings.Count(page, `: not yet</title>`); n != 10 {
		t.Errorf("%d day bars say \"not yet\", want the 10 days after Now", n)
	}
	if !strings.Contains(page, "<title>Fri 20 Nov 2026: $") || strings.Contains(page, "<title>Sat 21 Nov 2026: $") {
		t.Errorf("the 20th should show its spend and the 21st none")
	}
}

func TestUSD(t *testing.T) {
	for micro, want := range map[int64]string{0: "$0.00", 4_999: "$0.004999", 5_000: "$0.005000", 9_999: "$0.009999", 10_000: "$0.01", 14_999: "$0.01", -42: "-$0.000042", 1_234_567_890: "$1,234.57", -500_000: "-$0.50", 100_000_000_000: "$100,000.00"} {
		if got := USD(micro); got != want {
			t.Errorf("USD(%d) = %s, want %s", micro, got, want)
		}
	}
}

// An axis is labelled at round steps, every label with the same
// decimals: trial3's $0.034296 month read "$0.00 $0.008574 $0.02 $0.03
// $0.03" (quarters of the top, each rounded its own way); and the labels
// reach past the ends of the values (trial9: ticks to $0.0015 under a
// $0.001936 bar).
func TestYTicksRoundAndAlike(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int64
		want   string
	}{
		{0, 34_296, "$0.00 $0.01 $0.02 $0.03 $0.04"},
		{0, 50_000, "$0.00 $0.01 $0.02 $0.03 $0.04 $0.05"},
		{0, 7_500, "$0.000 $0.002 $0.004 $0.006 $0.008"},
		{0, 1_936, "$0.0000 $0.0005 $0.0010 $0.0015 $0.0020"},
		{0, 12, "$0.000000 $0.000005 $0.000010 $0.000015"},
		{-4_000, 10_000, "-$0.005 $0.000 $0.005 $0.010"},
		{-40_000, 10_000, "-$0.04 -$0.03 -$0.02 -$0.01 $0.00 $0.01"},
		{0, 500_000_000, "$0.00 $100.00 $200.00 $300.00 $400.00 $500.00"},
		{0, 1_234_567_890, "$0.00 $500.00 $1,000.00 $1,500.00"},
		{0, 1, "$0.000000 $0.000001"},
		{0, 0, "$0.00"},
		// The one range whose top cannot round up in an int64.
		{0, math.MaxInt64, "$0.00 $1,000,000,000,000.00 $2,000,000,000,000.00 $3,000,000,000,000.00 $4,000,000,000,000.00 $5,000,000,000,000.00 $6,000,000,000,000.00 $7,000,000,000,000.00 $8,000,000,000,000.00 $9,000,000,000,000.00"},
	} {
		ticks := newYAxis(tc.lo, tc.hi, 10, 200).Ticks
		var labels []string
		for i, tk := range ticks {
			labels = append(labels, tk.Label)
			if tk.Pos < 10 || tk.Pos > 210 || (i > 0 && tk.Pos >= ticks[i-1].Pos) {
				t.Errorf("[%d, %d]: tick %s at %.1f, outside the plot or not above the one before", tc.lo, tc.hi, tk.Label, tk.Pos)
			}
		}
		if got := strings.Join(labels, " "); got != tc.want {
			t.Errorf("[%d, %d]: labels %s, want %s", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// An axis covers its values: its lowest tick is at or below lo and at the
// plot's bottom, its highest at or above hi and at the plot's top, and
// its ticks are the consecutive multiples of one round step (1, 2 or 5 ×
// a power of ten micro-USD), at most 6 of them. Amounts tiny, on a step,
// just above a step, just below one, large, and below zero (a burn-down
// over budget).
func TestYAxisCoversTheValues(t *testing.T) {
	const top, plotH = 16.0, 194.0
	round := func(s int64) bool {
		for s%10 == 0 {
			s /= 10
		}
		return s == 1 || s == 2 || s == 5
	}
	for _, r := range [][2]int64{
		{0, 1}, {0, 2}, {0, 3}, {0, 7}, {0, 11}, // tiny: micro-dollars
		{0, 1_936}, {0, 1_500}, {0, 1_501}, {0, 1_999}, {0, 2_001}, // trial9's day, a step, just above, around
		{0, 5_000}, {0, 5_001}, {0, 9_999}, {0, 10_000}, {0, 10_001}, {0, 34_296},
		{0, 1_000_000}, {0, 1_000_001}, {0, 2_500_000}, {0, 123_456_789},
		{0, 50_000_000_000}, {0, 50_000_000_001}, {0, 9_000_000_000_000_000},
		{-1, 1}, {-4_000, 10_000}, {-10_001, 1}, {-1_936, 50_000}, {-7_000_000, 5_000_000},
	} {
		lo, hi := r[0], r[1]
		a := newYAxis(lo, hi, top, plotH)
		ticks := a.Ticks
		if len(ticks) < 2 || len(ticks) > 6 {
			t.Errorf("[%d, %d]: %d ticks, want 2 to 6", lo, hi, len(ticks))
			continue
		}
		first, last := ticks[0], ticks[len(ticks)-1]
		if first.Value > lo || last.Value < hi {
			t.Errorf("[%d, %d]: ticks %s to %s do not cover the values", lo, hi, first.Label, last.Label)
		}
		if a.Lo != first.Value || a.Hi != last.Value || first.Pos != top+plotH || last.Pos != top {
			t.Errorf("[%d, %d]: axis [%d, %d], ticks %d at %.1f to %d at %.1f: the end ticks are not the plot's ends", lo, hi, a.Lo, a.Hi, first.Value, first.Pos, last.Value, last.Pos)
		}
		step := ticks[1].Value - ticks[0].Value
		if !round(step) {
			t.Errorf("[%d, %d]: step %d micro-USD is not 1, 2 or 5 × a power of ten", lo, hi, step)
		}
		for i, tk := range ticks {
			if tk.Value%step != 0 || (i > 0 && tk.Value-ticks[i-1].Value != step) {
				t.Errorf("[%d, %d]: tick %d (%s) is not the next multiple of %d", lo, hi, tk.Value, tk.Label, step)
			}
		}
	}
}

// The spend-per-day chart of trial9's month (a day of $0.001936 the
// tallest): a label at or above the tallest bar's top ($0.0020 on the
// plot's top line), the bar drawn to that scale (its top 64/2000 of the
// plot's 194 units below the top line); the burn-down's top label at or
// above its $0.002636 cumulative spend, its points drawn to that scale.
func TestRenderAxisAboveTallestBar(t *testing.T) {
	day := func(d int, cost, cum int64) Day {
		return Day{Date: time.Date(2026, 12, d, 0, 0, 0, 0, time.UTC), Row: Row{CostMicroUSD: cost}, Cumulative: cum}
	}
	r := &Report{Tenant: "acme", Total: Row{CostMicroUSD: 2_636, Requests: 3},
		Days: []Day{day(1, 700, 700), day(2, 1_936, 2_636)}}
	var b bytes.Buffer
	if err := Render(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	tickRe := regexp.MustCompile(`<line class="grid" [^>]* y1="([0-9.]+)"[^>]*/><text [^>]*>([^<]*)</text>`)
	barRe := regexp.MustCompile(`<rect class="bar day" [^>]* y="([0-9.]+)"`)
	for _, chart := range []struct{ id, top string }{{"days", "$0.0020"}, {"burn", "$0.003"}} {
		i := strings.Index(page, `<svg id="`+chart.id+`"`)
		svg := page[i : i+strings.Index(page[i:], "</svg>")]
		ticks := tickRe.FindAllStringSubmatch(svg, -1)
		if len(ticks) == 0 {
			t.Fatalf("%s: no ticks", chart.id)
		}
		topTick := ticks[len(ticks)-1]
		if topTick[2] != chart.top || topTick[1] != "16.0" {
			t.Errorf("%s: top tick %s at y=%s, want %s at the plot's top (16.0)", chart.id, topTick[2], topTick[1], chart.top)
		}
	}
	bars := barRe.FindAllStringSubmatch(page[strings.Index(page, `<svg id="days"`):], -1)
	if len(bars) != 2 || bars[1][1] != "22.2" {
		t.Errorf("day bars %q: want the $0.001936 day's top at y=22.2 (16 + 194 × 64/2000)", bars)
	}
	points := regexp.MustCompile(`<circle class="point" cx="[0-9.]+" cy="([0-9.]+)"`).FindAllStringSubmatch(page, -1)
	if len(points) != 2 || points[1][1] != "39.5" {
		t.Errorf("burn-down points %q: want the $0.002636 month-end at y=39.5 (16 + 194 × 364/3000)", points)
	}
}

// One page writes every amount alike: to the cent when none is under a
// cent, else every one to the micro-dollar (trial3: "$0.02" beside
// "$0.007521" and "$0.002706" under a total of "$0.03").
func TestRenderAmountsAlike(t *testing.T) {
	render := func(r *Report) string {
		var b bytes.Buffer
		if err := Render(&b, r); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	// writeLedger's amounts are whole quarters of a dollar: cents.
	page := render(build(t, 50_000_000))
	if !strings.Contains(page, `<b id="budget">$50.00</b>`) || strings.Contains(page, ".250000") {
		t.Errorf("a page of whole cents is not written to the cent")
	}
	small := &Report{Tenant: "acme", Total: Row{CostMicroUSD: 34_296, Requests: 7},
		Models: []Row{{Name: "gpt-4o", CostMicroUSD: 24_069}, {Name: "claude-sonnet-4-5", CostMicroUSD: 7_521}, {Name: "gpt-4o-mini", CostMicroUSD: 2_706}},
		Users:  []Row{{Name: "bob", CostMicroUSD: 23_567}, {Name: "alice", CostMicroUSD: 10_729}},
		Days:   []Day{{Date: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC), Row: Row{CostMicroUSD: 34_296}, Cumulative: 34_296}}}
	page = render(small)
	for _, want := range []string{`<b id="total-spend">$0.034296</b>`, "<td>$0.024069</td>", "<td>$0.007521</td>", "<td>$0.010729</td>", "Total $0.034296 (34296 micro-USD)"} {
		if !strings.Contains(page, want) {
			t.Errorf("page with sub-cent amounts lacks %q", want)
		}
	}
	if strings.Contains(page, "<td>$0.02</td>") || strings.Contains(page, "$0.03</b>") || strings.Contains(page, ": $0.02<") {
		t.Errorf("page with sub-cent amounts still rounds some to the cent")
	}
}

func TestParseMonth(t *testing.T) {
	if y, m, err := ParseMonth("2026-11"); err != nil || y != 2026 || m != time.November {
		t.Errorf("2026-11: %d %v %v", y, m, err)
	}
	for _, bad := range []string{"", "2026-13", "2026-00", "2026-1", "26-11", "2026/11", "1969-12", "２０２６-11", "2026-1a", "+026-11"} {
		if _, _, err := ParseMonth(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseMonth: a month parsed is one that Format gives back the same.
func FuzzParseMonth(f *testing.F) {
	for _, s := range []string{"2026-11", "9999-12", "1970-01", "2026-13", "-2026-1", "2026-1\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		y, m, err := ParseMonth(s)
		if err != nil {
			return
		}
		if got := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Format("2006-01"); got != s {
			t.Fatalf("ParseMonth(%q) = %d-%d, formats as %q", s, y, m, got)
		}
	})
}

// A ledger with more than MaxNames users keeps MaxNames apart and adds the
// rest up under "(other)": memory stays bounded, the total exact.
func TestBuilderBoundsNames(t *testing.T) {
	b, err := NewBuilder(Options{Tenant: "a", Year: 2026, Month: 11})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	for i := range MaxNames + 10 {
		b.Add(ledger.Record{TS: ts, Tenant: "a", User: "u" + strconv.Itoa(i), Model: "m", CostMicroUSD: 1})
	}
	if len(b.users) != MaxNames+1 || b.users["(other)"] == nil || b.users["(other)"].Requests != 10 {
		t.Errorf("%d users kept, (other) %+v", len(b.users), b.users["(other)"])
	}
	if rep := b.Report(); rep.Total.CostMicroUSD != MaxNames+10 {
		t.Errorf("total %d", rep.Total.CostMicroUSD)
	}
}

// A hostile ledger of long model and user names (a line may hold 1 MiB,
// ledger.MaxLine; llmguard writes model names of at most 256 bytes) keeps
// at most MaxModels models apart, each name cut to MaxNameBytes, and
// renders a page of bounded size: before, 100,000 names were kept whole
// (up to 100 GB) and the page listed 25 of them whole.
func TestBuilderBoundsLongNames(t *testing.T) {
	b, err := NewBuilder(Options{Tenant: "a", Year: 2026, Month: 11})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("é", 32<<10) // 64 KiB, two bytes a rune
	const records = MaxModels + 500
	for i := range records {
		// Names that differ in their first bytes stay apart.
		b.Add(ledger.Record{TS: ts, Tenant: "a", User: strconv.Itoa(i) + long, Model: strconv.Itoa(i) + long, CostMicroUSD: int64(i + 1)})
	}
	if len(b.models) != MaxModels+1 || b.models[ledger.OtherName] == nil || b.models[ledger.OtherName].Requests != records-MaxModels {
		t.Errorf("%d models kept, want %d and %s with %d requests (%+v)", len(b.models), MaxModels+1, ledger.OtherName, records-MaxModels, b.models[ledger.OtherName])
	}
	for _, m := range []map[string]*Row{b.models, b.users} {
		for name := range m {
			if len(name) > MaxNameBytes || !utf8.ValidString(name) {
				t.Fatalf("kept a name of %d bytes (valid UTF-8 %v), want at most %d", len(name), utf8.ValidString(name), MaxNameBytes)
			}
		}
	}
	rep := b.Report()
	if rep.Total.CostMicroUSD != records*(records+1)/2 {
		t.Errorf("total %d, want %d", rep.Total.CostMicroUSD, records*(records+1)/2)
	}
	var page bytes.Buffer
	if err := Render(&page, rep); err != nil {
		t.Fatal(err)
	}
	// 2 × MaxRows names of at most 256 bytes, the rest of the page a few
	// KiB: well under 25 names of 64 KiB (1.6 MiB).
	if page.Len() > 256<<10 {
		t.Errorf("page of %d bytes", page.Len())
	}
}

// Spend held at the int64 maximum in every sum the report makes (total,
// day, cumulative, the model and user rows and the "(N others)" row),
// never wrapped negative, when absurd usage reports add up past it.
func TestBuildSaturates(t *testing.T) {
	var recs []ledger.Record
	for i := range 13_000 {
		recs = append(recs, ledger.Record{TS: time.Date(2026, 11, 2+i%2, 12, 0, 0, 0, time.UTC), Tenant: "a", Model: "m",
			User: "u" + strconv.Itoa(i%(MaxRows+5)), Status: 200, InputTokens: 1e15, OutputTokens: 1e15, CostMicroUSD: 750_000_000_000_000})
	}
	rep, err := Build(recs, Options{Tenant: "a", Year: 2026, Month: 11})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.CostMicroUSD != math.MaxInt64 || rep.Total.InputTokens != math.MaxInt64 || rep.Total.OutputTokens != math.MaxInt64 {
		t.Errorf("total %+v, want the int64 maximum", rep.Total)
	}
	// Each of the two days holds 6,500 records (4.9e18 µUSD, no wrap);
	// their sum passes the maximum.
	if rep.Days[1].CostMicroUSD != 6500*750_000_000_000_000 || rep.Days[29].Cumulative != math.MaxInt64 {
		t.Errorf("day 2 %d, cumulative at the end %d, want 4.875e18 and the int64 maximum", rep.Days[1].CostMicroUSD, rep.Days[29].Cumulative)
	}
	if rep.Models[0].CostMicroUSD != math.MaxInt64 {
		t.Errorf("model row %d, want the int64 maximum", rep.Models[0].CostMicroUSD)
	}
	for _, u := range rep.Users {
		if u.CostMicroUSD < 0 {
			t.Errorf("user row %q: %d, wrapped", u.Name, u.CostMicroUSD)
		}
	}
}

// The total's counts agree with their nouns: "1 request", "2 requests"
// (trial6 read "over 1 requests").
func TestRenderCountsAgree(t *testing.T) {
	for _, tc := range []struct {
		requests, errors int64
		want             string
	}{
		{1, 0, "over 1 request, 0 errors among them."},
		{2, 1, "over 2 requests, 1 error among them."},
	} {
		r := build(t, 0)
		r.Total.Requests, r.Total.Errors = tc.requests, tc.errors
		var b bytes.Buffer
		if err := Render(&b, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("the page does not say %q", tc.want)
		}
	}
}

// The model and user tables show the cached input and the cache writes
// inside the input: trial24's finance check multiplied a Claude user's
// 4,800 input tokens by the input price and got $0.0444 for a row of
// $0.0342, 4,000 of them being cache reads at a tenth of it and 800 cache
// writes. The parts are summed like the rest, folded rows included.
func TestRenderShowsCachedInput(t *testing.T) {
	var recs []ledger.Record
	for i := range MaxRows + 3 {
		recs = append(recs, ledger.Record{TS: time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC), Tenant: "acme", Model: "claude-sonnet-4-5",
			User: "u" + strconv.Itoa(i), Status: 200, InputTokens: 120, CachedInputTokens: 100, CacheWriteTokens: 20, OutputTokens: 50, CostMicroUSD: 855})
	}
	rep, err := Build(recs, Options{Tenant: "acme", Year: 2026, Month: 11})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(MaxRows + 3)
	if m := rep.Models[0]; m.CachedInputTokens != 100*n || m.CacheWriteTokens != 20*n || m.InputTokens != 120*n {
		t.Errorf("model row %+v, want %d input of which %d cached and %d cache writes", m, 120*n, 100*n, 20*n)
	}
	if last := rep.Users[MaxRows-1]; last.CachedInputTokens != 100*4 || last.CacheWriteTokens != 20*4 {
		t.Errorf("folded row %+v, want the 4 folded users' 400 cached and 80 cache writes", last)
	}
	var b bytes.Buffer
	if err := Render(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<th>Input tokens</th><th>of which cached</th><th>of which cache writes</th><th>Output tokens</th>",
		fmt.Sprintf("<td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>", 120*n, 100*n, 20*n, 50*n),
		"<td>480</td><td>400</td><td>80</td><td>200</td></tr>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
