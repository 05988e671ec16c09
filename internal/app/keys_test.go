package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/fakeclock"
	"github.com/llmguard/llmguard/internal/redistest"
	"github.com/llmguard/llmguard/keystore"
)

// Two nodes on one Redis: a key created through node A's admin API works
// on node B by notification (B's periodic resync is an hour away, and B
// makes no whole read between the creation and the first success), a key
// revoked through B is refused by both with 401 "revoked", and the audit
// stream holds who did what, never the secret.
func TestKeysTwoNodesShareKeys(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	nodes := startKeyNodes(t, 2, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1h") }, nil)
	a, b := nodes[0], nodes[1]
	resyncsB := b.settled()
	a.settled()

	k := a.create(`{"tenant":"acme","user":"carol","plan":"pro"}`, "ops-alice")
	if !strings.HasPrefix(k.Secret, keystore.SecretPrefix) || len(k.Secret) != len(keystore.SecretPrefix)+43 {
		t.Fatalf("secret %q", k.Secret)
	}
	if k.Key.SHA256 != keystore.Hash(k.Secret) || k.Key.ID != k.Key.SHA256[:16] || k.Key.Status != "active" || k.Key.CreatedBy != "ops-alice" {
		t.Errorf("created key: %+v", k.Key)
	}
	if st, body := a.chat(k.Secret); st != 200 {
		t.Fatalf("node A refuses the key it created: %d %s", st, body)
	}
	took := b.waitStatus(k.Secret, 200)
	t.Logf("node B served the new key %v after node A's answer", took)
	if got := b.metric(`llmguard_key_store_notifications_total{result="applied"}`); got < 1 {
		t.Errorf("node B applied %v notifications, want ≥ 1", got)
	}
	if got := b.metric(`llmguard_key_store_resyncs_total{result="ok"}`); got != resyncsB {
		t.Errorf("node B made %v whole reads, %v before the creation: the key must have come by notification", got, resyncsB)
	}
	if got := b.metric(`llmguard_keys{source="store"}`); got != 1 {
		t.Errorf(`node B llmguard_keys{source="store"} = %v, want 1`, got)
	}
	if got := b.metric(`llmguard_keys{source="file"}`); got != 1 {
		t.Errorf(`node B llmguard_keys{source="file"} = %v, want 1`, got)
	}

	// The file key still works beside it, on both.
	for _, n := range nodes {
		if st, body := n.chat("sk-file-alice"); st != 200 {
			t.Errorf("node %s refuses the file key: %d %s", n.name, st, body)
		}
	}

	// Revoked through B (no actor header: recorded as admin-token).
	st, body := b.adminCall(http.MethodDelete, "/admin/keys/"+k.Key.ID, "", "")
	if st != 200 || !strings.Contains(body, `"status": "revoked"`) {
		t.Fatalf("revoke: %d %s", st, body)
	}
	for _, n := range []*keyNode{b, a} {
		n.waitStatus(k.Secret, 401)
		st, body := n.chat(k.Secret)
		var e struct {
			Error struct{ Message, Code string }
		}
		json.Unmarshal([]byte(body), &e)
		if st != 401 || e.Error.Code != "revoked_api_key" || !strings.Contains(e.Error.Message, "revoked") {
			t.Errorf("node %s: revoked key answered %d %s", n.name, st, body)
		}
	}
	if st, body := a.adminCall(http.MethodPost, "/admin/keys/"+k.Key.ID+"/revoke", "", ""); st != 409 || !strings.Contains(body, "already revoked") {
		t.Errorf("second revoke: %d %s", st, body)
	}

	// The audit stream: who, what, when; never the secret.
	st, body = a.adminCall(http.MethodGet, "/admin/keys/audit", "", "")
	var au struct{ Entries []keystore.AuditEntry }
	if err := json.Unmarshal([]byte(body), &au); err != nil || st != 200 || len(au.Entries) != 2 {
		t.Fatalf("audit: %d %s", st, body)
	}
	rev, cre := au.Entries[0], au.Entries[1]
	if rev.Action != "revoke" || rev.Actor != "admin-token" || rev.Auth != "token" || rev.KeyID != k.Key.ID ||
		cre.Action != "create" || cre.Actor != "ops-alice" || cre.Tenant != "acme" || cre.User != "carol" || cre.Plan != "pro" ||
		cre.At.IsZero() || rev.At.Before(cre.At) {
		t.Errorf("audit entries: %+v", au.Entries)
	}
	assertNoSecretInRedis(t, srv, k.Secret)
}

// assertNoSecretInRedis fails t when any string of the key store's Redis
// keys (registry, audit stream) holds secret.
func assertNoSecretInRedis(t *testing.T, srv *redistest.Server, secret string) {
	t.Helper()
	ctx := context.Background()
	c := srv.Client()
	all, err := c.HGetAll(ctx, keystore.RegistryKey).Result()
	if err != nil || len(all) == 0 {
		t.Fatalf("registry: %v %v", all, err)
	}
	for id, v := range all {
		if strings.Contains(v, secret) || strings.Contains(id, secret) {
			t.Errorf("the registry holds the secret: %s", v)
		}
	}
	msgs, err := c.XRange(ctx, keystore.AuditKey, "-", "+").Result()
	if err != nil || len(msgs) == 0 {
		t.Fatalf("audit stream: %v %v", msgs, err)
	}
	if b, _ := json.Marshal(msgs); strings.Contains(string(b), secret) {
		t.Errorf("the audit stream holds the secret: %s", b)
	}
}

// An expiry is honoured to the second on every node, on their (injected)
// clock: a key created with expires_in 10s works at 9.999 s and is refused,
// with 401 "expired", at 10 s, in each API flavor's error shape.
func TestKeysExpiryToTheSecond(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := fakeclock.New(t0)
	nodes := startKeyNodes(t, 2, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1h") }, clock.Now)
	a, b := nodes[0], nodes[1]
	k := a.create(`{"tenant":"acme","user":"dave","expires_in":"10s"}`, "")
	if want := t0.Add(10 * time.Second); !k.Key.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at %v, want %v", k.Key.ExpiresAt, want)
	}
	b.waitStatus(k.Secret, 200)
	clock.Advance(10*time.Second - time.Millisecond)
	for _, n := range nodes {
		if st, body := n.chat(k.Secret); st != 200 {
			t.Errorf("node %s at 9.999 s: %d %s", n.name, st, body)
		}
	}
	clock.Advance(time.Millisecond)
	for _, n := range nodes {
		st, body := n.chat(k.Secret)
		if st != 401 || !strings.Contains(body, `"code":"expired_api_key"`) || !strings.Contains(body, "expired") {
			t.Errorf("node %s at 10 s: %d %s", n.name, st, body)
		}
		// Anthropic's shape (x-api-key) and Azure's (api-key).
		st, body = n.sendAs("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", k.Secret)
		if st != 401 || !strings.Contains(body, `"type":"authentication_error"`) || !strings.Contains(body, "expired") {
			t.Errorf("node %s anthropic: %d %s", n.name, st, body)
		}
		st, body = n.sendAs("/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21", hiBody, "api-key", k.Secret)
		if st != 401 || !json.Valid([]byte(body)) || !strings.Contains(body, "expired") {
			t.Errorf("node %s azure: %d %s", n.name, st, body)
		}
	}
	st, body := a.adminCall(http.MethodGet, "/admin/keys/"+k.Key.ID, "", "")
	if st != 200 || !strings.Contains(body, `"status": "expired"`) {
		t.Errorf("show an expired key: %d %s", st, body)
	}
	if st, body := a.adminCall(http.MethodGet, "/admin/keys?status=active", "", ""); st != 200 || strings.Contains(body, k.Key.ID) {
		t.Errorf("list ?status=active shows the expired key: %d %s", st, body)
	}
}

// A key rotated with a grace period works to its last instant on its
// (injected) clock and is then refused with an expired key's 401 and code,
// and a message that says it was rotated: its holder may not know a
// successor was made (trial4 read "has expired" and looked for an expiry
// nobody had set). The successor works throughout.
func TestKeysRotatedPastGraceSaysRotated(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	clock := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	n := startKeyNodes(t, 1, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1h") }, clock.Now)[0]
	k := n.create(`{"tenant":"acme","user":"rita"}`, "")
	n.waitStatus(k.Secret, 200)
	st, body := n.adminCall(http.MethodPost, "/admin/keys/"+k.Key.ID+"/rotate", `{"grace":"1m"}`, "ops")
	if st != 201 {
		t.Fatalf("rotate: %d %s", st, body)
	}
	var r NewKey
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	n.waitStatus(r.Secret, 200)
	clock.Advance(time.Minute - time.Millisecond)
	if st, body := n.chat(k.Secret); st != 200 {
		t.Errorf("the old key within its grace: %d %s", st, body)
	}
	clock.Advance(time.Millisecond)
	st, body = n.chat(k.Secret)
	if st != 401 || !strings.Contains(body, `"code":"expired_api_key"`) || !strings.Contains(body, "rotated") {
		t.Errorf("the old key past its grace: %d %s, want 401 expired_api_key saying it was rotated", st, body)
	}
	st, body = n.sendAs("/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", k.Secret)
	if st != 401 || !strings.Contains(body, `"type":"authentication_error"`) || !strings.Contains(body, "rotated") {
		t.Errorf("the old key past its grace, anthropic: %d %s", st, body)
	}
	if st, body := n.chat(r.Secret); st != 200 {
		t.Errorf("the successor: %d %s", st, body)
	}
	// A key that expired unrotated still says so.
	e := n.create(`{"tenant":"acme","user":"eve","expires_in":"10s"}`, "")
	n.waitStatus(e.Secret, 200)
	clock.Advance(10 * time.Second)
	if st, body := n.chat(e.Secret); st != 401 || !strings.Contains(body, "has expired") || strings.Contains(body, "rotated") {
		t.Errorf("an expired key: %d %s", st, body)
	}
}

// A node cut off from the store keeps serving the keys it knows (and
// refusing the revoked ones); what changed meanwhile reaches it when the
// link returns, by the whole read its new subscription asks for (its
// periodic resync is an hour away).
func TestKeysNodeCutOffKeepsServingThenCatchesUp(t *testing.T) {
	srv := redistest.Shared(t)
	link := startCutProxy(t, srv.Addr())
	nodes := startKeyNodes(t, 2, func(i int, mockURL string) string {
		addr := srv.Addr()
		if i == 0 {
			addr = link.Addr() // node A reaches Redis through the link
		}
		return keyStoreConfig(t, mockURL, fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, addr), "1h")
	}, nil)
	a, b := nodes[0], nodes[1]
	a.settled()
	kept := b.create(`{"tenant":"acme","user":"erin"}`, "")
	gone := b.create(`{"tenant":"acme","user":"frank"}`, "")
	a.waitStatus(gone.Secret, 200)
	if st, body := b.adminCall(http.MethodDelete, "/admin/keys/"+gone.Key.ID, "", ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	a.waitStatus(gone.Secret, 401)
	resyncs := a.metric(`llmguard_key_store_resyncs_total{result="ok"}`)

	link.Cut()
	a.waitMetric("llmguard_key_store_subscribed", func(v float64) bool { return v == 0 })
	later := b.create(`{"tenant":"acme","user":"grace"}`, "")
	if st, body := b.adminCall(http.MethodPost, "/admin/keys/"+kept.Key.ID+"/revoke", "", ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	for range 3 {
		if st, body := a.chat(kept.Secret); st != 200 {
			t.Fatalf("cut-off node A refuses a key it knew: %d %s", st, body)
		}
		if st, _ := a.chat(gone.Secret); st != 401 {
			t.Fatalf("cut-off node A serves a key revoked before the cut: %d", st)
		}
		if st, _ := a.chat(later.Secret); st != 401 {
			t.Fatalf("cut-off node A serves a key it cannot have heard of: %d", st)
		}
	}
	// Node A lists from its own copy while Redis cannot be read.
	if st, body := a.adminCall(http.MethodGet, "/admin/keys", "", ""); st != 200 || !strings.Contains(body, `"source": "node"`) || !strings.Contains(body, kept.Key.ID) {
		t.Errorf("list while cut off: %d %s", st, body)
	}
	if st, body := a.adminCall(http.MethodPost, "/admin/keys", `{"tenant":"acme"}`, ""); st != 503 {
		t.Errorf("create while cut off: %d %s", st, body)
	}

	link.Restore()
	a.waitStatus(later.Secret, 200)
	a.waitStatus(kept.Secret, 401)
	if got := a.metric(`llmguard_key_store_resyncs_total{result="ok"}`); got <= resyncs {
		t.Errorf("node A caught up without a whole read (%v, %v before): the missed changes were never published to it", got, resyncs)
	}
}

// The periodic resync is the safety net: a change whose notification was
// lost (written to the registry without one) reaches every node within a
// resync period.
func TestKeysPeriodicResyncFindsLostChanges(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	nodes := startKeyNodes(t, 1, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1s") }, nil)
	n := nodes[0]
	n.settled()
	secret := keystore.NewSecret()
	h := keystore.Hash(secret)
	rec := keystore.Record{ID: h[:16], SHA256: h, User: "henry", Tenant: "acme", CreatedAt: time.Now().UTC(), CreatedBy: "test", Rev: 1}
	b, _ := json.Marshal(rec)
	if err := srv.Client().HSet(context.Background(), keystore.RegistryKey, rec.ID, b).Err(); err != nil {
		t.Fatal(err)
	}
	n.waitStatus(secret, 200)
	if got := n.metric(`llmguard_key_store_notifications_total{result="applied"}`); got != 0 {
		t.Errorf("%v notifications applied; the change had none", got)
	}
}

// Redis down: the nodes keep serving the keys they know, through failed
// periodic resyncs, and the admin API says the store is unavailable; Redis
// back: a key created then reaches the other node again.
func TestKeysRedisDownKeepsKnownKeys(t *testing.T) {
	srv := redistest.Start(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 100ms, breaker: {min_calls: 2, open_for: 200ms}}`, srv.Addr())
	nodes := startKeyNodes(t, 2, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1s") }, nil)
	a, b := nodes[0], nodes[1]
	k := a.create(`{"tenant":"acme","user":"ivy"}`, "")
	b.waitStatus(k.Secret, 200)
	srv.Kill()
	for _, n := range nodes {
		n.waitMetric("llmguard_key_store_subscribed", func(v float64) bool { return v == 0 })
		n.waitMetric(`llmguard_key_store_resyncs_total{result="error"}`, func(v float64) bool { return v >= 1 })
		for range 3 {
			if st, body := n.chat(k.Secret); st != 200 {
				t.Fatalf("node %s with Redis down refuses a known key: %d %s", n.name, st, body)
			}
		}
		if st, body := n.adminCall(http.MethodPost, "/admin/keys", `{"tenant":"acme"}`, ""); st != 503 || !strings.Contains(body, "unavailable") {
			t.Errorf("node %s create with Redis down: %d %s", n.name, st, body)
		}
	}
	srv.Restart()
	for _, n := range nodes {
		n.waitMetric("llmguard_key_store_subscribed", func(v float64) bool { return v == 1 })
	}
	// The client's pool may refuse dials for up to a second after a run of
	// failed ones (go-redis re-dials in the background): retry.
	var k2 NewKey
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, body := b.adminCall(http.MethodPost, "/admin/keys", `{"tenant":"acme","user":"jack"}`, "")
		if st == http.StatusCreated {
			json.Unmarshal([]byte(body), &k2)
			break
		}
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("create after Redis came back: %d %s", st, body)
		}
	}
	a.waitStatus(k2.Secret, 200)
}

// On a Redis Cluster of three masters the registry, its revision and the
// audit stream share one slot (one MULTI/EXEC), and notifications reach
// every node: a key created on A works on B; revoked on B, refused on A.
func TestKeysTwoNodesOnACluster(t *testing.T) {
	c := redistest.SharedCluster(t, 3)
	if c.Slot(keystore.RegistryKey) != c.Slot(keystore.AuditKey) || c.Slot(keystore.RegistryKey) != c.Slot(keystore.RevKey) ||
		c.Slot(keystore.RegistryKey) != c.Slot(keystore.Channel) {
		t.Fatal("the key store's keys are in more than one slot")
	}
	store := fmt.Sprintf(`{backend: redis_cluster, cluster_addrs: [%s], timeout: 200ms}`, strings.Join(c.Addrs(), ", "))
	nodes := startKeyNodes(t, 2, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1h") }, nil)
	a, b := nodes[0], nodes[1]
	resyncs := b.settled()
	a.settled()
	k := a.create(`{"tenant":"acme","user":"kim","plan":"pro"}`, "")
	b.waitStatus(k.Secret, 200)
	if got := b.metric(`llmguard_key_store_resyncs_total{result="ok"}`); got != resyncs {
		t.Errorf("node B made a whole read (%v, %v before): the key must have come by notification", got, resyncs)
	}
	st, body := b.adminCall(http.MethodPost, "/admin/keys/"+k.Key.ID+"/rotate", `{"grace":"0s"}`, "ops")
	if st != 201 {
		t.Fatalf("rotate: %d %s", st, body)
	}
	var r NewKey
	json.Unmarshal([]byte(body), &r)
	if r.Previous == nil || r.Previous.Status != "revoked" || r.Key.RotatedFrom != k.Key.ID || r.Key.User != "kim" || r.Key.Plan != "pro" {
		t.Errorf("rotation: %s", body)
	}
	a.waitStatus(k.Secret, 401)
	a.waitStatus(r.Secret, 200)
	if st, body := a.adminCall(http.MethodGet, "/admin/keys?tenant=acme", "", ""); st != 200 || !strings.Contains(body, r.Key.ID) || !strings.Contains(body, `"source": "store"`) {
		t.Errorf("list: %d %s", st, body)
	}
}

// /admin/usage reports the quotas of tenants whose only keys are stored
// keys.
func TestKeysUsageReportsStoredKeysQuotas(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	n := startKeyNodes(t, 1, func(_ int, mockURL string) string {
		return strings.Replace(keyStoreConfig(t, mockURL, store, "1h"), "limits:\n",
			"limits:\n  - {name: beta-day, scope: tenant, unit: requests, quota: 100, period: day, timezone: Asia/Tokyo, tenants: [beta]}\n", 1)
	}, nil)[0]
	k := n.create(`{"tenant":"beta","user":"lee"}`, "")
	for range 3 {
		if st, body := n.chat(k.Secret); st != 200 {
			t.Fatalf("%d %s", st, body)
		}
	}
	st, body := n.adminCall(http.MethodGet, "/admin/usage?tenant=beta&period=day", "", "")
	var rep UsageReport
	if err := json.Unmarshal([]byte(body), &rep); err != nil || st != 200 || len(rep.Quotas) != 1 || rep.Quotas[0].Used != 3 {
		t.Errorf("usage: %d %s", st, body)
	}
	// The period runs in the zone of the budgets of the tenant's stored
	// keys, as for keys in the file.
	if rep.Period.TimeZone != "Asia/Tokyo" {
		t.Errorf("usage period in %q, want the budget's Asia/Tokyo: %s", rep.Period.TimeZone, body)
	}
}

// A tenant whose only stored key is revoked keeps its budget's spend of
// the period in the usage reports, the fleet's and its own, though no
// limit names it: the key store knows the tenant (trial13: after carol's
// key was revoked, `llmguard usage` dropped acme's team-daily row and
// `--tenant acme` said "no budget applies" and reported the month).
func TestKeysUsageKeepsRevokedTenantsBudget(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	n := startKeyNodes(t, 1, func(_ int, mockURL string) string {
		return strings.Replace(keyStoreConfig(t, mockURL, store, "1h"), "limits:\n",
			"limits:\n  - {name: team-day, scope: tenant, unit: requests, quota: 100, period: day, timezone: Asia/Tokyo}\n", 1)
	}, nil)[0]
	k := n.create(`{"tenant":"gamma","user":"lee"}`, "")
	for range 3 {
		if st, body := n.chat(k.Secret); st != 200 {
			t.Fatalf("%d %s", st, body)
		}
	}
	if st, body := n.adminCall(http.MethodDelete, "/admin/keys/"+k.Key.ID, "", ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	n.waitStatus(k.Secret, 401)
	for _, query := range []string{"", "tenant=gamma"} {
		st, body := n.adminCall(http.MethodGet, "/admin/usage?"+query, "", "")
		var rep UsageReport
		if err := json.Unmarshal([]byte(body), &rep); err != nil || st != 200 {
			t.Fatalf("usage?%s: %d %s", query, st, body)
		}
		if !slices.ContainsFunc(rep.Quotas, func(q QuotaState) bool { return q.Limit == "team-day" && q.Subject == "gamma" && q.Used == 3 }) {
			t.Errorf("usage?%s: quota rows %+v, want team-day of gamma, 3 used", query, rep.Quotas)
		}
		if rep.Period.Name != "day" || rep.Period.TimeZone != "Asia/Tokyo" {
			t.Errorf("usage?%s: period %s in %s, want the budget's day in Asia/Tokyo", query, rep.Period.Name, rep.Period.TimeZone)
		}
	}
	// A tenant whose key was revoked before any call is known, not
	// misspelt: its note says so.
	d := n.create(`{"tenant":"delta","user":"dee"}`, "")
	if st, body := n.adminCall(http.MethodDelete, "/admin/keys/"+d.Key.ID, "", ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	st, body := n.adminCall(http.MethodGet, "/admin/usage?tenant=delta", "", "")
	var rep UsageReport
	if err := json.Unmarshal([]byte(body), &rep); err != nil || st != 200 || !strings.Contains(rep.Note, "no active key") {
		t.Errorf("usage?tenant=delta: %d note %q, want one saying it has no active key", st, rep.Note)
	}
	// Its own report lists its budget; the fleet's leaves out the zero
	// rows of a tenant known only from revoked keys (every tenant a
	// revoked key ever belonged to would add them) and keeps gamma's.
	deltaRow := func(q QuotaState) bool { return q.Limit == "team-day" && q.Subject == "delta" }
	if !slices.ContainsFunc(rep.Quotas, deltaRow) {
		t.Errorf("usage?tenant=delta: quota rows %+v, want team-day of delta", rep.Quotas)
	}
	st, body = n.adminCall(http.MethodGet, "/admin/usage", "", "")
	var fleet UsageReport
	if err := json.Unmarshal([]byte(body), &fleet); err != nil || st != 200 {
		t.Fatalf("usage: %d %s", st, body)
	}
	if slices.ContainsFunc(fleet.Quotas, deltaRow) || !slices.ContainsFunc(fleet.Quotas, func(q QuotaState) bool { return q.Subject == "gamma" }) {
		t.Errorf("usage: quota rows %+v, want gamma's and none of delta's (revoked, nothing used)", fleet.Quotas)
	}
}

// A revoked stored key's refusal names the key, its user and tenant, and
// the endpoint in the access log: the operator sees which key a client
// still uses.
func TestKeysRevokedKeyNamedInAccessLog(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	logFile := filepath.Join(t.TempDir(), "access.log")
	n := startKeyNodes(t, 1, func(_ int, mockURL string) string {
		return keyStoreConfig(t, mockURL, store, "1h") + fmt.Sprintf("access_log: {enabled: true, format: json, output: %q}\n", logFile)
	}, nil)[0]
	k := n.create(`{"tenant":"beta","user":"lee"}`, "")
	if st, body := n.chat(k.Secret); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	if st, body := n.adminCall(http.MethodDelete, "/admin/keys/"+k.Key.ID, "", ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	n.waitStatus(k.Secret, 401)
	deadline := time.Now().Add(20 * time.Second) // a failure timeout: the line is written as the answer goes
	for {
		b, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(string(b), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) != nil || e["status"] != 401.0 {
				continue
			}
			if e["key_id"] != k.Key.ID || e["user"] != "lee" || e["tenant"] != "beta" || e["kind"] != "chat" {
				t.Fatalf("401 line %s: want key_id %s, user lee, tenant beta, kind chat", line, k.Key.ID)
			}
			if strings.Contains(string(b), k.Secret) {
				t.Fatal("the secret reached the access log")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 401 line in the access log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A user whose only stored key is revoked keeps the rows of its user and
// key budgets that it used this period, in the fleet's usage report and
// its tenant's, beside a colleague whose key is still active: the spend
// stays in the store until the period ends (trial14: lee's user-day and
// key-day rows vanished with the key, though the tenant's other user kept
// the tenant known). A user whose revoked key used nothing gets no row.
func TestKeysUsageKeepsRevokedUsersBudgets(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	n := startKeyNodes(t, 1, func(_ int, mockURL string) string {
		return strings.Replace(keyStoreConfig(t, mockURL, store, "1h"), "limits:\n",
			"limits:\n  - {name: user-day, scope: user, unit: requests, quota: 100, period: day}\n"+
				"  - {name: key-day, scope: key, unit: requests, quota: 100, period: day}\n", 1)
	}, nil)[0]
	lee := n.create(`{"tenant":"eta","user":"lee"}`, "")
	mia := n.create(`{"tenant":"eta","user":"mia"}`, "")
	idle := n.create(`{"tenant":"eta","user":"ned"}`, "")
	for range 3 {
		if st, body := n.chat(lee.Secret); st != 200 {
			t.Fatalf("%d %s", st, body)
		}
	}
	if st, body := n.chat(mia.Secret); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	for _, k := range []string{lee.Key.ID, idle.Key.ID} {
		if st, body := n.adminCall(http.MethodDelete, "/admin/keys/"+k, "", ""); st != 200 {
			t.Fatalf("revoke: %d %s", st, body)
		}
	}
	n.waitStatus(lee.Secret, 401)
	for _, query := range []string{"", "tenant=eta"} {
		st, body := n.adminCall(http.MethodGet, "/admin/usage?"+query, "", "")
		var rep UsageReport
		if err := json.Unmarshal([]byte(body), &rep); err != nil || st != 200 {
			t.Fatalf("usage?%s: %d %s", query, st, body)
		}
		used := func(limit, subject string) int64 {
			for _, q := range rep.Quotas {
				if q.Limit == limit && q.Subject == subject {
					return q.Used
				}
			}
			return -1
		}
		for _, c := range []struct {
			limit, subject string
			want           int64
		}{
			{"user-day", "lee", 3}, {"key-day", lee.Key.ID, 3},
			{"user-day", "mia", 1}, {"key-day", mia.Key.ID, 1},
			{"user-day", "ned", -1}, {"key-day", idle.Key.ID, -1},
		} {
			if got := used(c.limit, c.subject); got != c.want {
				t.Errorf("usage?%s: %s of %s used %d (-1: no row), want %d; quota rows %+v", query, c.limit, c.subject, got, c.want, rep.Quotas)
			}
		}
	}
}
