package config

import (
	"strings"
	"testing"
)

// A URL given as a bare host:port, its scheme left out (trial19: redis_url
// "127.0.0.1:6390", base_url "127.0.0.1:8081"), is refused with the URL
// it likely meant; a value with a password, or that is no host:port, gets
// no guess.
func TestBareHostPortURLIsCompleted(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want, not string }{
		{name: "redis_url", yaml: `store: {backend: redis, redis_url: "127.0.0.1:6390"}`, want: `(did you mean "redis://127.0.0.1:6390/0"?)`},
		{name: "base_url", yaml: ``, want: `(did you mean "http://127.0.0.1:8081"?)`},
		{name: "password", yaml: `store: {backend: redis, redis_url: "s3cret@127.0.0.1:6390"}`, not: "s3cret"},
		{name: "no port", yaml: `store: {backend: redis, redis_url: "localhost"}`, not: "did you mean"},
	} {
		base := `"127.0.0.1:8081"`
		if tc.name != "base_url" {
			base = `"http://127.0.0.1:8081"`
		}
		_, err := Parse([]byte("upstreams: [{name: o, flavor: openai, base_url: " + base + ", no_key: true}]\n" + tc.yaml + "\n"))
		if err == nil {
			t.Fatalf("%s: accepted", tc.name)
		}
		if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
		if tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%s: %v\nmust not contain %q", tc.name, err, tc.not)
		}
	}
}
