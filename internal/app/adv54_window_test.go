package app

// adv54 (2026-12-07): the context window a hidden-context request
// reserves, from the embedded price table.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// Claude Opus 4.7 and 4.8 read up to 1,000,000 input tokens without any
// beta (Anthropic's Opus 4.8 page; Bedrock's and Vertex AI's Opus 4.7
// cards: 1M context, 128K output), but the embedded table gave them the
// 200,000 of Opus 4.5: a call whose input is a stored document reserved
// 200,010 tokens while the upstream read 900,000, so two passed a
// 1,500,000-token bucket and 1,800,020 were billed. With the table's
// window at 1M the second call waits. Opus 4.6 (1M already) is the
// control; no config names a window, so the table's is the one used.
// prices55 (2026-12-07): the Claude 5-series (native 1M windows on
// Anthropic's model pages) had no entry, so their hidden context reserved
// default_max_input_tokens, 200,000, and two passed the same way.
func TestAdv54NativeMillionWindowReserved(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) {
		return 900_000, 10 // the stored file fills most of the 1M window
	})
	for _, model := range []string{"claude-opus-4-7", "claude-opus-4-8", "claude-opus-4-6",
		"claude-opus-5", "claude-opus-5-5", "claude-sonnet-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-fable-5-1"} {
		t.Run(model, func(t *testing.T) {
			cfg, err := config.Parse([]byte(claudeConfig(up.url, "user-tpd", 1_500_000)))
			if err != nil {
				t.Fatal(err)
			}
			h := frozenHarness(t, cfg)
			body := strings.Replace(longContextBody, "claude-sonnet-4-5", model, 1)
			before, passed := up.billed.Load(), 0
			for range 3 {
				resp, b := h.do("/v1/messages", body)
				switch resp.StatusCode {
				case http.StatusOK:
					passed++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("%d %.200s", resp.StatusCode, b)
				}
			}
			if passed == 0 {
				t.Fatalf("no call passed: the window tests nothing")
			}
			if billed := up.billed.Load() - before; billed > 1_500_000 {
				t.Errorf("the upstream billed %d tokens through a bucket holding 1,500,000 (%d of 3 calls passed)", billed, passed)
			}
		})
	}
}
