package policy

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

const regionalConfig = `
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com"}
region: eu
store: {backend: redis, redis_url: "redis://127.0.0.1:6379/0"}
region_exchange: {every: 5s, min_share: 0.1, peers: {us: "redis://10.0.0.2:6379/0"}}
limits:
  - {name: org-tpm, scope: global, unit: tokens, rate: 100, per: 1s, burst: 1000, regions: {eu: 0.6, us: 0.4}}
  - {name: org-model-tpm, scope: global, unit: tokens, rate: 100, per: 1s, per_model: true, regions: {eu: 0.6, us: 0.4}}
  - {name: org-monthly, scope: global, unit: usd, quota: 100, period: month, regions: {eu: 0.25, us: 0.75}}
  - {name: all-tpm, scope: global, unit: tokens, rate: 100, per: 1s}
  - {name: user-tpm, scope: user, unit: tokens, rate: 100, per: 1s}
`

func rule(t testing.TB, p *Policy, name string) *Rule {
	t.Helper()
	for i := range p.Rules() {
		if p.Rules()[i].Name == name {
			return &p.Rules()[i]
		}
	}
	t.Fatalf("no rule %q", name)
	return nil
}

// A split rule's keys name the node's region; every other key is as it was.
func TestRegionalKeys(t *testing.T) {
	p, err := Compile(mustConfig(t, regionalConfig))
	if err != nil {
		t.Fatal(err)
	}
	pr := Principal{KeyID: "0123abcd", User: "alice", Tenant: "acme"}
	for _, tc := range []struct{ got, want string }{
		{rule(t, p, "org-tpm").Key(pr), "llmguard:{global}:org-tpm;region=eu"},
		{rule(t, p, "org-model-tpm").ModelKey(pr, "gpt-4o"), "llmguard:{global}:org-model-tpm;region=eu:gpt-4o"},
		{rule(t, p, "org-monthly").Key(pr), "llmguard:{global}:org-monthly;region=eu"},
		{rule(t, p, "all-tpm").Key(pr), "llmguard:{global}:all-tpm"},
		{rule(t, p, "user-tpm").Key(pr), "llmguard:{acme}:user-tpm:alice"},
	} {
		if tc.got != tc.want {
			t.Errorf("key %q, want %q", tc.got, tc.want)
		}
	}
	// The same limit in another region has another key.
	us := mustConfig(t, regionalConfig)
	us.Region, us.RegionExchange.Peers = "us", map[string]string{"eu": "redis://10.0.0.1:6379/0"}
	pu, err := Compile(us)
	if err != nil {
		t.Fatal(err)
	}
	if k := rule(t, pu, "org-tpm").Key(pr); k != "llmguard:{global}:org-tpm;region=us" {
		t.Errorf("us key %q", k)
	}
}

// A region's share scales capacity and rate (a quota: the quota): the
// configured share without the exchange (a quota is never exchanged); with
// it, the floor until a share is held, the held share while it is valid,
// the floor after.
func TestRegionalLimitAt(t *testing.T) {
	p, err := Compile(mustConfig(t, regionalConfig))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	tpm := rule(t, p, "org-tpm")
	perSecond := func(l bucket.Limit) float64 { return float64(l.Rate) * float64(time.Second) / float64(l.Per) }
	steps := []struct {
		name     string
		hold     int64 // ppm; 0: no Hold
		until    time.Duration
		at       time.Duration
		capacity int64
		rate     float64 // per second
	}{
		{name: "before any read: the floor (0.1)", at: 0, capacity: 100, rate: 10},
		{name: "a held share", hold: 750_000, until: 10 * time.Second, at: 5 * time.Second, capacity: 750, rate: 75},
		{name: "its last instant", at: 10*time.Second - 1, capacity: 750, rate: 75},
		{name: "expired: the floor", at: 10 * time.Second, capacity: 100, rate: 10},
		{name: "a share below the floor is held as the floor", hold: 50_000, until: time.Minute, at: 20 * time.Second, capacity: 100, rate: 10},
	}
	for i, s := range steps {
		if s.hold != 0 {
			tpm.Regional.Hold(s.hold, now.Add(s.until))
		}
		l := tpm.LimitAt(now.Add(s.at))
		if l.Capacity != s.capacity || perSecond(l) != s.rate {
			t.Errorf("step %d (%s): capacity %d rate %v/s, want %d and %v/s", i, s.name, l.Capacity, perSecond(l), s.capacity, s.rate)
		}
	}
	q := rule(t, p, "org-monthly").LimitAt(now)
	if !q.IsQuota() || q.Capacity != 25_000_000 {
		t.Errorf("quota: %+v, want a quota of 25000000 micro-USD (a quarter of $100)", q)
	}
	if g := rule(t, p, "org-monthly").Regional; g.Exchanged || g.Share(now) != 250_000 {
		t.Errorf("quota: exchanged %v share %d, want its configured 250000, never exchanged", g.Exchanged, g.Share(now))
	}
	if l := rule(t, p, "all-tpm").LimitAt(now); l.Capacity != 100 || l.Rate != 100 || l.Per != time.Second {
		t.Errorf("unsplit rule: %+v", l)
	}
}

