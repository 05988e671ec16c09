package app

// Anthropic's 1M-context beta (anthropic-beta: context-1m-2025-08-07)
// lets a Claude model read up to 1,000,000 input tokens whatever the
// 200,000 configured as its max_input_tokens; a request with hidden
// context (a document by file id) must reserve that window when it
// carries the beta. Each test drives llmguard through loopback sockets to
// a billing Anthropic upstream.

import (
	"net/http"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// longContextConfig is an Anthropic upstream at url with
// claude-sonnet-4-5 configured at a 200,000-token window, and alice's
// bucket of burst tokens, refilled at 1 a day.
func longContextConfig(t *testing.T, url string, burst int) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(claudeConfig(url, "user-tpd", burst) + `models:
  claude-sonnet-4-5: {max_input_tokens: 200000, default_max_output_tokens: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// longContextBody is a Messages request whose input is a stored file the
// body does not carry.
const longContextBody = `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_1"}},{"type":"text","text":"summarise"}]}]}`

// With the beta, the call reserved the model's configured 200,000 tokens
// while the upstream read and billed 900,000: a 1,500,000-token bucket let
// two such calls through, 1,800,020 tokens billed. The reservation now
// follows the header: 1,000,000 input tokens, so the second call waits.
// The header counts in any case, in a list, or repeated.
func TestLongContextBetaReservesTheMillionWindow(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) {
		return 900_000, 10 // the stored file fills most of the 1M window
	})
	for _, headers := range [][]string{
		{"anthropic-beta", "context-1m-2025-08-07"},
		{"Anthropic-Beta", "files-api-2025-04-14, CONTEXT-1M-2025-08-07"},
		{"anthropic-beta", "files-api-2025-04-14", "anthropic-beta", "context-1m-2025-08-07"},
	} {
		t.Run(headers[len(headers)-1], func(t *testing.T) {
			h := frozenHarness(t, longContextConfig(t, up.url, 1_500_000))
			before, passed := up.billed.Load(), 0
			for range 3 {
				resp, b := h.do("/v1/messages", longContextBody, headers...)
				switch resp.StatusCode {
				case http.StatusOK:
					passed++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("%d %.200s", resp.StatusCode, b)
				}
			}
			if passed == 0 {
				t.Fatalf("no call passed: the header tests nothing")
			}
			if billed := up.billed.Load() - before; billed > 1_500_000 {
				t.Errorf("the upstream billed %d tokens through a bucket holding 1,500,000 (%d of 3 calls passed)", billed, passed)
			}
		})
	}
}

// The reservation follows the header, not the other way round: in a
// 900,000-token bucket the call without the beta reserves its 200,000-token
// window and passes; with the beta it asks for more than the bucket can
// ever hold and never reaches the upstream.
func TestLongContextReservationFollowsTheHeader(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 100, 10 })
	h := frozenHarness(t, longContextConfig(t, up.url, 900_000))
	if resp, b := h.do("/v1/messages", longContextBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("without the beta: %d %.200s, want 200", resp.StatusCode, b)
	}
	calls := up.calls.Load()
	if resp, _ := h.do("/v1/messages", longContextBody, "anthropic-beta", "context-1m-2025-08-07"); resp.StatusCode == http.StatusOK {
		t.Errorf("with the beta: 200 from a 900,000-token bucket, want a refusal of its 1,000,010-token reservation")
	}
	if up.calls.Load() != calls {
		t.Errorf("with the beta the call reached the upstream")
	}
	if resp, b := h.do("/v1/messages", longContextBody, "anthropic-beta", "files-api-2025-04-14"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another beta: %d %.200s, want 200", resp.StatusCode, b)
	}
}
