package config

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones for quotas, on machines without a zoneinfo database

	"github.com/llmguard/llmguard/internal/suggest"
	"github.com/llmguard/llmguard/spec"
)

// Error lists every problem found in a config, each prefixed by the path of
// the field at fault (e.g. "limits[0].scope: …").
type Error struct {
	Problems []string
}

func (e *Error) Error() string {
	return "config: " + strings.Join(e.Problems, "; ")
}

// checkFailureMode adds a problem at field unless v names a FailureMode
// ("open" or "closed").
func checkFailureMode(p *problems, field, v string) {
	if _, ok := spec.ParseFailureMode(v); !ok {
		p.notOneOf(field, v, spec.FailureModeNames())
	}
}

// MaxLimitName is the longest limit name, in bytes: a name is repeated in
// response headers, store keys and metric labels, which must stay small.
const MaxLimitName = 128

// MaxShards is the most shards a limit may be split into (limits[].shards):
// a denied request tries every shard, one store call each, so K bounds a
// denial's round trips; 256 spreads a bucket over more masters than a Redis
// Cluster usually has.
const MaxShards = 256

// MaxConnectionsFloor and MaxConnectionsCeiling bound max_connections, in caller
// connections, whether set or derived from the file-descriptor limit. Below
// MaxConnectionsFloor a proxy would refuse its 65th caller, worse than running
// out of descriptors under attack; above MaxConnectionsCeiling connections that
// each hold a 16 KiB read buffer while they send half a request could hold
// more than 1 GiB.
const (
	MaxConnectionsFloor   = 64
	MaxConnectionsCeiling = 65536
)

// MinMemoryLimitBytes is the least memory_limit_bytes set, in bytes: a
// smaller value is surely a slip (a count of MiB written as bytes), as
// llmguard holds about 110 MiB resident from start at the default config (its
// vocabularies and count table), and under a limit below what is live the
// collector runs without pause.
const MinMemoryLimitBytes = 32 << 20

// maxUnits bounds any amount in units (tokens, requests, micro-USD) so that
// it stays exact in a float64 (2^53), which the Redis scripts compute in.
const maxUnits = 1 << 52

