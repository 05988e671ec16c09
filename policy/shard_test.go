package policy

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
)

// A shard's key is the bucket's key with the shard number in its hash tag;
// a rule of one shard keeps its key, and no tenant id can forge another's
// shard or be taken for one.
func TestShardKeyLayout(t *testing.T) {
	p := Principal{KeyID: "0123abcd", User: "alice", Tenant: "acme"}
	global := Rule{Name: "all-tpm", Scope: ScopeGlobal, Shards: 8}
	user := Rule{Name: "user-tpm", Scope: ScopeUser, Shards: 4}
	tenant := Rule{Name: "tenant-tpm", Scope: ScopeTenant, Shards: 4, PerModel: true}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"global", global.ShardKeys(p, "").Key(3), "llmguard:{global:3}:all-tpm"},
		{"user", user.ShardKeys(p, "").Key(0), "llmguard:{acme:0}:user-tpm:alice"},
		{"tenant per model", tenant.ShardKeys(p, "gpt-4o").Key(2), "llmguard:{acme:2}:tenant-tpm:acme:gpt-4o"},
		{"tenant unpriced model", tenant.ShardKeys(p, "").Key(2), "llmguard:{acme:2}:tenant-tpm:acme:%unpriced"},
		{"escaped", user.ShardKeys(Principal{User: "a:b", Tenant: "ev}il:1"}, "").Key(1), "llmguard:{ev%7Dil%3A1:1}:user-tpm:a%3Ab"},
		{"one shard keeps today's key", (&Rule{Name: "all-tpm", Scope: ScopeGlobal, Shards: 1}).ModelKey(p, ""), "llmguard:{global}:all-tpm"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// Every shard of a tenant, and every other tenant's unsharded key,
	// differ: a colon in a tenant id is escaped, so "acme:1" cannot pose as
	// shard 1 of acme.
	seen := map[string]string{}
	add := func(what, key string) {
		if prev, dup := seen[key]; dup {
			t.Errorf("%s and %s share key %q", prev, what, key)
		}
		seen[key] = what
	}
	unsharded := Rule{Name: "user-tpm", Scope: ScopeUser}
	for _, tn := range []string{"acme", "acme:1", "acme%3A1", "acme:1}", "global", "global:1"} {
		q := Principal{User: "alice", Tenant: tn}
		add("unsharded "+tn, unsharded.Key(q))
		for i := range 4 {
			add("shard of "+tn, user.ShardKeys(q, "").Key(i))
		}
	}
	for i := range 8 {
		add("global shard", global.ShardKeys(p, "").Key(i))
	}
	// Each shard has a hash tag of its own.
	tags := map[string]bool{}
	for i := range 8 {
		k := global.ShardKeys(p, "").Key(i)
		tags[k[strings.IndexByte(k, '{'):strings.IndexByte(k, '}')]] = true
	}
	if len(tags) != 8 {
		t.Errorf("8 shards in %d hash tags", len(tags))
	}
}

func TestLimitOfKey(t *testing.T) {
	p := Principal{KeyID: "0123abcd", User: "a}:b", Tenant: "ev}il"}
	r := Rule{Name: "user-tpm", Scope: ScopeUser, Shards: 3, PerModel: true}
	for _, key := range []string{r.Key(p), r.ModelKey(p, "gpt-4o"), r.ShardKeys(p, "gpt-4o").Key(2),
		(&Rule{Name: "user-tpm", Scope: ScopeGlobal}).Key(p), (&Rule{Name: "user-tpm", Scope: ScopeGlobal}).ShardKeys(p, "").Key(1)} {
		if name, ok := LimitOfKey(key); !ok || name != "user-tpm" {
			t.Errorf("LimitOfKey(%q) = %q, %v", key, name, ok)
		}
	}
	for _, key := range []string{"", "llmguard:", "other:{x}:y", "llmguard:{x}", "llmguard:{x}:"} {
		if name, ok := LimitOfKey(key); ok {
			t.Errorf("LimitOfKey(%q) = %q, want none", key, name)
		}
	}
}

// Compile carries shards into the rule (unset: 1), and its shards add up
// to the limit.
func TestCompileShards(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
limits:
  - {name: g, scope: global, unit: tokens, rate: 1000, per: 1m, burst: 2001, shards: 8}
  - {name: u, scope: user, unit: tokens, rate: 10, per: 1m}
`)
	pol, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	shards := map[string]int{}
	for _, r := range pol.Rules() {
		shards[r.Name] = r.Shards
		if r.Name == "g" {
			var capacity int64
			for i := range r.Shards {
				capacity += bucket.ShardLimit(r.Limit, r.Shards, i).Capacity
			}
			if capacity != 2001 {
				t.Errorf("shards of g hold %d, want 2001", capacity)
			}
		}
	}
	if config.MaxShards != bucket.MaxShards {
		t.Errorf("config allows %d shards, the store %d", config.MaxShards, bucket.MaxShards)
	}
	if shards["g"] != 8 || shards["u"] != 1 {
		t.Errorf("shards %v, want g: 8, u: 1", shards)
	}
}
