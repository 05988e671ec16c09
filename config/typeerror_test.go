package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// A number written with a suffix, a unit or separators (the common slips
// "10k" and "1.5$") is reported by its field path with the number to
// write, and alone: validation judges the rest of the limit, not a limit
// whose rate or quota went missing (before: "line 4: cannot unmarshal
// !!str `10k` into float64", then "limits[0].rate: must be a positive
// number …", and for the quota "limits[1].per: required" and "period,
// timezone and warn_at apply to quotas only").
func TestNumberWithUnitNamesItsField(t *testing.T) {
	_, err := Parse([]byte(`upstreams: [{name: o, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: k, tenant: t}]
limits:
  - {name: a, scope: user, unit: tokens, rate: 10k, per: 1m}
  - {name: b, scope: tenant, unit: usd, quota: 1.5$, period: month, warn_at: [80%]}
  - {name: c, scope: users, unit: tokens, rate: "10,000", per: 1m}
  - name: d
    scope: user
    unit: requests
    rate: 2.5M
    per: 1s
max_body_bytes: 8MiB
max_connections: lots
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *config.Error", err)
	}
	want := []string{
		"line 4: limits[0].rate: `10k` is not a number (write 10000 for 10k: numbers take no suffix, unit or separator)",
		"line 5: limits[1].quota: `1.5$` is not a number (write 1.5 for 1.5$: numbers take no suffix, unit or separator; usd amounts are in dollars)",
		"line 5: limits[1].warn_at[0]: `80%` is not a number (write 0.8 for 80%: numbers take no suffix, unit or separator)",
		"line 6: limits[2].rate: `10,000` is not a number (write 10000 for 10,000: numbers take no suffix, unit or separator)",
		// Other problems of the same limits are still reported (in line
		// order, after the decoder's of the same line).
		`line 6: limits[2].scope: must be one of key, user, tenant, global (got "users") (did you mean user?)`,
		"line 10: limits[3].rate: `2.5M` is not a number (write 2500000 for 2.5M: numbers take no suffix, unit or separator)",
		"line 12: max_body_bytes: `8MiB` is not a whole number of bytes (size suffixes such as MiB or GiB are not read; write 8388608 for 8MiB)",
		"line 13: max_connections: `lots` is not a whole number",
	}
	if !slices.Equal(ce.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(ce.Problems, "\n"), strings.Join(want, "\n"))
	}
}

// explainNumberField never panics; what it rewrites keeps the decoder's
// line, names a path that holds a value of that text on that line, and
// it rewrites only the decoder's number messages.
func FuzzExplainNumberField(f *testing.F) {
	f.Add("line 1: cannot unmarshal !!str `10k` into float64", "rate: 10k\n")
	f.Add("line 2: cannot unmarshal !!str `1.5$` into float64", "limits:\n  - {quota: 1.5$, rate: 1.5$}\n")
	f.Add("line 1: cannot unmarshal !!str `$1,000,000.5` into int64", "a: [{b: [$1,000,000.5]}]\n")
	f.Add("line 1: cannot unmarshal !!str `1GiB` into int64", "x_bytes: 1GiB\n")
	f.Add("line 1: cannot unmarshal !!str `99999999999999999999999999k` into int", "a: 99999999999999999999999999k")
	f.Add("line 3: field x not found in type config.Limit", "x: 1\n")
	f.Fuzz(func(t *testing.T, msg, src string) {
		if len(src) > 4096 {
			return
		}
		var root yaml.Node
		if yaml.Unmarshal([]byte(src), &root) != nil {
			return
		}
		p, ok := explainNumberField(msg, indexValues(&root))
		sub := numberFromScalar.FindStringSubmatch(msg)
		if !ok {
			return
		}
		if sub == nil {
			t.Fatalf("rewrote %q", msg)
		}
		if !strings.HasPrefix(p.message, "line "+sub[1]+": "+p.path+": ") || p.node == nil || p.node.Value != sub[3] {
			t.Fatalf("%q in %q: %+v", msg, src, p)
		}
	})
}

// A fraction given to a whole-number field is an error naming the field,
// wherever the field is (top level, a map of models, a pointer, a list
// element); go.yaml.in/yaml/v3 alone rounds it down without a word
// (max_connections: 100.5 ran as 100). Whole numbers written as floats
// ("1e3", "256.0") are read as they are, and validation's verdict on the
// rounded value (a connection cap below 64) is not added.
func TestFractionInWholeFieldNamed(t *testing.T) {
	_, err := Parse([]byte(`upstreams: [{name: o, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: k, tenant: t}]
limits:
  - {name: a, scope: user, unit: tokens, rate: 1000.5, per: 1m}
models:
  m1: {input_usd_per_mtok: 1, output_usd_per_mtok: 2, max_output_tokens: 1000.5, default_max_output_tokens: 256.0,
       long_context: {above_input_tokens: 2.5e5, input_usd_per_mtok: 2, output_usd_per_mtok: 4}}
  m2: {input_usd_per_mtok: 1, output_usd_per_mtok: 2, long_context: {above_input_tokens: 1000.25, input_usd_per_mtok: 2}}
max_connections: 63.5
max_body_bytes: 1e6
store: {backend: memory, replay_queue: -0.5}
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *config.Error", err)
	}
	want := []string{
		"line 6: models.m1.max_output_tokens: `1000.5` is not a whole number (write 1000 or 1001)",
		"line 8: models.m2.long_context.above_input_tokens: `1000.25` is not a whole number (write 1000 or 1001)",
		"line 9: max_connections: `63.5` is not a whole number (write 63 or 64)",
		"line 11: store.replay_queue: `-0.5` is not a whole number (write -1 or 0)",
	}
	if !slices.Equal(ce.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(ce.Problems, "\n"), strings.Join(want, "\n"))
	}
	c, err := Parse([]byte(`upstreams: [{name: o, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: k, tenant: t}]
max_connections: 1e3
max_body_bytes: 1048576.0
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConnections != 1000 || c.MaxBodyBytes != 1<<20 {
		t.Errorf("max_connections %d, max_body_bytes %d: want 1000 and 1048576", c.MaxConnections, c.MaxBodyBytes)
	}
}

// fractionsInWholeFields never panics on any document, and each problem
// it reports is a float scalar with a fraction, on the line it names.
func FuzzFractionsInWholeFields(f *testing.F) {
	f.Add("max_connections: 100.5\n")
	f.Add("models: {m: {max_output_tokens: 1.5, long_context: {above_input_tokens: .5}}}\n")
	f.Add("limits: [{shards: 2.5, rate: 1.5}]\nstore: {replay_queue: 1e400}\n")
	f.Add("a: &x 1.5\nmax_connections: *x\n")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		var root yaml.Node
		if yaml.Unmarshal([]byte(src), &root) != nil {
			return
		}
		for _, p := range fractionsInWholeFields(&root, reflect.TypeFor[Config]()) {
			if p.node == nil || p.node.ShortTag() != "!!float" || !strings.HasPrefix(p.message, fmt.Sprintf("line %d: %s: ", p.node.Line, p.path)) {
				t.Fatalf("problem %+v", p)
			}
		}
	})
}

// badDurations never panics on any document, and each problem it reports
// is a non-null scalar that is not a Go duration, on the line it names,
// quoting its value.
func FuzzBadDurations(f *testing.F) {
	f.Add("limits: [{per: 1hour}]\n")
	f.Add("upstreams: [{timeout: 30}]\nstore: {timeout: '5 s', deny_cache: 0}\n")
	f.Add("key_store: {resync: soon}\nlimits: [{lease: {ttl: [1s]}, per: ~}]\n")
	f.Add("a: &x soon\nstore: {timeout: *x}\n")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		var root yaml.Node
		if yaml.Unmarshal([]byte(src), &root) != nil {
			return
		}
		for _, p := range badDurations(&root, reflect.TypeFor[Config]()) {
			_, err := time.ParseDuration(p.node.Value)
			want := "want e.g. 250ms, 1s, 1m, 24h"
			if d := durationFor(p.node.Value); d != "" {
				// The suggestion is itself a Go duration.
				if _, err := time.ParseDuration(d); err != nil {
					t.Fatalf("%q: suggests %q, not a Go duration: %v", p.node.Value, d, err)
				}
				want = "write " + d + "; " + want
			}
			if p.node.Kind != yaml.ScalarNode || p.node.ShortTag() == "!!null" || err == nil ||
				p.message != fmt.Sprintf("line %d: %s: `%s` is not a Go duration (%s)", p.node.Line, p.path, p.node.Value, want) {
				t.Fatalf("problem %+v", p)
			}
		}
	})
}

// A duration written without a unit, or with a unit word, is told the Go
// duration it most likely means (trial3: `max_retry_wait: 30` and `per:
// hour` got only examples).
func TestDurationFor(t *testing.T) {
	for v, want := range map[string]string{"30": "30s", "1 hour": "1h", "hour": "1h", "1hr": "1h", "5 min": "5m", "5 minutes": "5m",
		"2 days": "48h", "1.5d": "36h", "a minute": "1m", "an hour": "1h", "250 msec": "250ms", "week": "168h", "10 Seconds": "10s",
		"soon": "", "": "", "1h30": "", "5 parsecs": "", "a": ""} {
		if got := durationFor(v); got != want {
			t.Errorf("durationFor(%q) = %q, want %q", v, got, want)
		}
	}
	_, err := Parse([]byte("upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nmax_retry_wait: 30\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: max_retry_wait: `30` is not a Go duration (write 30s; want e.g.") {
		t.Errorf("err = %v, want the suggestion 30s", err)
	}
}