// Validate checks every field and returns *Error naming each bad one, or nil.
// It does not apply defaults; Parse does both.
func (c *Config) Validate() error {
	var p problems
	checkAddr(&p, "listen", c.Listen)
	checkAddr(&p, "admin_listen", c.AdminListen)
	checkListeners(&p, c.Listen, c.AdminListen)
	checkTLS(&p, "tls", c.TLS)
	checkTLS(&p, "admin_tls", c.AdminTLS)
	if c.MaxBodyBytes < 0 {
		p.add("max_body_bytes", "must be positive (got %d)", c.MaxBodyBytes)
	}
	if c.MaxJSONDepth < 1 || c.MaxJSONDepth > 10000 {
		p.add("max_json_depth", "must be between 1 and 10000 (got %d)", c.MaxJSONDepth)
	}
	if c.MaxInflightBodyBytes < c.MaxBodyBytes {
		p.add("max_inflight_body_bytes", "must be at least max_body_bytes (%d), or no body of the largest size could ever be read (got %d)", c.MaxBodyBytes, c.MaxInflightBodyBytes)
	}
	checkPositiveDuration(&p, "client_write_timeout", c.ClientWriteTimeout)
	checkPositiveDuration(&p, "max_retry_wait", c.MaxRetryWait)
	for i, g := range c.UnmeteredPaths {
		if _, err := path.Match(g, "/"); err != nil || !strings.HasPrefix(g, "/") {
			p.add(fmt.Sprintf("unmetered_paths[%d]", i), "must be a path glob starting with / (got %q)", g)
		}
	}
	if c.MaxResponseBytes < 0 {
		p.add("max_response_bytes", "must be positive (got %d)", c.MaxResponseBytes)
	}
	if c.MaxConnections != 0 && (c.MaxConnections < MaxConnectionsFloor || c.MaxConnections > MaxConnectionsCeiling) {
		p.add("max_connections", "must be 0 (half the file-descriptor limit) or between %d and %d (got %d)", MaxConnectionsFloor, MaxConnectionsCeiling, c.MaxConnections)
	}
	if c.MaxInflightResponseBytes < minInflightResponseBytes {
		p.add("max_inflight_response_bytes", "must be at least %d bytes, or no answer of a few chunks could be held to read its usage (got %d)", minInflightResponseBytes, c.MaxInflightResponseBytes)
	}
	if c.CountCacheBytes < -1 || c.CountCacheBytes >= 0 && c.CountCacheBytes < 64<<10 {
		p.add("count_cache_bytes", "must be at least 65536 bytes (a smaller cache holds too few elements to help), or -1 for no cache (got %d)", c.CountCacheBytes)
	}
	if c.MemoryLimitBytes < -1 || c.MemoryLimitBytes > 0 && c.MemoryLimitBytes < MinMemoryLimitBytes {
		p.add("memory_limit_bytes", "must be 0 (derived from the budgets), -1 (no limit) or at least %d bytes (got %d)", MinMemoryLimitBytes, c.MemoryLimitBytes)
	}
	if c.DefaultMaxOutputTokens < 0 {
		p.add("default_max_output_tokens", "must be positive (got %d)", c.DefaultMaxOutputTokens)
	}
	checkOutputReservation(&p, c.OutputReservation)
	if c.DefaultMaxInputTokens < 0 {
		p.add("default_max_input_tokens", "must be positive (got %d)", c.DefaultMaxInputTokens)
	}
	if c.UsageCeilingWindow < 0 {
		p.add("usage_ceiling_window", "must be positive (got %d)", c.UsageCeilingWindow)
	}
	if v := c.ReportedCostCeilingUSD; !(v >= 0 && v <= 1e12) { // NaN fails both
		p.add("reported_cost_ceiling_usd", "must be between 0 and 1e12 (got %v)", v)
	}
	if c.ExactCountMaxBytes < 0 {
		p.add("exact_count_max_bytes", "must be positive (got %d)", c.ExactCountMaxBytes)
	}
	checkDuration(&p, "count_time_budget", c.CountTimeBudget) // 0: none

	if len(c.Upstreams) == 0 {
		p.add("upstreams", "at least one upstream is required")
	}
	names := map[string]bool{}
	prefixes := map[string]bool{}
	for i, u := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		if u.Name == "" {
			p.add(f+".name", "required")
		} else if names[u.Name] {
			p.add(f+".name", "duplicate upstream name %q", u.Name)
		}
		names[u.Name] = true
		if _, ok := spec.ParseFlavor(u.Flavor); !ok {
			p.notOneOf(f+".flavor", u.Flavor, spec.FlavorNames())
		}
		if pu, err := url.Parse(u.BaseURL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			p.add(f+".base_url", "must be an http:// or https:// URL with a host (got %q)%s", u.BaseURL, withScheme(u.BaseURL, "http://", ""))
		}
		if u.PathPrefix != "" {
			if !strings.HasPrefix(u.PathPrefix, "/") {
				p.add(f+".path_prefix", "must start with / (got %q)", u.PathPrefix)
			} else if prefixes[u.PathPrefix] {
				p.add(f+".path_prefix", "duplicate prefix %q", u.PathPrefix)
			}
			prefixes[u.PathPrefix] = true
		}
		if u.APIKeyEnv != "" && !envName(u.APIKeyEnv) {
			// Not echoed: what is pasted here by mistake is often the key itself.
			p.add(f+".api_key_env", "must name an environment variable (letters, digits and _, not starting with a digit), "+
				"not hold the key: the value given is not a variable name (not shown, in case it is a secret)")
		}
		if u.NoKey && u.APIKeyEnv != "" {
			p.add(f+".no_key", "set either api_key_env (the upstream's key) or no_key: true (it needs none), not both")
		}
		checkDuration(&p, f+".timeout", u.Timeout)
		checkPositiveDuration(&p, f+".idle_timeout", u.IdleTimeout)
		if u.MaxConns < 0 {
			p.add(f+".max_conns", "must be positive")
		}
		if len(u.Deployments) > 0 && u.Flavor != spec.FlavorAzure.String() {
			p.add(f+".deployments", "only an azure upstream has deployments (flavor is %q)", u.Flavor)
		}
		if _, ok := spec.ParseChatOutputField(u.ChatOutputField); !ok && u.ChatOutputField != "" {
			p.notOneOf(f+".chat_output_field", u.ChatOutputField, spec.ChatOutputFieldNames())
		}
		for _, d := range slices.Sorted(maps.Keys(u.Deployments)) {
			if d == "" || strings.Contains(d, "/") || u.Deployments[d] == "" {
				p.add(f+".deployments", "a deployment needs a name without / and a model (got %q: %q)", d, u.Deployments[d])
			}
		}
	}

	seen := map[string]int{}
	for i, k := range c.Keys {
		f := fmt.Sprintf("keys[%d]", i)
		switch {
		case k.Key == "" && k.KeySHA256 == "":
			p.add(f, "one of key_sha256 or key is required")
		case k.Key != "" && k.KeySHA256 != "":
			p.add(f, "set only one of key_sha256 or key")
		case k.KeySHA256 != "":
			if b, err := hex.DecodeString(k.KeySHA256); err != nil || len(b) != 32 {
				p.add(f+".key_sha256", "must be 64 hex digits (a SHA-256)")
			}
		}
		if k.Key != "" && strings.TrimSpace(k.Key) != k.Key {
			// Not echoed: it is a credential.
			p.add(f+".key", "has white space at its start or end: a caller's credential is read without it, so this key could never match")
		}
		if k.Tenant == "" {
			p.add(f+".tenant", "required")
		}
		id := k.KeySHA256 + "\x00" + k.Key
		if j, dup := seen[id]; dup {
			p.add(f, "duplicate of keys[%d]", j)
		}
		seen[id] = i
	}

	for _, name := range slices.Sorted(maps.Keys(c.priceKeys)) {
		checkPriceSides(&p, "models."+name, c.priceKeys[name])
	}
	for _, name := range c.writtenModels {
		if m, ok := c.Models[name]; ok && m.AliasOf == "" {
			checkTierSides(&p, "models."+name, m)
		}
	}
	for name, m := range c.Models {
		f := fmt.Sprintf("models.%s", name)
		if m.Encoding != "" && !slices.Contains(spec.EncodingNames(), m.Encoding) {
			p.notOneOf(f+".encoding", m.Encoding, spec.EncodingNames())
		}
		checkPrices(&p, f, m.Standard())
		checkSearchFees(&p, f+".search_request_usd_per_k", m.SearchRequestUSDPerK)
		if m.Priority != nil {
			checkPrices(&p, f+".priority", *m.Priority)
		}
		if m.Flex != nil {
			checkPrices(&p, f+".flex", *m.Flex)
		}
		if lc := m.LongContext; lc != nil {
			if lc.AboveInputTokens < 1 || lc.AboveInputTokens > maxUnits {
				p.add(f+".long_context.above_input_tokens", "must be a positive number of input tokens (got %d)", lc.AboveInputTokens)
			}
			checkPrices(&p, f+".long_context", lc.TierPrices)
			if lc.Priority != nil {
				checkPrices(&p, f+".long_context.priority", *lc.Priority)
			}
		}
		if m.AliasOf != "" {
			checkAlias(&p, f, name, m, c.Models)
		}
		if m.DefaultMaxOutputTokens < 0 {
			p.add(f+".default_max_output_tokens", "must be positive")
		}
		if m.MaxInputTokens < 0 {
			p.add(f+".max_input_tokens", "must be positive")
		}
		if m.MaxOutputTokens < 0 {
			p.add(f+".max_output_tokens", "must be positive")
		}
		if m.SafetyFactor != 0 && !(m.SafetyFactor >= 1 && m.SafetyFactor <= 10) {
			p.add(f+".safety_factor", "must be between 1 and 10 (got %v)", m.SafetyFactor)
		}
	}

	if c.DefaultPrice != nil {
		checkPrices(&p, "default_price", *c.DefaultPrice)
		if c.defaultPriceKeys != nil {
			checkPriceSides(&p, "default_price", c.defaultPriceKeys)
		}
		if !c.DefaultPrice.Priced() {
			p.add("default_price", "sets no price: give input_usd_per_mtok and output_usd_per_mtok, or remove it")
		}
	}
	if _, ok := spec.ParseServiceTier(c.DefaultServiceTier); !ok && c.DefaultServiceTier != "" {
		p.notOneOf("default_service_tier", c.DefaultServiceTier, spec.ServiceTierNames())
	}

	lnames := map[string]bool{}
	for i, l := range c.Limits {
		f := fmt.Sprintf("limits[%d]", i)
		switch {
		case l.Name == "":
			p.add(f+".name", "required")
		case len(l.Name) > MaxLimitName:
			p.add(f+".name", "at most %d bytes (got %d)", MaxLimitName, len(l.Name))
		case strings.ContainsAny(l.Name, "{}:\" ,;=\\"):
			p.add(f+".name", "must not contain braces, colons, quotes, spaces or ,;=\\ (got %q)", l.Name)
		case lnames[l.Name]:
			p.add(f+".name", "duplicate limit name %q", l.Name)
		}
		lnames[l.Name] = true
		if _, ok := spec.ParseScope(l.Scope); !ok {
			p.notOneOf(f+".scope", l.Scope, spec.ScopeNames())
		}
		checkFailureMode(&p, f+".on_failure", l.OnFailure)
		unit, unitOK := spec.ParseUnit(l.Unit)
		if !unitOK {
			p.notOneOf(f+".unit", l.Unit, spec.UnitNames())
		}
		scale := 1.0
		if unitOK && unit == spec.UnitUSD {
			scale = 1e6
		}
		if (l.Max != 0 || l.SlotLease != 0) && !(unitOK && unit == spec.UnitConcurrent) {
			p.add(f, "max and slot_lease apply to in-flight limits only (set unit: concurrent)")
		}
		switch {
		case unitOK && unit == spec.UnitConcurrent:
			c.checkSlots(&p, f, l)
		case l.Quota != 0:
			checkQuota(&p, f, l, scale)
		default:
			checkBucket(&p, f, l, scale)
		}
		checkAlgorithm(&p, f, l, scale)
		checkShards(&p, f, l, scale)
		checkShadow(&p, f, l)
		checkWait(&p, f, l)
		if l.Lease != nil {
			checkLease(&p, f+".lease", l, scale)
		}
		if unitOK {
			checkCapOutput(&p, f, l, unit)
		}
		for j, g := range append(append([]string{}, l.Models...), l.Paths...) {
			if _, err := path.Match(g, ""); err != nil {
				p.add(fmt.Sprintf("%s.models/paths[%d]", f, j), "bad glob %q: %v", g, err)
			}
		}
	}

	checkWaitQueue(&p, c.WaitQueue)
	if _, ok := spec.ParseBackend(c.Store.Backend); !ok {
		p.notOneOf("store.backend", c.Store.Backend, spec.BackendNames())
	}
	if c.Store.Kind() == spec.BackendRedis {
		if _, err := url.Parse(c.Store.RedisURL); err != nil || !strings.HasPrefix(c.Store.RedisURL, "redis") {
			p.add("store.redis_url", "must be a redis:// or rediss:// URL (got %q)%s", redactedURL(c.Store.RedisURL), withScheme(c.Store.RedisURL, "redis://", "/0"))
		}
	}
	if c.Store.Kind() == spec.BackendRedisCluster {
		if len(c.Store.ClusterAddrs) == 0 {
			p.add("store.cluster_addrs", "at least one host:port is required for redis_cluster")
		}
		if _, field, problem := c.Store.clusterSeeds(); problem != "" {
			p.add(field, "%s", problem)
		}
	}
	if c.Store.Timeout == invalidDuration {
		checkDuration(&p, "store.timeout", c.Store.Timeout)
	} else if c.Store.Timeout <= 0 {
		p.add("store.timeout", "must be positive")
	}
	if c.Store.PoolSize < 0 {
		p.add("store.pool_size", "must be positive")
	}
	checkFailureMode(&p, "store.on_failure", c.Store.OnFailure)
	if c.Store.Nodes < 1 {
		p.add("store.nodes", "must be at least 1 (got %d)", c.Store.Nodes)
	}
	checkDuration(&p, "store.breaker.open_for", c.Store.Breaker.OpenFor)
	checkDuration(&p, "store.breaker.window", c.Store.Breaker.Window)
	if r := c.Store.Breaker.FailureRatio; !(r > 0 && r <= 1) {
		p.add("store.breaker.failure_ratio", "must be in (0, 1] (got %v)", r)
	}
	if c.Store.VoidWindow == invalidDuration {
		checkDuration(&p, "store.void_window", c.Store.VoidWindow)
	} else if c.Store.VoidWindow < c.Store.Timeout {
		p.add("store.void_window", "must be at least store.timeout (got %v)", time.Duration(c.Store.VoidWindow))
	}
	if d := c.Store.HealthCheck; d != nil {
		checkDuration(&p, "store.health_check", *d)
	}
	if d := c.Store.DenyCache; d != nil {
		if *d == invalidDuration || *d < 0 {
			checkDuration(&p, "store.deny_cache", *d)
		} else if *d > MaxDenyCache {
			p.add("store.deny_cache", "must be at most %v: a longer one only holds denials past refunds for longer (got %v)",
				time.Duration(MaxDenyCache), time.Duration(*d))
		}
	}
	if c.Store.ReplayQueue < 0 {
		p.add("store.replay_queue", "must be positive")
	}

	if c.Ledger.RedisStream != "" {
		if !strings.HasPrefix(c.Ledger.RedisURL, "redis") {
			if c.Store.Kind() == spec.BackendRedisCluster {
				// The stream is written by a single-Redis client: a cluster
				// store lends it no address, and a cluster node would answer
				// MOVED for a key outside its slots.
				p.add("ledger.redis_url", "a redis:// URL of a standalone Redis is required for ledger.redis_stream with store.backend redis_cluster: the stream does not go to the cluster")
			} else {
				p.add("ledger.redis_url", "a redis:// URL is required for ledger.redis_stream (or a redis store)")
			}
		}
	}
	if c.Ledger.MaxLen < 0 || c.Ledger.MaxSizeMB < 0 || c.Ledger.MaxBackups < 0 {
		p.add("ledger", "maxlen, max_size_mb and max_backups must be positive")
	}
	c.validateRegions(&p)
	c.validateObserve(&p)
	c.validateAlerts(&p)
	c.validateKeyStore(&p)
	if len(p) > 0 {
		return &Error{Problems: p}
	}
	return nil
}

