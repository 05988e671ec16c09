package app

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
)

// modelMaxOutput16k is what the upstream of TestPinnedOutputNeverBillsPastTheBucket
// writes per completion when the body names no maximum: gpt-4o-mini's own
// maximum output (OpenAI's model page), far above the 4,096-token default
// reservation.
const modelMaxOutput16k = 16384

// pinnedCases are one request per flavor that names no output maximum:
// field is the member the upstream must receive the reservation in, pinned
// the maximum per completion llmguard writes (default_max_output_tokens,
// 4,096, unset in twoFlavorHead), choices the completions asked for.
var pinnedCases = []struct {
	name, path, body, field string
	pinned, choices         int64
}{
	{name: "chat", path: "/v1/chat/completions", field: "max_completion_tokens", pinned: 4096, choices: 1,
		body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say hi"}]}`},
	{name: "chat n=2, max_tokens null", path: "/v1/chat/completions", field: "max_tokens", pinned: 4096, choices: 2,
		body: `{"model":"gpt-4o-mini","n":2,"max_tokens":null,"messages":[{"role":"user","content":"say hi"}]}`},
	{name: "responses", path: "/v1/responses", field: "max_output_tokens", pinned: 4096, choices: 1,
		body: `{"model":"gpt-4o-mini","input":"say hi"}`},
	{name: "messages", path: "/v1/messages", field: "max_tokens", pinned: 4096, choices: 1,
		body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"say hi"}]}`},
}

// TestPinnedOutputNeverBillsPastTheBucket: an upstream that writes up to
// the model's maximum (16,384 tokens) when the body names none bills past a
// 10,000-token bucket through llmguard as it was (the 4,096-token
// reservation is an estimate, the overrun charged as debt afterwards),
// and never past it with output_reservation.pin: the request goes up with
// its reservation as the flavor's own maximum, which the upstream honours,
// and the answer says so in x-llmguard-output-pinned.
func TestPinnedOutputNeverBillsPastTheBucket(t *testing.T) {
	const burst = 10000
	for _, c := range pinnedCases {
		for _, pin := range []bool{false, true} {
			t.Run(c.name+" pin="+strconv.FormatBool(pin), func(t *testing.T) {
				var sawField, sawOther int
				up := startBilling16(t, func(path string, body map[string]any) (in, out int64) {
					per := int64(modelMaxOutput16k)
					if v, ok := body[c.field].(float64); ok && v > 0 {
						per = min(per, int64(v))
						sawField++
					}
					for _, f := range []string{"max_completion_tokens", "max_tokens", "max_output_tokens"} {
						if _, ok := body[f].(float64); ok && f != c.field {
							sawOther++
						}
					}
					return words(body["messages"], body["input"]), per * c.choices
				})
				cfg, err := config.Parse([]byte(twoFlavorHead(up.url) + "output_reservation: {pin: " + strconv.FormatBool(pin) + "}\n" +
					userTokensLimit("user-tpd", burst)))
				if err != nil {
					t.Fatal(err)
				}
				h := frozenHarness(t, cfg)
				passed := 0
				for i := range 6 {
					resp, b := h.do(c.path, c.body)
					switch resp.StatusCode {
					case http.StatusOK:
						passed++
						want := ""
						if pin {
							want = strconv.FormatInt(c.pinned, 10)
						}
						if got := resp.Header.Get("x-llmguard-output-pinned"); got != want {
							t.Errorf("call %d: x-llmguard-output-pinned = %q, want %q", i, got, want)
						}
						if got := resp.Header.Get("x-llmguard-output-capped"); got != "" {
							t.Errorf("call %d: x-llmguard-output-capped = %q, want none (no cap_output limit)", i, got)
						}
					case http.StatusTooManyRequests:
					default:
						t.Fatalf("call %d: %d %.200s", i, resp.StatusCode, b)
					}
				}
				billed := up.billed.Load()
				if passed == 0 {
					t.Fatal("no call passed")
				}
				if pin {
					if billed > burst {
						t.Errorf("pinned: the upstream billed %d tokens through a bucket of %d (%d calls passed)", billed, burst, passed)
					}
					if sawField != passed || sawOther != 0 {
						t.Errorf("pinned: %s reached the upstream as a maximum in %d of %d calls, another output field in %d", c.field, sawField, passed, sawOther)
					}
				} else {
					if billed <= burst {
						t.Errorf("unpinned: the upstream billed %d tokens through a bucket of %d; want past it, the case this option is for", billed, burst)
					}
					if sawField != 0 {
						t.Errorf("unpinned: %s reached the upstream %d times; want the body as sent", c.field, sawField)
					}
				}
			})
		}
	}
}

// TestPinnedOutputAfterCapOutput: a request that names no maximum under a
// cap_output limit that cannot pay its default reservation goes up with
// the lowered maximum, which both headers name.
func TestPinnedOutputAfterCapOutput(t *testing.T) {
	var got int64
	up := startBilling16(t, func(path string, body map[string]any) (in, out int64) {
		if v, ok := body["max_completion_tokens"].(float64); ok {
			got = int64(v)
			return words(body["messages"]), got
		}
		return words(body["messages"]), modelMaxOutput16k
	})
	cfg, err := config.Parse([]byte(twoFlavorHead(up.url) + "output_reservation: {pin: true}\n" + `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, cap_output: true, cap_output_min: 32}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := frozenHarness(t, cfg)
	resp, b := h.do("/v1/chat/completions", pinnedCases[0].body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.200s", resp.StatusCode, b)
	}
	pinned, capped := resp.Header.Get("x-llmguard-output-pinned"), resp.Header.Get("x-llmguard-output-capped")
	if got <= 0 || got >= 1000 || pinned != strconv.FormatInt(got, 10) || !strings.HasPrefix(capped, pinned+"; requested=4096") {
		t.Errorf("upstream max_completion_tokens %d, x-llmguard-output-pinned %q, x-llmguard-output-capped %q; want one maximum below 1,000 in all three, requested 4096", got, pinned, capped)
	}
	if billed := up.billed.Load(); billed > 1000 {
		t.Errorf("the upstream billed %d tokens through a bucket of 1000", billed)
	}
}

