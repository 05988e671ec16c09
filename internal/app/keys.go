package app

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/respguard"
	"github.com/llmguard/llmguard/keystore"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

// keyStore is the node's side of the key store (README, "Managing keys"):
// the registry in Redis, this node's copy of it and the syncer keeping the
// copy current.
type keyStore struct {
	registry *keystore.Registry
	cache    *keystore.Cache
	syncer   *keystore.Syncer
	client   redis.UniversalClient
}

// keyStoreTimeout bounds one admin call to the registry.
const keyStoreTimeout = 5 * time.Second

// openKeyStore starts the key store when key_store.enabled (nil
// otherwise): its own Redis client on the store's address (a subscription
// holds a connection of its own; admin calls are few), a first read of the
// registry (a Redis that is down is not fatal: the node starts with no
// stored keys and reads them when Redis answers), and the syncer.
func openKeyStore(cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*keyStore, error) {
	kc := cfg.KeyStore
	if !kc.Enabled {
		return nil, nil
	}
	const io = time.Second
	var client redis.UniversalClient
	onError := func() {}
	switch cfg.Store.Kind() {
	case spec.BackendRedis:
		opt, err := redis.ParseURL(cfg.Store.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("app: store.redis_url: %w", err)
		}
		opt.PoolSize, opt.MinIdleConns = 4, 0
		opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout, opt.DialerRetries = io, io, io, 1
		client = respguard.NewClient(opt)
	case spec.BackendRedisCluster:
		opt, err := clusterOptions(cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		opt.PoolSize = 4
		opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout, opt.DialerRetries = io, io, io, 1
		cc := respguard.NewClusterClient(opt)
		client = cc
		// A subscription to a master that failed over fails until the
		// client sees the new slot map.
		onError = func() { cc.ReloadState(context.Background()) }
	default: // config.Validate refuses it
		return nil, fmt.Errorf("app: key_store.enabled needs a redis or redis_cluster store (got %q)", cfg.Store.Backend)
	}
	m, err := keystore.NewMetrics(reg)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("app: %w", err)
	}
	ks := &keyStore{client: client, cache: keystore.NewCache(),
		registry: keystore.NewRegistry(keystore.RegistryOptions{Client: client, AuditMaxLen: kc.AuditMaxLen, MaxKeys: kc.MaxKeys})}
	ks.syncer = keystore.StartSyncer(keystore.SyncOptions{Client: client, Registry: ks.registry, Cache: ks.cache,
		Resync: time.Duration(kc.Resync), OnError: onError, Logger: log, Metrics: m})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ks.syncer.Resync(ctx); err != nil {
		log.Warn("key store: could not read the stored keys at start-up; they are read when Redis answers", "err", err)
	}
	return ks, nil
}

// Close stops the syncer and closes the client.
func (k *keyStore) Close() error {
	k.syncer.Close()
	return k.client.Close()
}

// keySource is the proxy's view of the stored keys: nil (no interface
// holding a nil pointer) when the key store is off.
func (k *keyStore) keySource() policy.KeySource {
	if k == nil {
		return nil
	}
	return k.cache
}

// keysCollector exports llmguard_keys{source}: the config file's keys,
// and the key store's active (not revoked, not expired) keys as this node
// knows them.
type keysCollector struct {
	a    *App
	desc *prometheus.Desc
}

func newKeysCollector(a *App) *keysCollector {
	return &keysCollector{a: a, desc: prometheus.NewDesc("llmguard_keys",
		"Virtual keys this node accepts, by source: file (the config's keys) or store (the key store's active keys, as this node knows them).",
		[]string{"source"}, nil)}
}

func (c *keysCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *keysCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.a.policy().FileKeys()), "file")
	if c.a.keys != nil {
		active, _, _ := c.a.keys.cache.Counts(c.a.now())
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(active), "store")
	}
}