// checkPrices reports each price of t outside 0..1000000 USD per million
// tokens, under field f.
func checkPrices(p *problems, f string, t TierPrices) {
	for _, pr := range []struct {
		field string
		v     float64
	}{{"input_usd_per_mtok", t.InputUSDPerMTok}, {"cached_input_usd_per_mtok", t.CachedInputUSDPerMTok}, {"output_usd_per_mtok", t.OutputUSDPerMTok},
		{"cache_write_usd_per_mtok", t.CacheWriteUSDPerMTok}, {"cache_write_1h_usd_per_mtok", t.CacheWrite1hUSDPerMTok},
		{"audio_input_usd_per_mtok", t.AudioInputUSDPerMTok}, {"audio_output_usd_per_mtok", t.AudioOutputUSDPerMTok}} {
		if pr.v < 0 || math.IsNaN(pr.v) || pr.v > 1e6 {
			p.add(f+"."+pr.field, "must be between 0 and 1000000 USD per million tokens (got %v)", pr.v)
		}
	}
}

// checkSearchFees reports each fee of s outside 0..1000000 USD per 1,000
// requests, under field f.
func checkSearchFees(p *problems, f string, s SearchFees) {
	for _, fee := range []struct {
		field string
		v     float64
	}{{"low", s.Low}, {"medium", s.Medium}, {"high", s.High}} {
		if fee.v < 0 || math.IsNaN(fee.v) || fee.v > 1e6 {
			p.add(f+"."+fee.field, "must be between 0 and 1000000 USD per 1,000 requests (got %v)", fee.v)
		}
	}
}

