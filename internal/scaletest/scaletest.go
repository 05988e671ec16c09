// Package scaletest writes large llmguard configs for the scale tests and
// benchmarks of config, policy, internal/app and cmd/llmguard: many virtual
// keys and many limits of every kind (per tenant, per user, per plan, per
// model, calendar quotas in several time zones), deterministic for a given
// size, so that a load time measured at one size can be compared with one
// measured at another in the same run.
package scaletest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Key is the clear credential of virtual key i of a Config: its SHA-256 is
// what the config holds.
func Key(i int) string { return fmt.Sprintf("sk-scale-%06d", i) }

// User, Tenant and Plan are the principal of virtual key i in a Config of
// the given number of keys: user u<i>, one tenant per 100 keys (at least
// one tenant), and the plans free, pro and enterprise in turn.
func User(i int) string { return fmt.Sprintf("u%d", i) }

// Tenant is the tenant of key i in a Config of keys keys.
func Tenant(i, keys int) string { return fmt.Sprintf("t%d", i%tenants(keys)) }

// Plan is the plan of key i.
func Plan(i int) string { return plans[i%len(plans)] }

var plans = []string{"free", "pro", "enterprise"}

func tenants(keys int) int { return max(keys/100, 1) }

// Config is the YAML of a valid config with keys virtual keys (key_sha256 of
// Key(i)) and limits limits, fronting an OpenAI-flavored upstream at
// upstreamURL (an http:// URL). Limit j is, by j mod 6: a tenant token
// bucket for one tenant; a user request bucket for one user; a tenant
// monthly USD quota in one of four time zones with warn_at thresholds; a
// user token bucket for one plan and the gpt-4o* models; a key daily token
// quota for one tenant; a global token bucket for one model family. Every
// limit is named l<j>.
func Config(keys, limits int, upstreamURL string) []byte {
	var b strings.Builder
	b.Grow(keys*130 + limits*170 + 256)
	fmt.Fprintf(&b, "upstreams:\n  - name: openai\n    flavor: openai\n    base_url: %q\n    no_key: true\n", upstreamURL)
	b.WriteString("keys:\n")
	for i := range keys {
		sum := sha256.Sum256([]byte(Key(i)))
		fmt.Fprintf(&b, "  - key_sha256: %s\n    user: %s\n    tenant: %s\n    plan: %s\n",
			hex.EncodeToString(sum[:]), User(i), Tenant(i, keys), Plan(i))
	}
	zones := []string{"UTC", "America/New_York", "Europe/Paris", "Asia/Tokyo"}
	b.WriteString("limits:\n")
	nt := tenants(keys)
	for j := range limits {
		fmt.Fprintf(&b, "  - name: l%d\n", j)
		switch j % 6 {
		case 0:
			fmt.Fprintf(&b, "    scope: tenant\n    unit: tokens\n    rate: %d\n    per: 1m\n    burst: %d\n    tenants: [t%d]\n", 100000+j, 200000+j, (j/6)%nt)
		case 1:
			fmt.Fprintf(&b, "    scope: user\n    unit: requests\n    rate: 60\n    per: 1m\n    users: [u%d]\n", (j/6)%max(keys, 1))
		case 2:
			fmt.Fprintf(&b, "    scope: tenant\n    unit: usd\n    quota: %d\n    period: month\n    timezone: %s\n    warn_at: [0.8, 0.95]\n    tenants: [t%d]\n",
				500+j, zones[(j/6)%len(zones)], (j/6)%nt)
		case 3:
			fmt.Fprintf(&b, "    scope: user\n    unit: tokens\n    rate: 20000\n    per: 1m\n    plans: [%s]\n    models: [\"gpt-4o*\"]\n    tenants: [t%d]\n", plans[(j/6)%len(plans)], (j/6)%nt)
		case 4:
			fmt.Fprintf(&b, "    scope: key\n    unit: tokens\n    quota: 2000000\n    period: day\n    tenants: [t%d]\n", (j/6)%nt)
		case 5:
			fmt.Fprintf(&b, "    scope: global\n    unit: tokens\n    rate: 10000000\n    per: 1m\n    models: [\"family-%d-*\"]\n", j/6)
		}
	}
	return []byte(b.String())
}
