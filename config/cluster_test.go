package config

import (
	"net"
	"slices"
	"strings"
	"testing"
)

// cluster_addrs entries are host:port or redis(s):// URLs carrying the
// cluster's credentials and TLS; URL entries must agree, and a bad entry's
// problem never quotes its password.
func TestClusterSeeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		addrs   []string
		want    ClusterSeeds
		problem string // in the error; "" for none
	}{
		{name: "host:port", addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"},
			want: ClusterSeeds{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}}},
		{name: "password only", addrs: []string{"redis://:pw@10.0.0.1:6379", "redis://:pw@10.0.0.2:6379/0"},
			want: ClusterSeeds{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, Password: "pw"}},
		{name: "acl user, tls, a plain seed beside", addrs: []string{"rediss://app:pw@redis.example.com:6380/", "10.0.0.2:6380"},
			want: ClusterSeeds{Addrs: []string{"redis.example.com:6380", "10.0.0.2:6380"}, Username: "app", Password: "pw", TLS: true, TLSServerName: "redis.example.com"}},
		{name: "no port", addrs: []string{"redis://:pw@10.0.0.1"}, problem: `store.cluster_addrs[0]: the URL must name host:port (got "redis://xxxxx@10.0.0.1")`},
		{name: "no host", addrs: []string{"rediss://:pw@:6379"}, problem: "must name host:port"},
		{name: "another database", addrs: []string{"redis://:pw@10.0.0.1:6379/2"}, problem: "only database 0"},
		{name: "query", addrs: []string{"redis://10.0.0.1:6379?pool_size=3"}, problem: "no query"},
		{name: "scheme", addrs: []string{"http://10.0.0.1:6379"}, problem: "redis:// or rediss://"},
		{name: "passwords differ", addrs: []string{"redis://:a@10.0.0.1:6379", "redis://:b@10.0.0.2:6379"},
			problem: "store.cluster_addrs[1]: its scheme, user or password differs from store.cluster_addrs[0]'s"},
		{name: "tls differs", addrs: []string{"rediss://:a@10.0.0.1:6379", "redis://:a@10.0.0.2:6379"}, problem: "differs"},
		{name: "not an address", addrs: []string{"10.0.0.1"}, problem: "must be host:port, or a redis:// or rediss:// URL"},
		{name: "unparsable", addrs: []string{"redis://:pw@[::1:6379"}, problem: `"xxxxx@[::1:6379" does not parse`},
	} {
		got, err := Store{ClusterAddrs: tc.addrs}.ClusterSeeds()
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.problem)
		case err != nil && strings.Contains(err.Error(), "pw"):
			t.Errorf("%s: the error quotes the password: %v", tc.name, err)
		case tc.problem == "" && (!slices.Equal(got.Addrs, tc.want.Addrs) || got.Username != tc.want.Username ||
			got.Password != tc.want.Password || got.TLS != tc.want.TLS || got.TLSServerName != tc.want.TLSServerName):
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Validate reports the entry by its field.
	_, err := Parse([]byte("upstreams: [{name: u, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}]\n" +
		"keys: [{key: k, tenant: t}]\nstore: {backend: redis_cluster, cluster_addrs: [\"redis://:pw@10.0.0.1:6379/3\"]}\n"))
	if err == nil || !strings.Contains(err.Error(), "store.cluster_addrs[0]: a Redis Cluster has only database 0") || strings.Contains(err.Error(), ":pw@") {
		t.Errorf("validate: %v", err)
	}
	if _, err := Parse([]byte("upstreams: [{name: u, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}]\n" +
		"keys: [{key: k, tenant: t}]\nstore: {backend: redis_cluster, cluster_addrs: [\"redis://:pw@10.0.0.1:6379\"]}\n")); err != nil {
		t.Errorf("validate refuses a URL seed: %v", err)
	}
}

// store.redis_url's problem does not quote its password either.
func TestRedisURLProblemRedactsPassword(t *testing.T) {
	_, err := Parse([]byte("upstreams: [{name: u, flavor: openai, base_url: \"http://127.0.0.1:1\", no_key: true}]\n" +
		"keys: [{key: k, tenant: t}]\nstore: {backend: redis, redis_url: \"tcp://app:s3cret@10.0.0.1:6379/0\"}\n"))
	if err == nil || !strings.Contains(err.Error(), `store.redis_url: must be a redis:// or rediss:// URL (got "tcp://xxxxx@10.0.0.1:6379/0")`) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("validate: %v", err)
	}
}

// FuzzClusterSeeds: cluster_addrs of a URL entry with a password
// (scheme://user:password@rest, each part fuzzed) beside any other entry
// parse or are refused without a panic; a refusal never quotes the
// password; a parsed seed is host:port with a host when it came from a URL;
// TLS has a server name.
func FuzzClusterSeeds(f *testing.F) {
	for _, seed := range [][4]string{{"redis", "", "10.0.0.1:6379", "10.0.0.2:6379"}, {"rediss", "app", "h:1/0", "rediss://app:x@g:2"},
		{"redis", "", "[::1]:6379", "redis://:x@h:1"}, {"redis", "u", "h", ":1"}, {"redis", "u", "h:1?x=1", "%"}, {"re@iss", "a/b", "h@g:1", "h:1"}} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	const password = "Zq9secret"
	f.Fuzz(func(t *testing.T, scheme, user, rest, other string) {
		if strings.Contains(scheme+user+rest+other, password) {
			return
		}
		addrs := []string{scheme + "://" + user + ":" + password + "@" + rest, other}
		seeds, err := Store{ClusterAddrs: addrs}.ClusterSeeds()
		if err != nil {
			if strings.Contains(err.Error(), password) {
				t.Fatalf("%q: the error quotes the password: %v", addrs, err)
			}
			return
		}
		if len(seeds.Addrs) != 2 {
			t.Fatalf("%q: %d seeds", addrs, len(seeds.Addrs))
		}
		for i, s := range seeds.Addrs {
			host, _, err := net.SplitHostPort(s)
			if err != nil || strings.Contains(addrs[i], "://") && host == "" {
				t.Fatalf("%q: seed %q is not host:port with a host", addrs, s)
			}
		}
		if seeds.TLS && seeds.TLSServerName == "" {
			t.Fatalf("%q: TLS without a server name", addrs)
		}
	})
}