// envName reports whether s can name an environment variable as a shell
// writes one (POSIX.1-2017, Base Definitions §8.1: letters, digits and
// underscore, not starting with a digit).
func envName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// checkPriceSides reports a price entry (field f) that names an input price
// but no output price, or the reverse: the missing side would cost nothing
// under a usd limit, since nothing below it in the price layers prices the
// model (parse records only such entries, in Config.priceKeys). keys are
// the entry's price keys as written; an explicit 0 names a side.
func checkPriceSides(p *problems, f string, keys []string) {
	has := func(k string) bool { return slices.Contains(keys, k) }
	// A cached-input or cache-write price alone leaves uncached input free.
	in := has("input_usd_per_mtok")
	priced := in || has("cached_input_usd_per_mtok") || has("cache_write_usd_per_mtok") || has("cache_write_1h_usd_per_mtok")
	switch out := has("output_usd_per_mtok"); {
	case priced && !in:
		p.add(f+".input_usd_per_mtok", "missing: the entry prices cached input or cache writes but not input, so uncached input tokens "+
			"would cost nothing under usd limits; give the input price")
	case in && !out:
		p.add(f+".output_usd_per_mtok", "missing: the entry prices input but not output, so output tokens would cost nothing under usd limits; "+
			"give the output price (an explicit 0 only for a model that bills no output, such as an embedding model)")
	case out && !in:
		p.add(f+".input_usd_per_mtok", "missing: the entry prices output but not input, so input tokens would cost nothing under usd limits; "+
			"give the input price (an explicit 0 if the model really bills no input)")
	}
}

