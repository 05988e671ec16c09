package config

import (
	"strings"
	"testing"
)

// ledger.redis_stream needs a Redis of its own unless the store is one
// Redis: a redis_cluster store lends it none, and the refusal says so.
func TestLedgerStreamNeedsARedis(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\", no_key: true}]\n"
	for _, tc := range []struct {
		name string
		yaml string
		want string // "" when valid
	}{
		{"redis store lends its URL", "store: {backend: redis, redis_url: \"redis://127.0.0.1:6379/0\"}\nledger: {redis_stream: s}\n", ""},
		{"memory store, no URL", "ledger: {redis_stream: s}\n",
			"ledger.redis_url: a redis:// URL is required for ledger.redis_stream (or a redis store)"},
		{"cluster store, no URL", "store: {backend: redis_cluster, cluster_addrs: [\"127.0.0.1:7000\"]}\nledger: {redis_stream: s}\n",
			"ledger.redis_url: a redis:// URL of a standalone Redis is required for ledger.redis_stream with store.backend redis_cluster"},
		{"cluster store, own URL", "store: {backend: redis_cluster, cluster_addrs: [\"127.0.0.1:7000\"]}\nledger: {redis_stream: s, redis_url: \"redis://127.0.0.1:6379/1\"}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head + tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(c.Ledger.RedisURL, "redis://") {
					t.Fatalf("ledger.redis_url = %q after defaults, want a redis:// URL", c.Ledger.RedisURL)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
