package config

import (
	"strings"
	"testing"
	"time"
)

func TestKeyStoreDefaultsAndRefusals(t *testing.T) {
	const base = "upstreams: [{name: u, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}]\n"
	c, err := Parse([]byte(base + "store: {backend: redis, redis_url: \"redis://127.0.0.1:6379/0\"}\nkey_store: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if k := c.KeyStore; !k.Enabled || time.Duration(k.Resync) != 30*time.Second || k.AuditMaxLen != 100000 || k.MaxKeys != 100000 {
		t.Errorf("defaults: %+v", k)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"key_store: {enabled: true}\n", `key_store.enabled: needs store.backend redis or redis_cluster`},
		{"key_store: {resync: 10ms}\n", "key_store.resync: must be between 1s and 24h0m0s"},
		{"key_store: {resync: soon}\n", "key_store.resync: `soon` is not a Go duration"},
		{"key_store: {audit_max_len: 10}\n", "key_store.audit_max_len: must be at least 1000"},
		{"key_store: {max_keys: 2000000}\n", "key_store.max_keys: must be between 1 and 1000000"},
		{"key_store: {enable: true}\n", "unknown field enable (did you mean enabled?)"},
	} {
		_, err := Parse([]byte(base + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
