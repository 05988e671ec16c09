package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// probeConfig is the embedded default with the store and upstreams given.
func probeConfig(t *testing.T, store config.Store, upstreams ...string) *config.Config {
	t.Helper()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	base := cfg.Upstreams[0]
	cfg.Upstreams = nil
	for i, u := range upstreams {
		up := base
		up.Name, up.BaseURL = "up"+strconv.Itoa(i), u
		cfg.Upstreams = append(cfg.Upstreams, up)
	}
	return cfg
}

func resultFor(t *testing.T, rs []ProbeResult, target string) ProbeResult {
	t.Helper()
	for _, r := range rs {
		if r.Target == target {
			return r
		}
	}
	t.Fatalf("no probe result for %s in %+v", target, rs)
	return ProbeResult{}
}

// A real Redis and three upstreams: one listening, one whose port is
// closed, one https with a certificate no system root signs.
func TestProbeRedisAndUpstreams(t *testing.T) {
	srv := redistest.Shared(t)
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()

	cfg := probeConfig(t, config.Store{Backend: "redis", RedisURL: "redis://" + srv.Addr() + "/0"},
		"http://"+open.Addr().String(), "http://"+closedAddr, tlsSrv.URL)
	cfg.Ledger.RedisStream, cfg.Ledger.RedisURL = "llmguard:ledger", "redis://"+srv.Addr()+"/1"
	rs := Probe(context.Background(), cfg, 5*time.Second)
	if len(rs) != 5 {
		t.Fatalf("%d results, want 5 (store, ledger, three upstreams): %+v", len(rs), rs)
	}
	if r := resultFor(t, rs, "ledger.redis_url"); r.Err != nil || !strings.HasPrefix(r.Detail, "Redis ") {
		t.Errorf("ledger: %+v", r)
	}
	store := resultFor(t, rs, "store.redis_url")
	if store.Err != nil || !strings.HasPrefix(store.Detail, "Redis ") || store.Addr != srv.Addr() {
		t.Errorf("store: %+v, want Redis's version at %s", store, srv.Addr())
	}
	if r := resultFor(t, rs, "upstreams[up0]"); r.Err != nil || !strings.HasPrefix(r.Detail, "TCP") {
		t.Errorf("listening upstream: %+v", r)
	}
	if r := resultFor(t, rs, "upstreams[up1]"); r.Err == nil || r.Addr != closedAddr {
		t.Errorf("closed port: %+v, want an error at %s", r, closedAddr)
	}
	if r := resultFor(t, rs, "upstreams[up2]"); r.Err == nil || !strings.Contains(r.Err.Error(), "certificate") {
		t.Errorf("https upstream with an unknown authority: %+v, want a certificate error", r)
	}

	// A database the server refuses (SELECT 99), and no server at all.
	cfg.Store.RedisURL = "redis://" + srv.Addr() + "/99"
	if store = resultFor(t, Probe(context.Background(), cfg, 5*time.Second), "store.redis_url"); store.Err == nil {
		t.Errorf("database 99: %+v, want an error", store)
	}
	cfg.Store.RedisURL = "redis://:secret-password@" + closedAddr + "/0"
	if store = resultFor(t, Probe(context.Background(), cfg, 5*time.Second), "store.redis_url"); store.Err == nil || store.Addr != closedAddr {
		t.Errorf("no Redis at %s: %+v, want an error", closedAddr, store)
	}
	cfg.Ledger.RedisURL = "redis://:secret-password@" + closedAddr + "/0"
	for _, r := range Probe(context.Background(), cfg, 5*time.Second) {
		if strings.Contains(r.Addr, "secret-password") || r.Err != nil && strings.Contains(r.Err.Error(), "secret-password") {
			t.Errorf("the probe of %s shows the password: %+v", r.Target, r)
		}
	}
}