// output_reservation.pin changes at restart only, as the rest of its
// section: a reload that turns it off is logged as needing a restart,
// naming output_reservation, and requests stay pinned; a reload that
// turns it back on warns of nothing.
func TestReloadKeepsOutputPin(t *testing.T) {
	const warning = "changes only at restart"
	var sawMax atomic.Int64
	up := startBilling16(t, func(path string, body map[string]any) (in, out int64) {
		if _, ok := body["max_completion_tokens"].(float64); ok {
			sawMax.Add(1)
		}
		return 1, 1
	})
	path := filepath.Join(t.TempDir(), "llmguard.yaml")
	write := func(pin bool) {
		t.Helper()
		yaml := strings.Replace(reloadConfig("output_reservation: {pin: "+strconv.FormatBool(pin)+"}\n"), "http://127.0.0.1:1", up.url, 1)
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(true)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := newApp(cfg, slog.New(slog.NewTextHandler(logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	chat := func() string {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		ctx.Request.SetRequestURI("/v1/chat/completions")
		ctx.Request.Header.Set("Authorization", "Bearer sk-reload")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBodyString(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		a.Proxy.Handle(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			t.Fatalf("%d %.200s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		return string(ctx.Response.Header.Peek("x-llmguard-output-pinned"))
	}
	steps := []struct {
		name string
		pin  bool
		warn bool
	}{
		{name: "pin turned off", pin: false, warn: true},
		{name: "still off", pin: false, warn: true},
		{name: "back on", pin: true},
	}
	if chat() == "" {
		t.Fatal("start: not pinned")
	}
	for i, s := range steps {
		before := len(logs.String())
		write(s.pin)
		if err := a.Reload(path); err != nil {
			t.Fatalf("step %d (%s): reload: %v", i, s.name, err)
		}
		got := logs.String()[before:]
		if warned := strings.Contains(got, warning) && strings.Contains(got, "field=output_reservation"); warned != s.warn {
			t.Errorf("step %d (%s): warned of output_reservation: %v, want %v:\n%s", i, s.name, warned, s.warn, got)
		}
		if chat() == "" {
			t.Errorf("step %d (%s): not pinned after the reload; want the option read at start", i, s.name)
		}
	}
	if n := sawMax.Load(); n != int64(len(steps)+1) {
		t.Errorf("the upstream saw max_completion_tokens in %d of %d calls", n, len(steps)+1)
	}
}