// storePrincipals are the principals of the stored keys usable at now
// that the file does not shadow, for usage reports.
func (a *App) storePrincipals(pol *policy.Policy, now time.Time) []policy.Principal {
	if a.keys == nil {
		return nil
	}
	var out []policy.Principal
	for _, r := range a.keys.cache.Records() {
		if s, ok := hexSum(r.SHA256); ok && !pol.HasFileKey(s) && r.Status(now) == keystore.StatusActive {
			out = append(out, r.Stored().Principal)
		}
	}
	return out
}

// formerStorePrincipals are the principals of the stored keys revoked or
// expired at now (their tenant or user may have active keys too) that
// could still be used at since (revoked and expiring no earlier; zero
// since: all), for usage reports: a key revoked this period, and its
// user, still have their budgets' spend (trial14: a user whose only key
// was revoked lost its user and key budget rows), while a key that ended
// before every budget's period began has none, and revoked keys stay in
// the registry for good.
func (a *App) formerStorePrincipals(now, since time.Time) []policy.Principal {
	if a.keys == nil {
		return nil
	}
	var out []policy.Principal
	for _, r := range a.keys.cache.Records() {
		if r.Status(now) == keystore.StatusActive {
			continue
		}
		if !since.IsZero() && ((!r.RevokedAt.IsZero() && r.RevokedAt.Before(since)) || (!r.ExpiresAt.IsZero() && r.ExpiresAt.Before(since))) {
			continue
		}
		out = append(out, r.Stored().Principal)
	}
	return out
}

// KeyInfo is a stored key as the admin API shows it: its record and its
// status at the time of the answer (active, expired, revoked).
type KeyInfo struct {
	keystore.Record
	// Status is "active" for every key that works, an old key in its
	// rotation's grace period included; "expired" or "revoked" otherwise.
	Status string `json:"status"`
	// State is Status, except "grace" for a key that was rotated and still
	// works until its expires_at, so that it reads apart from its
	// successor (keystore.Record.State).
	State string `json:"state"`
	// GraceEnded, in a revoke's answer only, lists the ids of the keys
	// this one replaced that were still in their rotation's grace period
	// and were revoked with it (keystore.Registry.Revoke).
	GraceEnded []string `json:"grace_ended,omitempty"`
}

// KeyList is the body of GET /admin/keys.
type KeyList struct {
	Keys []KeyInfo `json:"keys"`
	// Source is "store" when read from Redis, "node" when Redis could not
	// be read and this is the answering node's copy.
	Source string `json:"source"`
}

// NewKey is the body of a create or rotate: the secret, shown only in this
// answer, and the new key's record; a rotation also returns the old one.
type NewKey struct {
	Secret   string   `json:"secret"`
	Key      KeyInfo  `json:"key"`
	Previous *KeyInfo `json:"previous,omitempty"`
}

// ActorHeader names the admin caller in the audit stream (`llmguard keys
// --actor`); without it the caller is recorded by how it authenticated.
const ActorHeader = "X-Llmguard-Actor"

// keysHandler serves the key store's admin API under /admin/keys:
//
//	GET    /admin/keys[?tenant=&user=&status=]   list (KeyList)
//	POST   /admin/keys                          create ({"tenant","user","plan","expires_at"|"expires_in"}) → 201 NewKey
//	GET    /admin/keys/audit[?count=N]          latest audit entries, newest first
//	GET    /admin/keys/{id}                     show (KeyInfo)
//	POST   /admin/keys/{id}/revoke, DELETE /admin/keys/{id}   revoke (KeyInfo)
//	POST   /admin/keys/{id}/rotate              rotate ({"grace":"1h"}) → 201 NewKey
//
// Authorization as /admin/usage's. Errors are {"error": "..."}: 400 a bad
// request, 404 no such key, 405 a wrong method, 409 already revoked or the
// registry full, 413 a body over 8 KiB, 501 the key store off, 503 Redis
// unavailable.
func (a *App) keysHandler(ctx *fasthttp.RequestCtx) {
	token, ok := a.adminGate(ctx)
	if !ok {
		return
	}
	status, body := a.serveKeys(ctx, token != "")
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(status)
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		b = []byte(`{"error":"encoding the answer failed"}`)
	}
	ctx.SetBody(append(b, '\n'))
}

