package app

// Adversarial tests of adv50 (2026-12-07): what adv49 left of a
// gateway's own bill (a generation billed per image, a shadow dollar
// limit), driven through loopback sockets to an upstream the test sets.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/ledger"
)

// adv50ShadowUSD is a shadow dollar rule beside usdLimit, as large: what
// it loses is what enforcing it would have charged.
const adv50ShadowUSD = `  - {name: shadow-usd, scope: user, unit: usd, rate: 0.000001, per: 24h, burst: 100, shadow: true}`

// shadowRemaining is r of the named item of x-llmguard-shadow
// (`"shadow-usd";r=…;t=…`), in the limit's units.
func shadowRemaining(t *testing.T, h http.Header, name string) int64 {
	t.Helper()
	return itemRemaining(t, h, "x-llmguard-shadow", name)
}

// adv50USDCost is what alice's dollar bucket (user-usd, $100) and her
// shadow dollar bucket (shadow-usd, $100) lost, and the cost its ledger
// record says, in micro-USD, for one call of body to path whose upstream
// answers status with answer (JSON) and the extra header lines fields
// (each ending "\r\n").
func adv50USDCost(t *testing.T, status int, fields, answer, path, body string) (real, shadow, recorded int64) {
	t.Helper()
	url := startRawUpstream(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", status, fields, len(answer), answer)
	})
	file := filepath.Join(t.TempDir(), "ledger.jsonl")
	cfg, err := config.Parse([]byte(twoFlavorHead(url) + "limits:\n" + usdLimit + "\n" + adv50ShadowUSD + "\n" + fmt.Sprintf("ledger: {file: %q}\n", file)))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })
	before := h.probe()
	resp, _ := h.do(path, body)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, status)
	}
	after := h.probe()
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		recorded += r.CostMicroUSD // the probes cost nothing
	}
	return rateLimitRemaining(t, before, "user-usd") - rateLimitRemaining(t, after, "user-usd"),
		shadowRemaining(t, before, "shadow-usd") - shadowRemaining(t, after, "shadow-usd"), recorded
}

// adv49 charged a LiteLLM proxy's x-litellm-response-cost as the floor of
// a request's price, but not for a generation billed per image (DALL·E:
// the table's per-image price stood, and an error the header says was
// billed was refunded), and not on a shadow dollar limit whose usage was
// unknown (the reservation stood) or refunded (nothing). A dollar rule,
// real or shadow, now settles at no less than the header in every case,
// and the ledger records as much; a shadow rule so reports what enforcing
// it would have charged. Token
// counts the upstream reports still price a call on both alike.
func TestAdv50CostHeaderFloorsPerImageAndShadow(t *testing.T) {
	const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`
	const answer = `{"id":"c-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13}}`
	const noUsage = `{"id":"c-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend."},"finish_reason":"stop"}]}`
	const errorBody = `{"error":{"message":"upstream failed","type":"server_error"}}`
	// DALL·E 3, hd, 1024×1024: $0.08 an image (the built-in table).
	const imageBody = `{"model":"dall-e-3","prompt":"a cat","quality":"hd","size":"1024x1024","n":1}`
	const image = `{"created":1,"data":[{"url":"https://example.com/cat.png"}]}`
	const perImage = 80_000
	const cost = "x-litellm-response-cost: 0.25\r\n"
	// gpt-4o-mini at the table's price, 5 µUSD; its reservation (8 input
	// tokens counted locally at most, 100 output) is below $0.25.
	const table = 5
	for _, tc := range []struct {
		name, path, body string
		status           int
		fields, answer   string
		real, shadow     int64 // micro-USD each bucket must lose
	}{
		{"per image: the header above the images' price", "/v1/images/generations", imageBody, 200, cost, image, 250_000, 250_000},
		{"per image: the header below it", "/v1/images/generations", imageBody, 200, "x-litellm-response-cost: 0.01\r\n", image, perImage, perImage},
		{"per image: no header", "/v1/images/generations", imageBody, 200, "", image, perImage, perImage},
		{"per image: an error the header says was billed", "/v1/images/generations", imageBody, 500, cost, errorBody, 250_000, 250_000},
		{"per image: an error without a cost, refunded", "/v1/images/generations", imageBody, 500, "", errorBody, 0, 0},
		{"chat: a usage", "/v1/chat/completions", chatBody, 200, cost, answer, 250_000, 250_000},
		{"chat: a usage and a cheap header", "/v1/chat/completions", chatBody, 200, "x-litellm-response-cost: 0.000001\r\n", answer, table, table},
		{"chat: no usage, the header above the reservation", "/v1/chat/completions", chatBody, 200, cost, noUsage, 250_000, 250_000},
		{"chat: an error the header says was billed", "/v1/chat/completions", chatBody, 500, cost, errorBody, 250_000, 250_000},
		{"chat: an error without a cost, refunded", "/v1/chat/completions", chatBody, 500, "", errorBody, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real, shadow, recorded := adv50USDCost(t, tc.status, tc.fields, tc.answer, tc.path, tc.body)
			t.Logf("charged %d µUSD, shadow %d µUSD, recorded %d µUSD", real, shadow, recorded)
			if recorded != tc.real {
				t.Errorf("the ledger records %d µUSD, want %d", recorded, tc.real)
			}
			if real != tc.real {
				t.Errorf("the dollar bucket lost %d µUSD, want %d", real, tc.real)
			}
			if shadow != tc.shadow {
				t.Errorf("the shadow dollar bucket lost %d µUSD, want %d", shadow, tc.shadow)
			}
		})
	}
}