// checkTierSides reports a priority or flex tier of a model
// the config's models: section writes (field f) whose merged prices price
// input but not output, or the reverse: that side of a request in the
// tier would cost nothing. No real tier bills one side only.
func checkTierSides(p *problems, f string, m Model) {
	// (A long-context band is not checked: policy scales the prices it
	// leaves at zero from the tier's, so no side of it is free.)
	for _, tr := range []struct {
		name string
		t    *TierPrices
	}{{"priority", m.Priority}, {"flex", m.Flex}} {
		if tr.t == nil || (tr.t.InputUSDPerMTok > 0) == (tr.t.OutputUSDPerMTok > 0) {
			continue
		}
		side := "output_usd_per_mtok"
		if tr.t.InputUSDPerMTok == 0 {
			side = "input_usd_per_mtok"
		}
		p.add(f+"."+tr.name+"."+side, "missing: the tier prices one side only (nothing below prices the other), so it would cost nothing "+
			"under usd limits; give both prices")
	}
}

// checkAlias reports an alias (models.<name>, field f) that sets prices of
// its own, names itself, or names a model that is absent, unpriced or an
// alias itself.
func checkAlias(p *problems, f, name string, m Model, models map[string]Model) {
	if m.Priced() || m.Priority != nil || m.Flex != nil || m.LongContext != nil {
		p.add(f+".alias_of", "an alias takes its prices from %q: remove this entry's own prices", m.AliasOf)
	}
	t, ok := models[m.AliasOf]
	switch {
	case m.AliasOf == name:
		p.add(f+".alias_of", "a model cannot be an alias of itself")
	case !ok:
		p.add(f+".alias_of", "no model %q is priced (in models:, prices_file or the embedded table)", m.AliasOf)
	case t.AliasOf != "":
		p.add(f+".alias_of", "%q is itself an alias (of %q): name the priced model", m.AliasOf, t.AliasOf)
	case !t.Priced():
		p.add(f+".alias_of", "%q has no price to take", m.AliasOf)
	}
}