// errorBody is an admin API error's body.
type errorBody struct {
	Error string `json:"error"`
}

// serveKeys routes one authorized request; it returns the status and the
// body to encode.
func (a *App) serveKeys(ctx *fasthttp.RequestCtx, byToken bool) (int, any) {
	if a.keys == nil {
		msg := "the key store is off: set key_store.enabled: true (with a redis or redis_cluster store) to manage keys here"
		if a.Config.Store.Kind() == spec.BackendMemory {
			msg = "the key store needs store.backend redis or redis_cluster, shared by every node: with the memory store, keys live in the config file (keys:), and `llmguard keys hash` makes their key_sha256"
		}
		return fasthttp.StatusNotImplemented, errorBody{msg}
	}
	by := keystore.Actor{Name: "loopback", Auth: "loopback"}
	if byToken {
		by = keystore.Actor{Name: "admin-token", Auth: "token"}
	}
	if h := ctx.Request.Header.Peek(ActorHeader); len(h) > 0 {
		if err := keystore.CheckText(ActorHeader, string(h)); err != nil {
			return fasthttp.StatusBadRequest, errorBody{err.Error()}
		}
		by.Name = string(h)
	}
	rest, _ := strings.CutPrefix(string(ctx.Path()), "/admin/keys")
	rest = strings.Trim(rest, "/")
	id, action, _ := strings.Cut(rest, "/")
	method := string(ctx.Method())
	c, cancel := context.WithTimeout(context.Background(), keyStoreTimeout)
	defer cancel()
	switch {
	case id == "" && method == fasthttp.MethodGet:
		return a.listKeys(c, ctx.QueryArgs())
	case id == "" && method == fasthttp.MethodPost:
		now := a.now()
		spec, err := keystore.ParseCreate(ctx.PostBody(), now)
		if err != nil {
			return requestFailure(err)
		}
		secret, rec, err := a.keys.registry.Create(c, spec, by, now)
		if err != nil {
			return storeFailure(err)
		}
		a.keys.cache.Apply(rec) // this node serves it at once
		a.log.Info("key store: key created", "key_id", rec.ID, "tenant", rec.Tenant, "user", rec.User, "actor", by.Name)
		return fasthttp.StatusCreated, NewKey{Secret: secret, Key: info(rec, now)}
	case id == "audit" && action == "" && method == fasthttp.MethodGet:
		n, _ := strconv.ParseInt(string(ctx.QueryArgs().Peek("count")), 10, 64)
		if n == 0 {
			n = 50
		}
		entries, err := a.keys.registry.Audit(c, n)
		if err != nil {
			return storeFailure(err)
		}
		return fasthttp.StatusOK, map[string]any{"entries": entries}
	case !keystore.ValidID(id):
		return fasthttp.StatusNotFound, errorBody{"no such key: a key id is 16 lowercase hex digits (`llmguard keys list`)"}
	case action == "" && method == fasthttp.MethodGet:
		rec, err := a.keys.registry.Get(c, id)
		if err != nil {
			return storeFailure(err)
		}
		return fasthttp.StatusOK, info(rec, a.now())
	case (action == "" && method == fasthttp.MethodDelete) || (action == "revoke" && method == fasthttp.MethodPost):
		now := a.now()
		rec, ended, err := a.keys.registry.Revoke(c, id, by, now)
		if err != nil {
			return storeFailure(err)
		}
		a.keys.cache.Apply(rec)
		out := info(rec, now)
		for _, p := range ended {
			a.keys.cache.Apply(p)
			out.GraceEnded = append(out.GraceEnded, p.ID)
		}
		a.log.Info("key store: key revoked", "key_id", rec.ID, "tenant", rec.Tenant, "user", rec.User, "actor", by.Name, "grace_ended", out.GraceEnded)
		return fasthttp.StatusOK, out
	case action == "rotate" && method == fasthttp.MethodPost:
		grace, err := keystore.ParseRotate(ctx.PostBody())
		if err != nil {
			return requestFailure(err)
		}
		now := a.now()
		secret, next, old, err := a.keys.registry.Rotate(c, id, grace, by, now)
		if err != nil {
			return storeFailure(err)
		}
		a.keys.cache.Apply(old)
		a.keys.cache.Apply(next)
		a.log.Info("key store: key rotated", "key_id", old.ID, "new_key_id", next.ID, "grace", grace, "actor", by.Name)
		prev := info(old, now)
		return fasthttp.StatusCreated, NewKey{Secret: secret, Key: info(next, now), Previous: &prev}
	case action == "" || action == "revoke" || action == "rotate":
		return fasthttp.StatusMethodNotAllowed, errorBody{fmt.Sprintf("%s is not allowed here (see README, \"Managing keys\")", clipText(method))}
	}
	return fasthttp.StatusNotFound, errorBody{"no such endpoint under /admin/keys"}
}

