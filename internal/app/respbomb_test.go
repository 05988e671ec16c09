package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// A store address whose peer answers every command with a reply that
// announces a 1 TiB bulk string (adv46: go-redis allocates what a reply
// announces, so one 16-byte reply ended the process with a fatal
// out-of-memory error). Guarded by internal/respguard, each call fails as
// a store error: the fail-open limit is served by the fallback and the
// process lives on. Unguarded, this test's process dies at the first
// reply.
func TestStoreReplyBombIsAStoreError(t *testing.T) {
	// HELLO refused as a Redis before 6 refuses it, so that go-redis goes
	// on in RESP2 and reads the bomb as the command's own reply.
	addr := redistest.Fake(t, func(args []string) string {
		if strings.EqualFold(args[0], "HELLO") {
			return "-ERR unknown command 'HELLO'\r\n"
		}
		return "$1099511627776\r\n"
	})
	mock := startMock(t)
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf(`
limits:
  - {name: user-rpm, scope: user, unit: requests, rate: 1000, per: 1m, on_failure: open}
store: {backend: redis, redis_url: "redis://%s/0", timeout: 500ms}
`, addr))))
	if err != nil {
		t.Fatal(err)
	}
	h, logs := serveLogged(t, mock, cfg)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	for i := range 3 {
		if resp, b := h.post(testKey, body); resp.StatusCode != 200 {
			t.Fatalf("request %d, fail-open limit: status %d: %s", i, resp.StatusCode, b)
		}
	}
	if !strings.Contains(logs.String(), "Redis reply refused") {
		t.Errorf("no log line names the refused reply:\n%s", logs)
	}
}