type problems []string

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// notOneOf adds the problem of a value outside an enum, the enum's values
// listed from its one table (spec's …Names) and the near miss offered:
// `must be one of memory, redis, redis_cluster (got "redis_clustr") (did
// you mean redis_cluster?)`. Before, four enums spelt their values out in
// the message, which a value added to the table would have left behind.
func (p *problems) notOneOf(field, got string, known []string) {
	p.add(field, "must be one of %s (got %q)%s", strings.Join(known, ", "), got, didYouMean(got, known))
}

// didYouMean is the hint after a value outside an enum: " (did you mean
// user?)" when got is a near miss of one of known (a case, a letter or two
// off, cut short or run on: suggest.Closest, the helper that names the key
// an unknown field stands for), else "". An empty got has no hint.
func didYouMean(got string, known []string) string {
	if got == "" {
		return ""
	}
	if guess := suggest.Closest(got, known); guess != "" {
		return " (did you mean " + guess + "?)"
	}
	// A value with words around the one meant (on_failure: fail-open,
	// fail_closed: trial27), when exactly one word is a choice.
	words := strings.FieldsFunc(got, func(r rune) bool { return r == '-' || r == '_' || r == ' ' || r == '.' })
	guess := ""
	for _, w := range words {
		for _, k := range known {
			if strings.EqualFold(w, k) && len(words) > 1 {
				if guess != "" && guess != k {
					return ""
				}
				guess = k
			}
		}
	}
	if guess != "" {
		return " (did you mean " + guess + "?)"
	}
	return ""
}

// withScheme is the hint after a URL given as a bare host:port, the
// scheme left out: ` (did you mean "redis://127.0.0.1:6390/0"?)` for
// scheme "redis://" and suffix "/0". Anything else, and a value with an
// "@" (a password would be repeated in the message), gets "".
func withScheme(got, scheme, suffix string) string {
	if strings.Contains(got, "://") || strings.Contains(got, "@") {
		return ""
	}
	if host, port, err := net.SplitHostPort(got); err != nil || host == "" || port == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", scheme+got+suffix)
}

func checkAddr(p *problems, field, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(field, "must be host:port (got %q)", addr)
		return
	}
	if n, err := strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
		p.add(field, "port %d is out of range: a TCP port is 0..65535 (got %q)", n, addr)
	}
}

