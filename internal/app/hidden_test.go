package app

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// Requests whose input the body does not hold (here Responses with
// previous_response_id, whose upstream reports 900 input tokens the body
// never showed) reserve the model's largest input (max_input_tokens: 1000)
// plus their output, say x-llmguard-estimate: partial, and are reconciled
// down to what they used. Twenty sent at once against a 5,000-token bucket
// on a frozen clock: the bucket admits only what it holds, and is never
// charged past it.
func TestHiddenContextIsReservedAndNeverOverspent(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	yaml := strings.Replace(baseConfig(t, mock.URL, `limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1, per: 24h, burst: 5000}
`), "    default_max_output_tokens: 256\n", "    default_max_output_tokens: 256\n    max_input_tokens: 1000\n", 1)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return frozen })

	const n = 20
	var wg sync.WaitGroup
	statuses := make([]int, n)
	partial := make([]bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/responses",
				strings.NewReader(`{"model":"gpt-4o-mini","previous_response_id":"resp_1","input":"go on","max_output_tokens":50}`))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("x-mock-prompt-tokens", "900")
			req.Header.Set("x-mock-completion-tokens", "20")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i], partial[i] = resp.StatusCode, resp.Header.Get("x-llmguard-estimate") == "partial"
		}()
	}
	wg.Wait()
	admitted := 0
	for i, st := range statuses {
		switch st {
		case 200:
			admitted++
			if !partial[i] {
				t.Errorf("request %d: no x-llmguard-estimate: partial", i)
			}
		case 429:
		default:
			t.Errorf("request %d: %d", i, st)
		}
	}
	// Each reserves 1000 + 50 and settles at 900 + 20: at least 4 fit at
	// once, and at most 5000 / 920 in all.
	if admitted < 4 || admitted > 5000/920 {
		t.Errorf("%d admitted, want 4 to %d", admitted, 5000/920)
	}
	left := h.tokensLeft()
	if want := int64(5000 - admitted*920); left != want {
		t.Errorf("%d tokens left, want %d: %d admitted, each charged its 920 tokens", left, want, admitted)
	}
}
