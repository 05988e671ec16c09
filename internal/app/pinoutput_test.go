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
	// A chat request's maximum goes in max_tokens to a server that is not
	// OpenAI's own API (chat_output_field's default; adv25).
	{name: "chat", path: "/v1/chat/completions", field: "max_tokens", pinned: 4096, choices: 1,
		body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say hi"}]}`},
	{name: "chat n=2, max_tokens null", path: "/v1/chat/completions", field: "max_tokens", pinned: 4096, choices: 2,
		body: `{"model":"gpt-4o-mini","n":2,"max_tokens":null,"messages":[{"role":"user","content":"say hi"}]}`},
	{name: "responses", path: "/v1/responses", field: "max_output_tokens", pinned: 4096, choices: 1,
		body: `{"model":"gpt-4o-mini","input":"say hi"}`},
	{name: "messages", path: "/v1/messages", field: "max_tokens", pinned: 4096, choices: 1,
		body: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"say hi"}]}`},
	// Legacy completions: max_tokens, per completion, written in place of
	// a value that names no maximum; prompts × max(n, best_of)
	// completions each get it.
	{name: "completions", path: "/v1/completions", field: "max_tokens", pinned: 4096, choices: 1,
		body: `{"model":"gpt-4o-mini","prompt":"say hi"}`},
	{name: "completions 2 prompts, max_tokens -1", path: "/v1/completions", field: "max_tokens", pinned: 4096, choices: 2,
		body: `{"model":"gpt-4o-mini","prompt":["say hi","say bye"],"max_tokens":-1}`},
	{name: "completions best_of 2, max_tokens 0", path: "/v1/completions", field: "max_tokens", pinned: 4096, choices: 2,
		body: `{"model":"gpt-4o-mini","prompt":"say hi","n":1,"best_of":2,"max_tokens":0}`},
	// A background run reports no usage when created: refused unpinned
	// (TestPinnedBackgroundResponses), forwarded pinned.
	{name: "background responses", path: "/v1/responses", field: "max_output_tokens", pinned: 4096, choices: 1,
		body: `{"model":"gpt-4o-mini","input":"say hi","background":true,"max_output_tokens":null}`},
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
			if !pin && strings.Contains(c.body, `"background":true`) {
				continue // refused unpinned: TestPinnedBackgroundResponses
			}
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
					return words(body["messages"], body["input"], body["prompt"]), per * c.choices
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

// TestPinnedBackgroundResponses: a background Responses run that names no
// max_output_tokens is refused 400 max_output_tokens_required without
// output_reservation.pin (its reservation is all it is ever charged, and
// nothing bounds it), and forwarded with its reservation as
// max_output_tokens with it, as TestPinnedOutputNeverBillsPastTheBucket's
// "background responses" case shows; one whose maximum the pin cannot
// write (llama.cpp's n_predict: -1, unbounded) is refused either way.
func TestPinnedBackgroundResponses(t *testing.T) {
	for _, c := range []struct {
		name, body string
		pin        bool
		status     int
	}{
		{name: "unpinned", body: `{"model":"gpt-4o-mini","input":"say hi","background":true}`, status: http.StatusBadRequest},
		{name: "pinned", body: `{"model":"gpt-4o-mini","input":"say hi","background":true}`, pin: true, status: http.StatusOK},
		{name: "pinned, n_predict -1", body: `{"model":"gpt-4o-mini","input":"say hi","background":true,"n_predict":-1}`, pin: true, status: http.StatusBadRequest},
	} {
		var maxOut any
		up := startBilling16(t, func(path string, body map[string]any) (in, out int64) {
			maxOut = body["max_output_tokens"]
			return 1, 1
		})
		cfg, err := config.Parse([]byte(twoFlavorHead(up.url) + "output_reservation: {pin: " + strconv.FormatBool(c.pin) + "}\n" +
			userTokensLimit("user-tpd", 10000)))
		if err != nil {
			t.Fatal(err)
		}
		h := frozenHarness(t, cfg)
		resp, b := h.do("/v1/responses", c.body)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: %d %.200s; want %d", c.name, resp.StatusCode, b, c.status)
		}
		switch {
		case c.status == http.StatusOK && (maxOut != 4096.0 || resp.Header.Get("x-llmguard-output-pinned") != "4096"):
			t.Errorf("%s: upstream max_output_tokens %v, x-llmguard-output-pinned %q; want 4096 in both", c.name, maxOut, resp.Header.Get("x-llmguard-output-pinned"))
		case c.status != http.StatusOK && (!strings.Contains(string(b), "max_output_tokens_required") || up.calls.Load() != 0):
			t.Errorf("%s: %.200s, %d upstream calls; want max_output_tokens_required, none", c.name, b, up.calls.Load())
		}
	}
}

// TestPinnedOutputSkipsEcho: a legacy completions body with echo (true,
// or "true" as vLLM reads it) and no max_tokens is forwarded as sent under
// output_reservation.pin: its reservation holds the echoed prompt once per
// choice and is not a maximum per completion.
func TestPinnedOutputSkipsEcho(t *testing.T) {
	for _, echo := range []string{`true`, `"true"`} {
		var sawMax int
		up := startBilling16(t, func(path string, body map[string]any) (in, out int64) {
			if _, ok := body["max_tokens"]; ok {
				sawMax++
			}
			return 1, 1
		})
		cfg, err := config.Parse([]byte(twoFlavorHead(up.url) + "output_reservation: {pin: true}\n" + userTokensLimit("user-tpd", 100000)))
		if err != nil {
			t.Fatal(err)
		}
		h := frozenHarness(t, cfg)
		resp, b := h.do("/v1/completions", `{"model":"gpt-4o-mini","prompt":"say hi","echo":`+echo+`}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("echo %s: %d %.200s", echo, resp.StatusCode, b)
		}
		if got := resp.Header.Get("x-llmguard-output-pinned"); got != "" || sawMax != 0 {
			t.Errorf("echo %s: x-llmguard-output-pinned %q, max_tokens reached the upstream %d times; want the body as sent", echo, got, sawMax)
		}
	}
}

