package report

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium; without it the test is skipped,
// but fails under CI=true, where .ci/run installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found (CI=true: .ci/run installs Debian's chromium)")
	}
	t.Skip("chromium not found; install Debian's chromium to run this test")
	return ""
}

// The report of a generated ledger, served from 127.0.0.1 and opened in
// headless Chromium (driven over the DevTools protocol): it renders to a
// non-blank screenshot; its text names the tenant, the month, the totals,
// a model and a user (the hostile one as text); every bar and point of its
// SVG charts is drawn with a size; and the page logs no error, throws no
// exception and requests nothing but itself.
func TestReportInChromium(t *testing.T) {
	bin := chromiumPath(t)
	rep := build(t, 20_000_000)
	var page bytes.Buffer
	if err := Render(&page, rep); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		if r.URL.Path != "/acme.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page.Bytes())
	}))
	t.Cleanup(srv.Close)
	pageURL := srv.URL + "/acme.html"

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 1600),
	)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	var problems, requests []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				problems = append(problems, fmt.Sprintf("console %s: %d args", e.Type, len(e.Args)))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			requests = append(requests, e.Request.URL)
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}

	enable := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
		return err
	})
	if err := chromedp.Do(bctx, enable, chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.ID("burn"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := run(t, bctx, chromedp.Text(chromedp.CSS("body")))
	count := func(js string) int { return int(run(t, bctx, chromedp.Evaluate[float64](js))) }
	days := count(`document.querySelectorAll("#days rect.bar").length`)
	points := count(`document.querySelectorAll("#burn circle.point").length`)
	models := count(`document.querySelectorAll("#models rect.bar").length`)
	users := count(`document.querySelectorAll("#users rect.bar").length`)
	scripts := count(`document.scripts.length`)
	// Drawn: each bar and point has a rendered box.
	sized := count(`[...document.querySelectorAll("svg rect.bar, svg circle.point")].filter(e => { const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0 }).length`)
	shot := run(t, bctx, chromedp.CaptureScreenshot())
	// Text present.
	cost, _ := wantTotal()
	for _, want := range []string{"acme", "November 2026", "2026-11", USD(cost), fmt.Sprint(cost), "gpt-4o-mini", "claude-sonnet-4-5", "alice",
		hostileUser, USD(20_000_000), "America/New_York"} {
		if !strings.Contains(text, want) {
			t.Errorf("page text lacks %q", want)
		}
	}
	// SVG elements: a bar per day of November, a burn-down point per day
	// up to now (20 days), a bar per model and per user.
	spent := 0 // days with spend: their bars have a height
	for _, d := range rep.Days {
		if d.CostMicroUSD > 0 {
			spent++
		}
	}
	if days != 30 || points != 20 || models != 2 || users != 3 || sized != spent+20+2+3 || spent != 15 {
		t.Errorf("rendered %d day bars (want 30), %d points (20), %d model bars (2), %d user bars (3), %d with a size (%d)",
			days, points, models, users, sized, spent+25)
	}
	if scripts != 0 {
		t.Errorf("%d script elements: the hostile user name was not escaped", scripts)
	}
	checkScreenshot(t, shot)
	if dir := os.Getenv("LLMGUARD_REPORT_SHOT"); dir != "" {
		os.WriteFile(dir, shot, 0o644) // for a human to look at
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors, warnings or exceptions:\n%s", strings.Join(problems, "\n"))
	}
	if len(requests) != 1 || requests[0] != pageURL || served != 1 {
		t.Errorf("requests %q (server saw %d): want the page alone", requests, served)
	}
}

// checkScreenshot wants a PNG at least 800×600 that is not blank: some
// pixels far from white, and several colours.
func checkScreenshot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("screenshot %v: want at least 800×600", b)
	}
	colours := map[color.RGBA]bool{}
	dark := 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			colours[c] = true
			if int(c.R)+int(c.G)+int(c.B) < 3*200 {
				dark++
			}
		}
	}
	total := (b.Dx() / 2) * (b.Dy() / 2)
	if len(colours) < 8 || dark < total/200 {
		t.Errorf("screenshot looks blank: %d colours, %d of %d sampled pixels not near white", len(colours), dark, total)
	}
}

// run runs one action, failing t on an error.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return v
}
