package proxy

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/llmguard/llmguard/internal/logbuf"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer = logbuf.Buffer

// An upstream that cannot be reached is logged once, not once a call
// (trial18: one WARN line per request while every call was refused), and
// the next line counts the calls failed since the last one. The interval
// is an hour, so no step depends on the test's speed; a fresh interval
// stands for its end.
func TestUnreachableUpstreamLoggedAtABoundedRate(t *testing.T) {
	var out syncBuffer
	px := newPathRig(t, cannedJSON, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&out, nil)) })
	px.opt.Upstreams[0].client.DialTimeout = func(string, time.Duration) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Err: errClientGone}
	}
	px.unreachable = newUnreachableLog(time.Hour)
	call := func(step string) {
		t.Helper()
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://llmguard/v1/chat/completions")
		req.Header.Set("Authorization", "Bearer sk-bench")
		req.Header.SetContentType("application/json")
		req.SetBody(pathBody)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, benchAddr, nil)
		px.Handle(&ctx)
		if st := ctx.Response.StatusCode(); st != fasthttp.StatusBadGateway {
			t.Fatalf("%s: status %d, want 502", step, st)
		}
	}
	lines := func() []string {
		var ls []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, `msg="upstream unreachable"`) {
				ls = append(ls, l)
			}
		}
		return ls
	}
	for i := range 5 {
		call("step 1 (five failed calls), call " + string(rune('1'+i)))
	}
	ls := lines()
	if len(ls) != 1 || !strings.Contains(ls[0], "failed_calls=1 ") || !strings.Contains(ls[0], "next_line_after=1h0m0s") {
		t.Fatalf("step 1 (five failed calls): lines %q, want one with failed_calls=1 and next_line_after=1h0m0s", ls)
	}
	px.unreachable.every = &rate.Sometimes{First: 1, Interval: time.Hour} // the interval has passed
	call("step 2 (the next line is due)")
	if ls = lines(); len(ls) != 2 || !strings.Contains(ls[1], "failed_calls=5 ") {
		t.Fatalf("step 2 (the next line is due): lines %q, want a second with failed_calls=5 (4 not logged + this one)", ls)
	}
}