// The probe of a cluster reads every master's version and cluster_state.
func TestProbeCluster(t *testing.T) {
	c := redistest.SharedCluster(t, 3)
	addrs := make([]string, 0, 1)
	addrs = append(addrs, c.Nodes[0].Addr())
	cfg := probeConfig(t, config.Store{Backend: "redis_cluster", ClusterAddrs: addrs})
	r := resultFor(t, Probe(context.Background(), cfg, 10*time.Second), "store.cluster_addrs")
	if r.Err != nil || !strings.HasPrefix(r.Detail, "3 masters, cluster_state ok, Redis ") {
		t.Errorf("cluster: %+v, want 3 masters, cluster_state ok", r)
	}
	// A standalone Redis named as a cluster answers CLUSTER INFO with an
	// error ("cluster support disabled").
	cfg.Store.ClusterAddrs = []string{redistest.Shared(t).Addr()}
	if r := resultFor(t, Probe(context.Background(), cfg, 5*time.Second), "store.cluster_addrs"); r.Err == nil {
		t.Errorf("a standalone Redis as cluster_addrs: %+v, want an error", r)
	}
}

// fakeRedis serves PING and INFO with the redis_version and redis_mode
// given (every other command is refused, as an old server refuses HELLO),
// until the test ends. It returns its address.
func fakeRedis(t *testing.T, version, mode string) string {
	return redistest.Fake(t, func(args []string) string {
		switch strings.ToUpper(args[0]) {
		case "PING":
			return "+PONG\r\n"
		case "INFO":
			body := fmt.Sprintf("# Server\r\nredis_version:%s\r\nredis_mode:%s\r\n", version, mode)
			return fmt.Sprintf("$%d\r\n%s\r\n", len(body), body)
		}
		return "-ERR unknown command '" + args[0] + "'\r\n"
	})
}

// The version and mode a Redis reports decide: before 6.2 it cannot run
// the scripts, before 7.0 it runs them by EVALSHA (a warning), and a
// cluster node is no standalone store.
func TestProbeRedisVersionAndMode(t *testing.T) {
	cases := []struct {
		version, mode string
		err, warning  string // substrings; "" for none
	}{
		{"6.0.16", "standalone", "too old: llmguard needs 6.2", ""},
		{"5.0.14", "standalone", "too old", ""},
		{"6.2.14", "standalone", "", "no Functions"},
		{"7.0.15", "standalone", "", ""},
		{"7.4.1", "standalone", "", ""},
		{"10.0.0", "standalone", "", ""},
		{"7.2.4", "cluster", "cluster mode: use store.backend redis_cluster", ""},
		{"seven", "standalone", "does not read as major.minor", ""},
	}
	for _, c := range cases {
		t.Run(c.version+"/"+c.mode, func(t *testing.T) {
			addr := fakeRedis(t, c.version, c.mode)
			cfg := probeConfig(t, config.Store{Backend: "redis", RedisURL: "redis://" + addr + "/0"})
			r := resultFor(t, Probe(context.Background(), cfg, 5*time.Second), "store.redis_url")
			if c.err == "" && r.Err != nil || c.err != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), c.err)) {
				t.Errorf("err %v, want %q", r.Err, c.err)
			}
			if c.warning == "" && r.Warning != "" || c.warning != "" && !strings.Contains(r.Warning, c.warning) {
				t.Errorf("warning %q, want %q", r.Warning, c.warning)
			}
			if r.Err == nil && !strings.HasPrefix(r.Detail, "Redis "+c.version+", ") {
				t.Errorf("detail %q, want it to name Redis %s", r.Detail, c.version)
			}
		})
	}
}

// serve logs an error at start-up when the store's Redis is older than
// 6.2, and nothing for a Redis that can run the scripts.
func TestLogOldRedis(t *testing.T) {
	for _, c := range []struct {
		version string
		logged  bool
	}{{"6.0.16", true}, {"6.2.0", false}, {"7.0.15", false}} {
		var logs syncBuffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		rc := redis.NewClient(&redis.Options{Addr: fakeRedis(t, c.version, "standalone"), MaxRetries: -1})
		logOldRedis(context.Background(), rc, log)
		rc.Close()
		got := strings.Contains(logs.String(), "level=ERROR") && strings.Contains(logs.String(), "Redis "+c.version+" is too old")
		if got != c.logged {
			t.Errorf("Redis %s: logged %v, want %v:\n%s", c.version, got, c.logged, logs.String())
		}
	}
}
