package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/spec"
)

func TestDefaultConfigParses(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Backend != "memory" || c.Listen != "127.0.0.1:8080" || len(c.Limits) == 0 {
		t.Errorf("default config: backend %q listen %q limits %d", c.Store.Backend, c.Listen, len(c.Limits))
	}
}

func TestParseFillsDefaults(t *testing.T) {
	c, err := Parse([]byte(`
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com"}
limits:
  - {name: rpm, scope: user, unit: requests, rate: 60, per: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBodyBytes != 8<<20 || c.AdminListen != "127.0.0.1:9090" || c.DefaultMaxOutputTokens != 4096 {
		t.Errorf("defaults: %+v", c)
	}
	if c.Limits[0].Burst != 60 || time.Duration(c.Limits[0].Per) != time.Minute {
		t.Errorf("limit defaults: burst %v per %v", c.Limits[0].Burst, c.Limits[0].Per)
	}
	if time.Duration(c.Store.Timeout) != 50*time.Millisecond || time.Duration(c.Upstreams[0].Timeout) != 10*time.Minute {
		t.Errorf("timeouts: store %v upstream %v", c.Store.Timeout, c.Upstreams[0].Timeout)
	}
	if b := c.Store.Breaker; b.MinCalls != 20 || b.FailureRatio != 0.5 || time.Duration(b.Window) != 10*time.Second ||
		time.Duration(b.OpenFor) != 2*time.Second || time.Duration(c.Store.VoidWindow) != 10*time.Second {
		t.Errorf("store defaults: breaker %+v, void window %v", b, c.Store.VoidWindow)
	}
}

// Every bad field is reported, each with its path.
func TestValidateNamesEveryBadField(t *testing.T) {
	_, err := Parse([]byte(`
listen: nowhere
upstreams:
  - {name: a, flavor: gemini, base_url: "ftp://x"}
  - {name: a, flavor: openai, base_url: "http://x", path_prefix: "noslash"}
keys:
  - {key_sha256: "abc", tenant: acme}
  - {user: bob}
models:
  gpt-x: {encoding: klingon, input_usd_per_mtok: -1}
limits:
  - {name: "bad:name", scope: org, unit: bananas, rate: 0, per: 0s, burst: -5}
store: {backend: etcd, breaker: {failure_ratio: 1.5, window: -1s}, void_window: 1ms}
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	want := []string{
		"listen:", "upstreams[0].flavor:", "upstreams[0].base_url:", "upstreams[1].name: duplicate",
		"upstreams[1].path_prefix:", "keys[0].key_sha256:", "keys[1]: one of key_sha256 or key", "keys[1].tenant:",
		"models.gpt-x.encoding:", "models.gpt-x.input_usd_per_mtok:", "limits[0].name:", "limits[0].scope:",
		"limits[0].unit:", "limits[0].rate:", "limits[0].per:", "limits[0].burst:", "store.backend:",
		"store.breaker.failure_ratio:", "store.breaker.window:", "store.void_window:",
	}
	all := strings.Join(ce.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no problem reported for %q in:\n%s", w, all)
		}
	}
}

func TestUnknownFieldIsAnError(t *testing.T) {
	_, err := Parse([]byte(`
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com", api_key: "oops"}
`))
	if err == nil || !strings.Contains(err.Error(), "api_key") {
		t.Fatalf("err = %v, want one naming the unknown field api_key", err)
	}
	// The unknown field does not hide the other problems.
	_, err = Parse([]byte(`
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com", api_key: "oops"}
limits: [{name: l, scope: org, unit: tokens, rate: 1, per: 1s}]
`))
	if err == nil || !strings.Contains(err.Error(), "api_key") || !strings.Contains(err.Error(), "limits[0].scope") {
		t.Fatalf("err = %v, want both the unknown field and limits[0].scope", err)
	}
}

func TestBadDurationNamesTheValue(t *testing.T) {
	_, err := Parse([]byte(`
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
limits: [{name: l, scope: user, unit: tokens, rate: 1, per: "a minute"}]
`))
	// Its line, path and value (trial2: the message named the path only).
	if err == nil || !strings.Contains(err.Error(), "line 3: limits[0].per: `a minute` is not a Go duration") {
		t.Fatalf("err = %v, want the line, field path and value of the bad duration", err)
	}
}

// FuzzParse: any input either parses into a config that validates, or
// returns an error; it never panics.
func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML)
	f.Add([]byte("limits: [{name: l, scope: user, unit: usd, rate: 1e300, per: 1s}]"))
	f.Add([]byte("upstreams: [{name: o, flavor: openai, base_url: \"http://[::1]:x\"}]"))
	f.Add([]byte("keys: &a [*a]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if verr := c.Validate(); verr != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
		}
	})
}