// checkListeners reports listen and admin_listen naming one TCP port on
// hosts that overlap (the same host, or either a wildcard: "", 0.0.0.0 or
// ::): the second listener could never open, and serve would stop at start
// with "address already in use", which reads as another process holding the
// port. localhost is 127.0.0.1, the address Go's net.Listen binds for it
// (its first IPv4 address; trial7: localhost:8080 beside 127.0.0.1:8080
// validated OK and stopped serve so). Port 0 (the system picks one) never
// clashes; addresses that do not parse are checkAddr's to report.
func checkListeners(p *problems, listen, admin string) {
	lh, lp, err1 := net.SplitHostPort(listen)
	ah, ap, err2 := net.SplitHostPort(admin)
	if err1 != nil || err2 != nil || lp != ap || lp == "0" {
		return
	}
	loopback := func(h string) string {
		if strings.EqualFold(h, "localhost") {
			return "127.0.0.1"
		}
		return h
	}
	lh, ah = loopback(lh), loopback(ah)
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	if strings.EqualFold(lh, ah) || wild(lh) || wild(ah) {
		p.add("admin_listen", "%s overlaps listen (%s): the proxy and the admin listener need ports of their own (the default admin port is 9090)", admin, listen)
	}
}

func checkDuration(p *problems, field string, d Duration) {
	switch {
	case d == invalidDuration:
		p.add(field, "not a Go duration (want e.g. 250ms, 1s, 1m, 24h)")
	case d < 0:
		p.add(field, "must be positive")
	}
}

// checkPositiveDuration reports a duration that did not parse or is not
// above zero.
func checkPositiveDuration(p *problems, field string, d Duration) {
	if d == invalidDuration {
		checkDuration(p, field, d)
	} else if d <= 0 {
		p.add(field, "must be positive")
	}
}

func checkBucket(p *problems, f string, l Limit, scale float64) {
	badRate := !(l.Rate > 0) || l.Rate*scale > maxUnits
	if badRate {
		p.add(f+".rate", "must be a positive number of units per period (got %v); or set quota: and period: for a calendar quota", l.Rate)
	}
	if l.Per == invalidDuration {
		checkDuration(p, f+".per", l.Per)
	} else if l.Per <= 0 {
		p.add(f+".per", "required: a positive Go duration such as 1s, 1m, 24h")
	}
	switch {
	case badRate && l.Burst == l.Rate:
		// A burst left unset is the rate (Config.applyDefaults): the bad
		// rate is reported once, under rate, and not again under a burst
		// the file may never have named ("limits[0].burst: … (got -1)"
		// for a file without burst: sent its reader looking for it).
	case !(l.Burst > 0) || l.Burst*scale > maxUnits:
		p.add(f+".burst", "must be a positive number of units (got %v)", l.Burst)
	case l.Burst*scale < 1:
		p.add(f+".burst", "must hold at least one unit (got %v)", l.Burst)
	}
	if l.Period != "" || len(l.WarnAt) > 0 || l.Timezone != "" {
		p.add(f, "period, timezone and warn_at apply to quotas only (set quota:)")
	}
}

func checkQuota(p *problems, f string, l Limit, scale float64) {
	if !(l.Quota > 0) || l.Quota*scale > maxUnits || l.Quota*scale < 1 {
		p.add(f+".quota", "must be a positive amount of at least one unit (got %v)", l.Quota)
	}
	if l.Rate != 0 || l.Burst != 0 || l.Per != 0 {
		p.add(f, "set either rate/per/burst (a token bucket) or quota/period (a calendar quota), not both")
	}
	if _, ok := spec.ParsePeriod(l.Period); !ok {
		p.notOneOf(f+".period", l.Period, spec.PeriodNames())
	}
	if _, err := time.LoadLocation(l.Timezone); err != nil {
		hint := "" // Go's zone names are case-sensitive: "utc" is not UTC
		if strings.EqualFold(l.Timezone, "UTC") || strings.EqualFold(l.Timezone, "GMT") {
			hint = " (did you mean UTC?)"
		}
		p.add(f+".timezone", "unknown time zone %q (want an IANA name such as UTC or Europe/Paris)%s", l.Timezone, hint)
	}
	// Each threshold is judged once, for what is wrong with it: out of
	// (0, 1] (a percentage gets the fraction to write), or not above the
	// last valid one before it. ([80, 0.95] reported 0.95 too, as not
	// increasing after the 80 already refused: trial2.)
	prev := 0.0
	for i, w := range l.WarnAt {
		field := fmt.Sprintf("%s.warn_at[%d]", f, i)
		switch {
		case !(w > 0 && w <= 1):
			hint := ""
			if w > 1 && w <= 100 {
				hint = fmt.Sprintf(" (write %v for %v%%)", w/100, w)
			}
			p.add(field, "must be a fraction of the quota in (0, 1] (got %v)%s", w, hint)
			continue
		case w <= prev:
			p.add(field, "must be above the threshold before it (%v), in increasing order (got %v)", prev, w)
		}
		prev = w
	}
}

