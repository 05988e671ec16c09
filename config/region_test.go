package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const regionBase = `
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com"}
`

// A config split between regions parses, with the exchange's defaults.
func TestRegionsParse(t *testing.T) {
	c, err := Parse([]byte(regionBase + `
region: eu
store: {backend: redis, redis_url: "redis://127.0.0.1:6379/0"}
region_exchange:
  peers: {us: "redis://10.0.0.2:6379/0", ap: "rediss://user:pw@10.0.0.3:6380/1"}
limits:
  - {name: org-tpm, scope: global, unit: tokens, rate: 100000, per: 1m, regions: {eu: 0.5, us: 0.3, ap: 0.2}}
  - {name: org-monthly, scope: global, unit: usd, quota: 1000, period: month, regions: {eu: 0.7, us: 0.3}}
  - {name: user-tpm, scope: user, unit: tokens, rate: 1000, per: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	x := c.RegionExchange
	if x == nil || time.Duration(x.Every) != 5*time.Second || x.MaxStep != 0.1 || x.MinShare != 0.05 {
		t.Fatalf("region_exchange defaults: %+v", x)
	}
	if !c.Exchanged(c.Limits[0]) || c.Exchanged(c.Limits[1]) || c.Exchanged(c.Limits[2]) {
		t.Errorf("exchanged: token bucket %v, quota %v, unsplit %v; want true, false, false",
			c.Exchanged(c.Limits[0]), c.Exchanged(c.Limits[1]), c.Exchanged(c.Limits[2]))
	}
	// Static shares need no exchange, nor a Redis store.
	if _, err := Parse([]byte(regionBase + `
region: us
limits:
  - {name: org-rpm, scope: global, unit: requests, rate: 600, per: 1m, regions: {eu: 0.6, us: 0.4}}
`)); err != nil {
		t.Errorf("static shares on the memory store: %v", err)
	}
}

// Every bad field of regions, region and region_exchange is reported, each
// with its path.
func TestRegionsValidateNamesEveryBadField(t *testing.T) {
	_, err := Parse([]byte(regionBase + `
region: eu
store: {backend: memory, timeout: 50ms}
region_exchange:
  every: 50ms
  max_step: 2
  min_share: -0.1
  peers: {eu: "redis://x:1", ap: "redis://y:1", us: "http://z", Bad: "redis://w:1"}
limits:
  - {name: a, scope: user, unit: tokens, rate: 10, per: 1s, regions: {eu: 0.5, us: 0.5}}
  - {name: b, scope: global, unit: tokens, rate: 10, per: 1s, regions: {eu: 0.7, us: 0.6}}
  - {name: c, scope: global, unit: tokens, rate: 10, per: 1s, regions: {us: 0.5, mx: 0.5}}
  - {name: d, scope: global, unit: tokens, rate: 10, per: 1s, regions: {eu: 0, us: 1.5, "EU!": 0.1}}
  - {name: e, scope: global, unit: requests, rate: 10, per: 1s, regions: {eu: 0.01, us: 0.5}}
  - {name: f, scope: global, unit: tokens, rate: 10, per: 1s, regions: {}}
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want *Error, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`limits[0].regions: only a global limit is split between regions (scope is "user")`,
		`limits[1].regions: shares add up to 1.3, more than the whole limit`,
		`limits[2].regions: does not list this node's region "eu" (regions: mx, us)`,
		`limits[3].regions.eu: must be a share of the limit in (0, 1]`,
		`limits[3].regions.us: must be a share of the limit in (0, 1]`,
		`limits[3].regions.EU!: region names are 1-32 lowercase letters`,
		`limits[4].regions.eu: a share of 0.01 of burst 10 holds less than one unit`,
		`limits[5].regions: lists no region`,
		`region_exchange: needs store.backend redis or redis_cluster (got "memory")`,
		`region_exchange.every: must be longer than store.timeout (50ms`,
		`region_exchange.max_step: must be a fraction of the limit in (0, 1] (got 2)`,
		`region_exchange.min_share: must be a fraction of the limit in (0, 1] (got -0.1)`,
		`region_exchange.peers.eu: is this node's own region`,
		`region_exchange.peers.ap: no token-bucket limit lists region "ap"`,
		`region_exchange.peers.us: must be a redis:// or rediss:// URL with a host (got "http://z")`,
		`region_exchange.peers.Bad: region names are 1-32 lowercase letters`,
		`region_exchange.peers: no Redis for region "mx" (limits[2] lists it)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing problem %q in:\n%s", want, strings.ReplaceAll(msg, "; ", "\n"))
		}
	}
}

// A node without a region cannot enforce a region's share; nor can a
// region's name be anything a key or a label cannot hold.
func TestRegionRequired(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"regions without region", `
limits:
  - {name: a, scope: global, unit: tokens, rate: 10, per: 1s, regions: {eu: 0.5, us: 0.5}}
  - {name: b, scope: global, unit: tokens, rate: 10, per: 1s, regions: {eu: 0.5, us: 0.5}}
`, `region: required when a limit has regions (limits[0] has)`},
		{"exchange without region", `
store: {backend: redis, redis_url: "redis://127.0.0.1:6379/0"}
region_exchange: {every: 5s}
`, `region: required with region_exchange`},
		{"bad region name", `
region: "eu:west"
limits:
  - {name: a, scope: global, unit: tokens, rate: 10, per: 1s, regions: {eu: 1}}
`, `region: must be 1-32 lowercase letters, digits, - or _ (got "eu:west")`},
		{"min_share below one unit", `
region: eu
store: {backend: redis, redis_url: "redis://127.0.0.1:6379/0"}
region_exchange: {min_share: 0.001, peers: {us: "redis://10.0.0.2:6379"}}
limits:
  - {name: a, scope: global, unit: requests, rate: 100, per: 1s, regions: {eu: 0.5, us: 0.5}}
`, `limits[0].regions.eu: a share of 0.001 of burst 100 holds less than one unit`},
	} {
		_, err := Parse([]byte(regionBase + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a problem %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Count(err.Error(), "region: required") > 1 {
			t.Errorf("%s: the missing region is reported more than once: %v", tc.name, err)
		}
	}
}

// Shares are compared in parts per million: 0.33 + 0.56 + 0.11 fit the
// whole limit although their float64 sum is above 1.
func TestRegionSharesSumInPPM(t *testing.T) {
	ap, eu, us := 0.33, 0.56, 0.11
	if ap+eu+us <= 1 {
		t.Fatal("the float64 sum this test needs is not above 1 on this machine")
	}
	if _, err := Parse([]byte(regionBase + `
region: eu
limits:
  - {name: a, scope: global, unit: tokens, rate: 1000, per: 1s, regions: {ap: 0.33, eu: 0.56, us: 0.11}}
`)); err != nil {
		t.Fatal(err)
	}
}