func TestPricesLayers(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "prices.json"), []byte(`{
  "sample_spec": {"max_tokens": "set to max_output_tokens if provider specifies it"},
  "my-model": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "cache_read_input_token_cost": 1e-07, "cache_creation_input_token_cost": 1.25e-06},
  "gpt-4o-mini": {"input_cost_per_token": 9e-06, "output_cost_per_token": 9e-06},
  "dall-e-3": {"output_cost_per_image": 0.04}
}`), 0o644)
	cfgPath := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfgPath, []byte(`
prices_file: prices.json
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
models:
  gpt-4o-mini: {output_usd_per_mtok: 0.5}
`), 0o644)
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	mine := c.Models["my-model"]
	if mine.InputUSDPerMTok != 1 || mine.OutputUSDPerMTok != 2 || mine.CachedInputUSDPerMTok != 0.1 || mine.CacheWriteUSDPerMTok != 1.25 {
		t.Errorf("my-model from the prices file: %+v", mine)
	}
	mini := c.Models["gpt-4o-mini"]
	if mini.OutputUSDPerMTok != 0.5 { // config wins
		t.Errorf("config price lost: %+v", mini)
	}
	if mini.InputUSDPerMTok != 9 { // unset in config: the prices file, over the embedded table
		t.Errorf("prices file did not override the embedded table: %+v", mini)
	}
	if c.Models["claude-sonnet-4-5"].CacheWriteUSDPerMTok != 3.75 {
		t.Errorf("embedded table missing: %+v", c.Models["claude-sonnet-4-5"])
	}
	if _, ok := c.Models["dall-e-3"]; ok {
		t.Error("an entry without input_cost_per_token was read")
	}

	os.WriteFile(cfgPath, []byte("prices_file: missing.json\nupstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\n"), 0o644)
	if _, err := Load(cfgPath); err == nil || !strings.Contains(err.Error(), "prices_file") {
		t.Errorf("missing prices file: %v", err)
	}
}

func TestEmbeddedPriceTableIsDatedAndSourced(t *testing.T) {
	if !strings.Contains(string(DefaultPricesJSON), `"as_of"`) || !strings.Contains(string(DefaultPricesJSON), `"source"`) {
		t.Error("the embedded price table must carry its date and source")
	}
	m, err := ParsePrices(DefaultPricesJSON)
	if err != nil || len(m) < 10 {
		t.Fatalf("%d models, %v", len(m), err)
	}
	if m["gpt-4o-mini"].InputUSDPerMTok != 0.15 {
		t.Errorf("gpt-4o-mini input = %v USD/Mtok", m["gpt-4o-mini"].InputUSDPerMTok)
	}
}

