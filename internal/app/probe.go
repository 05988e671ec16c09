package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/respguard"
	"github.com/llmguard/llmguard/spec"
)

// ProbeResult is what `llmguard validate --connect` learned of one server a
// config names: a Redis (the store, the ledger's stream, a region's peer)
// or an upstream.
type ProbeResult struct {
	// Target names the config field the server comes from, e.g.
	// "store.redis_url", "store.cluster_addrs", "ledger.redis_url",
	// "region_exchange.peers.eu" or "upstreams[openai]".
	Target string
	// Addr is where it was dialled: host:port, or the cluster's seeds.
	Addr string
	// Detail says what answered when it did, e.g. "Redis 7.0.15, Functions"
	// or "TLS 1.3, 12 ms".
	Detail string
	// Warning is a finding that does not stop serve (a Redis before 7.0 runs
	// the scripts by EVALSHA); empty when none.
	Warning string
	// Err is why the server cannot serve this config: unreachable, a
	// refused TLS handshake, a Redis too old or of the wrong mode. nil
	// when it can.
	Err error
}

// minRedis is the oldest Redis the scripts run on: reconciliation reads
// its request ids with SMISMEMBER, "Available since: 6.2.0"
// (redis.io/commands/smismember). functionsRedis is the first with Redis
// Functions (FUNCTION LOAD, FCALL: "Available since: 7.0.0"); before it
// the store runs the same scripts by EVALSHA.
var (
	minRedis       = [2]int{6, 2}
	functionsRedis = [2]int{7, 0}
)

// Probe dials every server cfg names and reports each, in a fixed order:
// the store's Redis (or each master of its cluster, by the slot map the
// seeds give), the ledger's Redis stream, the region exchange's peers, then
// the upstreams in config order. A Redis must answer PING and INFO with a
// version of at least 6.2, in the mode the backend names (standalone for
// redis, cluster for redis_cluster, with cluster_state ok); an upstream
// must accept a TCP connection and, for https, a TLS handshake verified
// against the system's roots. Nothing else is sent: no request reaches an
// upstream and no key is read or written. Each server gets timeout; the
// servers are dialled concurrently. cfg must have passed validation.
func Probe(ctx context.Context, cfg *config.Config, timeout time.Duration) []ProbeResult {
	type job struct {
		res *ProbeResult
		run func(context.Context, *ProbeResult)
	}
	var jobs []job
	add := func(target, addr string, run func(context.Context, *ProbeResult)) {
		jobs = append(jobs, job{&ProbeResult{Target: target, Addr: addr}, run})
	}
	s := cfg.Store
	switch s.Kind() {
	case spec.BackendRedis:
		add("store.redis_url", redactURL(s.RedisURL), func(ctx context.Context, r *ProbeResult) {
			probeRedisURL(ctx, r, s.RedisURL, timeout, false)
		})
	case spec.BackendRedisCluster:
		add("store.cluster_addrs", "", func(ctx context.Context, r *ProbeResult) { probeCluster(ctx, r, s, timeout) })
	}
	if l := cfg.Ledger; l.RedisStream != "" && l.RedisURL != "" {
		// The stream is written with XADD alone: any Redis the store could
		// use will do, standalone (the ledger has no cluster client).
		add("ledger.redis_url", redactURL(l.RedisURL), func(ctx context.Context, r *ProbeResult) {
			probeRedisURL(ctx, r, l.RedisURL, timeout, true)
		})
	}
	if x := cfg.RegionExchange; x != nil && cfg.Region != "" {
		for _, name := range slices.Sorted(maps.Keys(x.Peers)) {
			u := x.Peers[name]
			add("region_exchange.peers."+name, redactURL(u), func(ctx context.Context, r *ProbeResult) {
				probeRedisURL(ctx, r, u, timeout, false)
			})
		}
	}
	for _, up := range cfg.Upstreams {
		add("upstreams["+up.Name+"]", up.BaseURL, func(ctx context.Context, r *ProbeResult) { probeUpstream(ctx, r, up.BaseURL, timeout) })
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			j.run(ctx, j.res)
		})
	}
	wg.Wait()
	out := make([]ProbeResult, len(jobs))
	for i, j := range jobs {
		out[i] = *j.res
		out[i].Err = withAuthHint(out[i].Err)
	}
	return out
}

