package app

import (
	"strings"
	"testing"
	"time"
)

// Learned reservations through real sockets: after min_samples answers of
// 100 output tokens to chats naming no maximum, the next such chat reserves
// ≈100 output tokens instead of the model's default of 256 (read from
// x-ratelimit-remaining-tokens at admission), and /metrics exports the
// learned figure for the model.
func TestLearnedReservationThroughTheProxy(t *testing.T) {
	h := startFrozen(t, `output_reservation: {learn: true, min_samples: 3, floor: 16}
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1000000, per: 1m}
`)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	var inputAndDefault int64
	for i := range 3 {
		before := h.tokensLeft()
		resp, b := h.post(testKey, body, "x-mock-completion-tokens", "100")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
		inputAndDefault = before - remainingTokens(t, resp.Header)
	}
	// Settlement may finish just after the answer reached the client.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(h.metrics(), `llmguard_output_reservation_samples{model="gpt-4o-mini"} 3`); {
		if time.Now().After(deadline) {
			t.Fatalf("the learner never saw 3 samples:\n%s", grepLines(h.metrics(), "output_reservation"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := h.tokensLeft()
	resp, _ := h.post(testKey, body, "x-mock-completion-tokens", "100")
	reserved := before - remainingTokens(t, resp.Header)
	input := inputAndDefault - 256
	if out := reserved - input; out < 100 || out > 105 {
		t.Fatalf("after 3 samples of 100: reserved %d output tokens (input %d), want ≈100 (the default was 256)", out, input)
	}
	if m := h.metrics(); !strings.Contains(m, `llmguard_output_reservation_learned_tokens{model="gpt-4o-mini"}`) {
		t.Fatalf("/metrics lacks the learned reservation:\n%s", grepLines(m, "output_reservation"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