// The exact-count budget: 1 MiB and no time budget by default; set values
// are kept; negative ones are reported by field.
func TestExactCountBudget(t *testing.T) {
	base := "upstreams:\n  - {name: openai, flavor: openai, base_url: \"https://api.openai.com\"}\n"
	c, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.ExactCountMaxBytes != 1<<20 || c.CountTimeBudget != 0 {
		t.Errorf("defaults: exact_count_max_bytes %d, count_time_budget %v", c.ExactCountMaxBytes, c.CountTimeBudget)
	}
	c, err = Parse([]byte(base + "exact_count_max_bytes: 4096\ncount_time_budget: 25ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ExactCountMaxBytes != 4096 || time.Duration(c.CountTimeBudget) != 25*time.Millisecond {
		t.Errorf("set: exact_count_max_bytes %d, count_time_budget %v", c.ExactCountMaxBytes, c.CountTimeBudget)
	}
	_, err = Parse([]byte(base + "exact_count_max_bytes: -1\ncount_time_budget: -1s\n"))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	all := strings.Join(ce.Problems, "\n")
	for _, f := range []string{"exact_count_max_bytes:", "count_time_budget:"} {
		if !strings.Contains(all, f) {
			t.Errorf("no problem for %s in:\n%s", f, all)
		}
	}
	if _, err := Parse([]byte(base + "count_time_budget: soon\n")); err == nil {
		t.Error("count_time_budget: soon accepted")
	}
}

func TestCountCacheBytes(t *testing.T) {
	base := "upstreams:\n  - {name: openai, flavor: openai, base_url: \"https://api.openai.com\"}\n"
	for _, tc := range []struct {
		yaml string
		want int64 // 0: refused
	}{
		{"", 32 << 20}, {"count_cache_bytes: 0\n", 32 << 20}, {"count_cache_bytes: -1\n", -1},
		{"count_cache_bytes: 65536\n", 65536}, {"count_cache_bytes: 1000\n", 0}, {"count_cache_bytes: -2\n", 0},
	} {
		c, err := Parse([]byte(base + tc.yaml))
		switch {
		case tc.want == 0 && (err == nil || !strings.Contains(err.Error(), "count_cache_bytes")):
			t.Errorf("%q: err = %v, want a problem naming count_cache_bytes", tc.yaml, err)
		case tc.want != 0 && err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.want != 0 && c.CountCacheBytes != tc.want:
			t.Errorf("%q: count_cache_bytes %d, want %d", tc.yaml, c.CountCacheBytes, tc.want)
		}
	}
}

// on_limit and max_wait are checked and defaulted; wait_queue is bounded.
func TestWaitConfig(t *testing.T) {
	base := "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nlimits:\n"
	c, err := Parse([]byte(base + "  - {name: a, scope: key, unit: requests, rate: 1, per: 1s, on_limit: wait}\n  - {name: b, scope: key, unit: requests, rate: 1, per: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits[0].MaxWait != Duration(DefaultMaxWait) || c.Limits[1].OnLimit != spec.OnLimitFail.String() || c.WaitQueue != (WaitQueue{PerBucket: 64, Total: 1024}) {
		t.Fatalf("defaults: %+v %+v %+v", c.Limits[0], c.Limits[1], c.WaitQueue)
	}
	for _, bad := range []string{
		"  - {name: a, scope: key, unit: requests, rate: 1, per: 1s, on_limit: queue}\n",
		"  - {name: a, scope: key, unit: requests, rate: 1, per: 1s, max_wait: 1s}\n",
		"  - {name: a, scope: key, unit: requests, rate: 1, per: 1s, on_limit: wait, max_wait: 2m}\n",
		"  - {name: a, scope: key, unit: requests, rate: 1, per: 1s}\nwait_queue: {per_bucket: 10, total: 5}\n",
		"  - {name: a, scope: key, unit: requests, rate: 1, per: 1s}\nwait_queue: {per_bucket: 100000}\n",
		"  - {name: a, scope: key, unit: concurrent, max: 1, on_limit: wait}\n",
	} {
		if _, err := Parse([]byte(base + bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// A limit with a bad rate and no burst is reported once, under rate: the
// burst it defaults to is the same bad number, and a problem under a field
// the file never names sends its reader looking for it. A burst the file
// does set is still checked on its own.
func TestBadRateWithoutBurstIsOneProblem(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limit     string
		wantBurst bool
	}{
		{name: "negative rate, no burst", limit: `{name: tpm, scope: user, unit: tokens, rate: -1, per: 1m}`},
		{name: "no rate, no burst", limit: `{name: tpm, scope: user, unit: tokens, per: 1m}`},
		{name: "negative rate, bad burst of its own", limit: `{name: tpm, scope: user, unit: tokens, rate: -1, per: 1m, burst: -5}`, wantBurst: true},
		{name: "good rate, bad burst", limit: `{name: tpm, scope: user, unit: tokens, rate: 10, per: 1m, burst: -5}`, wantBurst: true},
	} {
		_, err := Parse([]byte("upstreams: [{name: o, flavor: openai, base_url: \"http://x\", no_key: true}]\nlimits:\n  - " + tc.limit + "\n"))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want *Error", tc.name, err)
		}
		all := strings.Join(ce.Problems, "\n")
		if got := strings.Contains(all, "limits[0].burst:"); got != tc.wantBurst {
			t.Errorf("%s: a limits[0].burst problem reported = %v, want %v, in:\n%s", tc.name, got, tc.wantBurst, all)
		}
		if strings.Contains(tc.limit, "rate: 10") == strings.Contains(all, "limits[0].rate:") {
			t.Errorf("%s: rate problem reported wrongly in:\n%s", tc.name, all)
		}
	}
}

// The embedded default serves both SDKs the README points at it: an
// OpenAI upstream and an Anthropic one (without which /v1/messages is a
// 404), both on the mock, needing no key.
func TestDefaultConfigServesOpenAIAndAnthropic(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	flavors := map[string]string{}
	for _, u := range c.Upstreams {
		if !u.NoKey {
			t.Errorf("default upstream %s needs a key", u.Name)
		}
		if _, seen := flavors[u.Flavor]; !seen {
			flavors[u.Flavor] = u.BaseURL
		}
	}
	for _, f := range []string{"openai", "anthropic"} {
		if flavors[f] != "http://127.0.0.1:8081" {
			t.Errorf("default config: first %s upstream at %q, want the mock at http://127.0.0.1:8081", f, flavors[f])
		}
	}
}
