package app

import (
	"fmt"
	"strings"
	"testing"
)

// KoboldCpp's chat route writes every message between its role's start
// and end strings from the body's adapter: a 300-word user_start beside
// 20 messages bills 6,000 tokens a call, weighed before as the adapter's
// text once (some 300), so the 20,000-token bucket let four calls through
// where three fit (24,0xx billed).
func TestKoboldAdapterIsWeighedPerMessage(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		adapter, _ := body["adapter"].(map[string]any)
		msgs, _ := body["messages"].([]any)
		var in int64
		for _, m := range msgs {
			role, _ := m.(map[string]any)["role"].(string)
			in += words(m.(map[string]any)["content"], adapter[role+"_start"], adapter[role+"_end"])
		}
		return in, 1
	})
	long := strings.TrimSpace(strings.Repeat("word ", 300))
	var msgs []string
	for range 20 {
		msgs = append(msgs, `{"role":"user","content":"hi"}`)
	}
	body := fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":1,"messages":[%s],"adapter":{"user_start":%q}}`, strings.Join(msgs, ","), long)
	h := fresh16(t, up.url)
	if passed := up.callThrough(t, h, "/v1/chat/completions", body, 5, h.tokensLeft()); passed == 0 {
		t.Error("no call passed: the case tests nothing")
	}
}
