package app

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// /readyz shows the ledger (README, "Readiness"): a node whose ledger
// stream cannot be written stays ready, and says which sink is failing,
// how many records wait in memory, and the last error; a node without a
// ledger says nothing of one.
func TestReadyzShowsTheLedger(t *testing.T) {
	dead := refusedAddr(t)
	h := start(t, fmt.Sprintf("ledger: {redis_stream: \"llmguard:ledger\", redis_url: \"redis://%s\"}\n", dead))
	led, ok := readyz(t, h.admin)["ledger"].(map[string]any)
	if !ok || led["dropped"] != 0.0 || led["lost"] != 0.0 {
		t.Fatalf("/readyz ledger before any request = %v, want a ledger object with nothing dropped or lost", led)
	}
	if resp, body := h.post(testKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`); resp.StatusCode != 200 {
		t.Fatalf("request: %d %s", resp.StatusCode, body)
	}
	// The record goes to the stream after the answer; the sink's first
	// send fails at once (connection refused). Wait for it generously.
	for i := 0; ; i++ {
		led = readyz(t, h.admin)["ledger"].(map[string]any)
		failing, _ := led["failing"].([]any)
		if len(failing) == 1 && failing[0] == "redis" && led["pending"] == 1.0 && led["last_error"] != nil {
			break
		}
		if i == 600 {
			t.Fatalf("/readyz ledger with its stream down = %v, want failing [redis], 1 pending and the last error", led)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The error names the refusal: go-redis's default of five dials 100 ms
	// apart outlasted the sink's timeout and reported "context deadline
	// exceeded" for a Redis that refused at once.
	if e, _ := led["last_error"].(string); !strings.Contains(e, "refused") || strings.Contains(e, "deadline") {
		t.Errorf("/readyz ledger last_error = %q, want the refused connection, not a timeout", e)
	}

	if _, ok := readyz(t, start(t, "").admin)["ledger"]; ok {
		t.Error("/readyz of a node without a ledger shows one")
	}
}