// redactURL is u with its password, if any, replaced by "xxxxx": what a
// probe's line shows of a redis:// URL. A URL that does not parse is shown
// as "(unparsable URL)", since it may hold a secret in a form url.Parse
// cannot find.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// probeRedisURL fills r for the standalone Redis at the redis:// or
// rediss:// URL u: its version and mode. A cluster node is refused unless
// anyMode (the ledger's XADD runs on either).
func probeRedisURL(ctx context.Context, r *ProbeResult, u string, timeout time.Duration, anyMode bool) {
	opt, err := redis.ParseURL(u)
	if err != nil {
		r.Err = err
		return
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	opt.MaxRetries, opt.DialerRetries, opt.PoolSize = -1, 1, 1
	c := respguard.NewClient(opt)
	defer c.Close()
	r.Addr = opt.Addr
	info, err := redisServerInfo(ctx, c)
	if err != nil {
		r.Err = err
		return
	}
	if info.mode == "cluster" && !anyMode {
		r.Err = fmt.Errorf("Redis %s runs in cluster mode: use store.backend redis_cluster with cluster_addrs", info.version)
		return
	}
	judgeRedis(r, []redisInfo{info})
}

// probeCluster fills r for the Redis Cluster store.cluster_addrs seeds:
// cluster_state ok, and every master's version.
func probeCluster(ctx context.Context, r *ProbeResult, s config.Store, timeout time.Duration) {
	opt, err := clusterOptions(s)
	if err != nil {
		r.Err = err
		return
	}
	r.Addr = strings.Join(opt.Addrs, ",")
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	opt.MaxRetries, opt.DialerRetries, opt.PoolSize, opt.MaxRedirects = -1, 1, 1, 1
	cc := respguard.NewClusterClient(opt)
	defer cc.Close()
	state, err := cc.ClusterInfo(ctx).Result()
	if err != nil {
		r.Err = fmt.Errorf("CLUSTER INFO: %w", err)
		return
	}
	if v := infoField(state, "cluster_state"); v != "ok" {
		r.Err = fmt.Errorf("cluster_state is %q, not ok: some slots have no master answering", v)
		return
	}
	infos, err := mastersInfo(ctx, cc)
	if err != nil {
		r.Err = err
		return
	}
	judgeRedis(r, infos)
	if r.Err == nil {
		r.Detail = fmt.Sprintf("%d masters, cluster_state ok, %s", len(infos), r.Detail)
	}
}

// redisInfo is what probeRedis reads of one server's INFO server section.
type redisInfo struct {
	version string // redis_version, e.g. "7.0.15"
	mode    string // redis_mode: standalone, cluster or sentinel
}

// redisServerInfo PINGs c and reads its INFO server section. Errors: the
// dial's, the server's (NOAUTH, LOADING), or a section without a
// redis_version.
func redisServerInfo(ctx context.Context, c *redis.Client) (redisInfo, error) {
	if err := c.Ping(ctx).Err(); err != nil {
		return redisInfo{}, err
	}
	text, err := c.Info(ctx, "server").Result()
	if err != nil {
		return redisInfo{}, fmt.Errorf("INFO server: %w", err)
	}
	info := redisInfo{version: infoField(text, "redis_version"), mode: infoField(text, "redis_mode")}
	if info.version == "" {
		return info, errors.New("INFO server has no redis_version")
	}
	return info, nil
}

// judgeRedis sets r's Detail, Warning and Err from the servers' versions:
// an error below minRedis, a warning below functionsRedis. Detail names
// the lowest version of them.
func judgeRedis(r *ProbeResult, infos []redisInfo) {
	lowest, lowestText := [2]int{1 << 30, 0}, ""
	for _, in := range infos {
		v, ok := parseRedisVersion(in.version)
		if !ok {
			r.Err = fmt.Errorf("redis_version %q does not read as major.minor", in.version)
			return
		}
		if versionLess(v, lowest) {
			lowest, lowestText = v, in.version
		}
	}
	if versionLess(lowest, minRedis) {
		r.Err = fmt.Errorf("Redis %s is too old: llmguard needs %d.%d or later (reconciliation uses SMISMEMBER)", lowestText, minRedis[0], minRedis[1])
		return
	}
	r.Detail = "Redis " + lowestText + ", Functions"
	if versionLess(lowest, functionsRedis) {
		r.Detail = "Redis " + lowestText + ", scripts by EVALSHA"
		r.Warning = fmt.Sprintf("Redis %s has no Functions (%d.%d): the scripts run by EVALSHA, which works; upgrade for one library per rolling upgrade", lowestText, functionsRedis[0], functionsRedis[1])
	}
}

// parseRedisVersion reads "major.minor[.patch…]".
func parseRedisVersion(s string) ([2]int, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return [2]int{}, false
	}
	return [2]int{major, minor}, true
}