// listKeys answers GET /admin/keys from the registry, or from this node's
// copy when Redis cannot be read; tenant, user and status (active: every
// key that works, those in a rotation's grace period included; grace: those
// alone; expired; revoked; default all) filter it.
func (a *App) listKeys(c context.Context, q *fasthttp.Args) (int, any) {
	tenant, user, status := string(q.Peek("tenant")), string(q.Peek("user")), string(q.Peek("status"))
	if status != "" && status != keystore.StatusActive && status != keystore.StatusExpired && status != keystore.StatusRevoked && status != keystore.StateGrace {
		return fasthttp.StatusBadRequest, errorBody{"status must be active, grace, expired or revoked"}
	}
	out := KeyList{Keys: []KeyInfo{}, Source: "store"}
	var recs []keystore.Record
	if snap, err := a.keys.registry.List(c); err == nil {
		recs = snap.Records
		keystore.SortRecords(recs)
	} else {
		a.log.Warn("key store: list from this node's copy; Redis could not be read", "err", err)
		recs, out.Source = a.keys.cache.Records(), "node"
	}
	now := a.now()
	for _, r := range recs {
		k := info(r, now)
		if (tenant == "" || r.Tenant == tenant) && (user == "" || r.User == user) && (status == "" || k.Status == status || k.State == status) {
			out.Keys = append(out.Keys, k)
		}
	}
	return fasthttp.StatusOK, out
}

func info(r keystore.Record, now time.Time) KeyInfo {
	return KeyInfo{Record: r, Status: r.Status(now), State: r.State(now)}
}

// requestFailure answers a body ParseCreate or ParseRotate refused.
func requestFailure(err error) (int, any) {
	if errors.Is(err, keystore.ErrBodyTooLarge) {
		return fasthttp.StatusRequestEntityTooLarge, errorBody{fmt.Sprintf("the body is over %d bytes", keystore.MaxRequestBytes)}
	}
	return fasthttp.StatusBadRequest, errorBody{err.Error()}
}

// storeFailure answers an error of the registry.
func storeFailure(err error) (int, any) {
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		return fasthttp.StatusNotFound, errorBody{"no such key"}
	case errors.Is(err, keystore.ErrRevoked):
		return fasthttp.StatusConflict, errorBody{"the key is already revoked"}
	case errors.Is(err, keystore.ErrRotated):
		return fasthttp.StatusConflict, errorBody{"the key was already rotated: rotate its successor (rotated_to)"}
	case errors.Is(err, keystore.ErrFull):
		return fasthttp.StatusConflict, errorBody{"the registry holds key_store.max_keys keys: raise key_store.max_keys (revoked keys count too)"}
	}
	return fasthttp.StatusServiceUnavailable, errorBody{"the key store (Redis) is unavailable: " + clipText(err.Error())}
}

func clipText(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// hexSum decodes a 64-digit hex SHA-256.
func hexSum(h string) (s [32]byte, ok bool) {
	if len(h) != 64 {
		return s, false
	}
	_, err := hex.Decode(s[:], []byte(h))
	return s, err == nil
}