// TestCompletionsNotCapped: output_reservation.pin writes a legacy
// completions request's maximum but cap_output never lowers it: a body
// naming none, or naming one, whose reservation a cap_output bucket
// cannot pay is denied 429, never forwarded with a lower max_tokens.
func TestCompletionsNotCapped(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (in, out int64) { return 1, 1 })
	cfg, err := config.Parse([]byte(twoFlavorHead(up.url) + "output_reservation: {pin: true}\n" + `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 1000, cap_output: true, cap_output_min: 32}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := frozenHarness(t, cfg)
	for _, body := range []string{`{"model":"gpt-4o-mini","prompt":"say hi"}`, `{"model":"gpt-4o-mini","prompt":"say hi","max_tokens":2000}`} {
		resp, b := h.do("/v1/completions", body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("x-llmguard-output-capped") != "" {
			t.Errorf("%s: %d, x-llmguard-output-capped %q: %.200s; want 429, not capped", body, resp.StatusCode, resp.Header.Get("x-llmguard-output-capped"), b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream saw %d calls; want none", n)
	}
}

// TestPinnedOutputAfterCapOutput: a request that names no maximum under a
// cap_output limit that cannot pay its default reservation goes up with
// the lowered maximum, which both headers name.
func TestPinnedOutputAfterCapOutput(t *testing.T) {
	var got int64
	up := startBilling16(t, func(path string, body map[string]any) (in, out int64) {
		if v, ok := body["max_tokens"].(float64); ok { // chat_output_field's default here
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
		t.Errorf("upstream max_tokens %d, x-llmguard-output-pinned %q, x-llmguard-output-capped %q; want one maximum below 1,000 in all three, requested 4096", got, pinned, capped)
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
		if _, ok := body["max_tokens"].(float64); ok { // chat_output_field's default here
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
		t.Errorf("the upstream saw max_tokens in %d of %d calls", n, len(steps)+1)
	}
}