func versionLess(a, b [2]int) bool {
	return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
}

// infoField is the value of "name:value" in an INFO or CLUSTER INFO reply,
// "" when it has no such line.
func infoField(text, name string) string {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// probeUpstream fills r for the upstream at base (a base_url validation
// accepted): a TCP connection to its host and port (80 or 443 by scheme
// when none), and for https a TLS handshake with its host name verified
// against the system's roots, as the proxy's client does.
func probeUpstream(ctx context.Context, r *ProbeResult, base string, timeout time.Duration) {
	u, err := url.Parse(base)
	if err != nil {
		r.Err = err
		return
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	r.Addr = addr
	start := time.Now()
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		r.Err = err
		return
	}
	defer conn.Close()
	if u.Scheme != "https" {
		r.Detail = fmt.Sprintf("TCP, %d ms", time.Since(start).Milliseconds())
		return
	}
	tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		r.Err = fmt.Errorf("TLS handshake: %w", err)
		return
	}
	r.Detail = fmt.Sprintf("%s, %d ms", tls.VersionName(tc.ConnectionState().Version), time.Since(start).Milliseconds())
}

// mastersInfo reads every master's INFO server section (redisServerInfo),
// in no order. Errors: the first master's that failed, naming it.
func mastersInfo(ctx context.Context, cc *redis.ClusterClient) ([]redisInfo, error) {
	var mu sync.Mutex
	var infos []redisInfo
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := redisServerInfo(ctx, c)
		if err != nil {
			return fmt.Errorf("master %s: %w", c.Options().Addr, err)
		}
		mu.Lock()
		infos = append(infos, info)
		mu.Unlock()
		return nil
	})
	return infos, err
}

// logAuthRefused logs, as an error, that the store's Redis refused
// llmguard's credentials (err, for which redisAuthHint has a hint), with
// the hint: what the URL should hold.
func logAuthRefused(log *slog.Logger, err error) {
	log.Error("the store's Redis refused llmguard's credentials: every take will fail until store.redis_url (or cluster_addrs) carries the right ones", "err", err, "hint", redisAuthHint(err))
}

// logOldRedis logs an error when the store's Redis (any master of a
// cluster) is older than minRedis: its scripts load, but every
// reconciliation fails at SMISMEMBER, so no charge or refund lands. A
// Redis that does not answer INFO within ctx is not judged (the store's
// own calls report it), except that one refusing the credentials
// (redisAuthHint) is logged as an error with what to change. client is
// the store's go-redis client.
func logOldRedis(ctx context.Context, client any, log *slog.Logger) {
	var infos []redisInfo
	var err error
	switch c := client.(type) {
	case *redis.Client:
		var info redisInfo
		info, err = redisServerInfo(ctx, c)
		infos = []redisInfo{info}
	case *redis.ClusterClient:
		infos, err = mastersInfo(ctx, c)
	default:
		return
	}
	if err != nil {
		// A Redis that refuses the credentials fails every call: say so
		// now, with what to change (the scripts' load above failed too,
		// often as a connection reset, which reads like a network fault).
		if redisAuthHint(err) != "" {
			logAuthRefused(log, err)
		}
		return
	}
	var r ProbeResult
	if judgeRedis(&r, infos); r.Err != nil {
		log.Error("the store's Redis cannot run llmguard: reconciliations will fail and no charge or refund will land; upgrade it", "err", r.Err)
	}
}