// scaleLimit never gives a region more than its share of the capacity or
// of the rate, stays a valid limit, and is exact when the numbers allow.
func TestScaleLimitNeverAboveTheShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pers := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour, 30 * 24 * time.Hour}
	for i := range 20000 {
		l := bucket.Limit{Capacity: 1 + rng.Int64N(1<<uint(rng.IntN(53))), Rate: 1 + rng.Int64N(1<<uint(rng.IntN(53))), Per: pers[rng.IntN(len(pers))]}
		ppm := 1 + rng.Int64N(PPM)
		if rng.IntN(4) == 0 {
			ppm = []int64{1, 3, 333_333, 500_000, 999_999, PPM}[rng.IntN(6)]
		}
		s, ok := scaleLimit(l, ppm)
		if !ok {
			small := mulDiv(l.Capacity, ppm, PPM) < 1 || float64(l.Rate)*float64(ppm)/PPM*float64(math.MaxInt64)/float64(l.Per) < 1
			if !small {
				t.Fatalf("case %d: scaleLimit(%+v, %d) not ok, but the share holds a unit and refills one in 292 years", i, l, ppm)
			}
			continue
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("case %d: scaleLimit(%+v, %d) = %+v: %v", i, l, ppm, s, err)
		}
		share := big.NewRat(ppm, PPM)
		wantCap := new(big.Rat).Mul(big.NewRat(l.Capacity, 1), share)
		if big.NewRat(s.Capacity, 1).Cmp(wantCap) > 0 {
			t.Fatalf("case %d: capacity %d above %v of %d", i, s.Capacity, share, l.Capacity)
		}
		rate := func(l bucket.Limit) *big.Rat {
			return new(big.Rat).SetFrac(big.NewInt(l.Rate), big.NewInt(int64(l.Per)))
		}
		wantRate := new(big.Rat).Mul(rate(l), share)
		if rate(s).Cmp(wantRate) > 0 {
			t.Fatalf("case %d: rate %v/ns above %v of %v/ns (%+v → %+v)", i, rate(s), share, rate(l), l, s)
		}
	}
	// Exact where it fits: half of 100/s is 100 per 2 s.
	if s, _ := scaleLimit(bucket.Limit{Capacity: 1000, Rate: 100, Per: time.Second}, 500_000); s.Capacity != 500 || s.Rate != 100 || s.Per != 2*time.Second {
		t.Errorf("half of 1000, 100/s: %+v", s)
	}
	// A quota keeps its window; only the quota scales.
	start, end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if s, _ := scaleLimit(bucket.Quota(1000, start, end), 333_333); s.Capacity != 333 || !s.WindowStart.Equal(start) || !s.WindowEnd.Equal(end) {
		t.Errorf("a third of a quota of 1000: %+v", s)
	}
}

// A reload that leaves a split alone keeps its held share and the demand
// not yet recorded; one that changes the shares starts afresh.
func TestRegionalAdopt(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	old, err := Compile(mustConfig(t, regionalConfig))
	if err != nil {
		t.Fatal(err)
	}
	og := rule(t, old, "org-tpm").Regional
	og.Hold(700_000, now.Add(time.Minute))
	rule(t, old, "org-tpm").NoteDemand(42)
	rule(t, old, "all-tpm").NoteDemand(42) // not split: nothing to count

	same, err := Compile(mustConfig(t, regionalConfig))
	if err != nil {
		t.Fatal(err)
	}
	same.AdoptRegional(old)
	g := rule(t, same, "org-tpm").Regional
	if g.Share(now) != 700_000 || g.TakeDemand() != 42 || og.TakeDemand() != 0 {
		t.Errorf("same split: share %d (want 700000), demand moved over", g.Share(now))
	}

	changed := mustConfig(t, regionalConfig)
	changed.Limits[0].Regions = map[string]float64{"eu": 0.5, "us": 0.5}
	next, err := Compile(changed)
	if err != nil {
		t.Fatal(err)
	}
	next.AdoptRegional(same)
	if g := rule(t, next, "org-tpm").Regional; g.Share(now) != 100_000 || g.Fingerprint == og.Fingerprint {
		t.Errorf("changed split: share %d (want the floor 100000), fingerprint %s (old %s)", g.Share(now), g.Fingerprint, og.Fingerprint)
	}
}

// Compile refuses a split whose least share makes no valid bucket, which
// config validation (capacity only) lets through: here a refill of one
// unit per million years.
func TestRegionalCompileRefusesAnUnusableShare(t *testing.T) {
	_, err := Compile(mustConfig(t, `
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com"}
region: eu
limits:
  - {name: slow, scope: global, unit: tokens, rate: 1, per: 8760h, burst: 1000000, regions: {eu: 0.000001, us: 0.5}}
`))
	if err == nil || !strings.Contains(err.Error(), `limits[0].regions: region "eu"'s share 1e-06 of this limit`) {
		t.Fatalf("got %v", err)
	}
}