// checkShards reports a limit's shards (field f) outside 0..MaxShards (0 or
// 1: one bucket), or more than the units its burst (a quota: its quota) or
// its rate per period holds in the limit's unit scaled by scale (1e6 for
// usd): a shard would then hold or refill less than one unit, which no
// bucket can (bucket.ShardLimit).
func checkShards(p *problems, f string, l Limit, scale float64) {
	k := int(l.Shards)
	switch {
	case k < 0 || k > MaxShards:
		p.add(f+".shards", "must be a whole number of shards from 1 to %d (got %d)", MaxShards, k)
		return
	}
	if k <= 1 {
		return
	}
	if len(l.Regions) > 0 {
		// A region's share of a sharded limit would need shard keys that
		// name the region and shards of the share: not built yet.
		p.add(f+".shards", "cannot be combined with regions: on one limit (split the limit by regions or by shards)")
		return
	}
	if l.Quota != 0 {
		if units := math.Floor(l.Quota * scale); units >= 1 && units < float64(k) {
			p.add(f+".shards", "%d shards of a quota of %v units would each allow less than one unit: use shards: %v or fewer", k, units, units)
		}
		return
	}
	if units := math.Floor(l.Burst * scale); units >= 1 && units < float64(k) {
		p.add(f+".shards", "%d shards of a burst of %v units would each hold less than one unit: use shards: %v or fewer", k, units, units)
	}
	if rate := l.Rate * scale; rate > 0 && rate < float64(k) {
		p.add(f+".shards", "%d shards of a rate of %v units per %v would each refill less than one unit per period: use shards: %v or fewer, or a longer per with a larger rate",
			k, rate, time.Duration(l.Per), max(1, math.Floor(rate)))
	}
}

// checkAlgorithm checks a limit's algorithm: a known name, and for a window
// algorithm a rate limit (not a quota) of whole units per window with no
// burst of its own, and none of the features that need a token bucket:
// shards and leases split or lend a refilling level, and regions scale a
// refill rate, none of which a window counter has.
func checkAlgorithm(p *problems, f string, l Limit, scale float64) {
	if l.Algorithm == "" {
		return // the default, spec.TokenBucket
	}
	a, ok := spec.ParseAlgorithm(l.Algorithm)
	if !ok {
		p.notOneOf(f+".algorithm", l.Algorithm, spec.AlgorithmNames())
		return
	}
	if a == spec.TokenBucket {
		return
	}
	if l.Quota != 0 {
		p.add(f+".algorithm", "%s applies to rate limits (rate: and per:), not to a calendar quota", a)
		return
	}
	if l.Burst != 0 && l.Burst != l.Rate {
		p.add(f+".burst", "%s has no burst: it admits rate units per window of per (got burst %v, rate %v)", a, l.Burst, l.Rate)
	}
	if r := l.Rate * scale; r > 0 && r != math.Trunc(r) {
		p.add(f+".rate", "%s counts whole units per window (got %v)", a, l.Rate)
	}
	if l.Per > 0 && time.Duration(l.Per) > maxWindowPer {
		p.add(f+".per", "%s windows are at most %v (got %v)", a, maxWindowPer, time.Duration(l.Per))
	}
	if l.Shards > 1 {
		p.add(f+".shards", "%s does not combine with shards (token buckets only)", a)
	}
	if l.Lease != nil {
		p.add(f+".lease", "%s does not combine with a lease (token buckets only)", a)
	}
	if len(l.Regions) > 0 {
		p.add(f+".regions", "%s does not combine with regions (token buckets and quotas only)", a)
	}
}

// maxWindowPer is the longest window a window algorithm accepts: a year
// (bucket.Limit allows 2^50µs, about 35 years).
const maxWindowPer = 366 * 24 * time.Hour

// minInflightResponseBytes is the least max_inflight_response_bytes: four
// of the 16 KiB chunks an answer is first read into.
const minInflightResponseBytes = 64 << 10
