package config

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/llmguard/llmguard/spec"
)

// RegionExchange configures the asynchronous exchange of unused share
// between regions (region_exchange:). Each node records its region's demand
// on every exchanged limit in its own Redis; every Every, one node
// (whichever gets there first) computes the next shares from every
// region's demand and the nodes of each region apply their own. Only token
// buckets are exchanged: a quota's regions keep their configured shares
// (a quota's spent budget cannot be handed back). Package region holds the
// protocol and its guarantee.
type RegionExchange struct {
	// Every is the exchange interval: how often a node records demand,
	// re-reads its region's share and tries to advance the exchange.
	// Longer than store.timeout (a take in flight must end within one
	// interval) and at most 1h. Default 5s.
	Every Duration `yaml:"every"`
	// Peers maps every other region named by an exchanged limit to its
	// Redis (redis:// or rediss:// URL, one server). This node's own
	// region's Redis is store.redis_url (or the cluster).
	Peers map[string]string `yaml:"peers"`
	// MaxStep is the most a region's share moves in one exchange step, as
	// a fraction of the limit, in (0, 1]. Default 0.1.
	MaxStep float64 `yaml:"max_step"`
	// MinShare is the least share a region ever holds while the exchange
	// runs, as a fraction of the limit: a region configured with less
	// keeps its configured share as its least. In (0, 1]. Default 0.05.
	MinShare float64 `yaml:"min_share"`
}

// PPM is the resolution of a region's share: shares are held in parts per
// million of the limit, integers, so that every node computes the same
// shares from the same numbers.
const PPM = 1_000_000

// SharePPM is share (a fraction of a limit, as written in regions:)
// rounded to the nearest part per million.
func SharePPM(share float64) int64 { return int64(math.Round(share * PPM)) }

// maxRegionName is the longest region name, in bytes: it is part of store
// keys and of metric labels.
const maxRegionName = 32

// validRegionName reports whether s is 1-32 lowercase ASCII letters,
// digits, '-' or '_', starting with a letter or digit: safe in a store key
// segment without escaping.
func validRegionName(s string) bool {
	if s == "" || len(s) > maxRegionName || s[0] == '-' || s[0] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (c *Config) applyRegionDefaults() {
	x := c.RegionExchange
	if x == nil {
		return
	}
	if x.Every == 0 {
		x.Every = Duration(5 * time.Second)
	}
	if x.MaxStep == 0 {
		x.MaxStep = 0.1
	}
	if x.MinShare == 0 {
		x.MinShare = 0.05
	}
}

// Exchanged reports whether the region exchange moves l's shares: it has
// regions, is a token bucket, and the exchange is on.
func (c *Config) Exchanged(l Limit) bool {
	return c.RegionExchange != nil && len(l.Regions) > 0 && l.Quota == 0
}

// validateRegions reports every problem of region, region_exchange and the
// limits' regions.
func (c *Config) validateRegions(p *problems) {
	if c.Region != "" && !validRegionName(c.Region) {
		p.add("region", "must be 1-%d lowercase letters, digits, - or _ (got %q)", maxRegionName, c.Region)
	}
	named := map[string]string{} // exchanged regions → the first limit naming them
	firstRegional := ""
	for i, l := range c.Limits {
		if len(l.Regions) == 0 {
			if l.Regions != nil {
				p.add(fmt.Sprintf("limits[%d].regions", i), "lists no region: remove it, or give each region its share")
			}
			continue
		}
		if firstRegional == "" {
			firstRegional = fmt.Sprintf("limits[%d]", i)
		}
		c.validateLimitRegions(p, i, l, named)
	}
	x := c.RegionExchange
	switch {
	case c.Region == "" && firstRegional != "":
		p.add("region", "required when a limit has regions (%s has): name this node's region", firstRegional)
	case c.Region == "" && x != nil:
		p.add("region", "required with region_exchange: name this node's region")
	}
	if x == nil {
		return
	}
	if !c.Store.Kind().Shared() {
		p.add("region_exchange", "needs store.backend redis or redis_cluster (got %q): each region's own Redis holds its shares and demand", c.Store.Backend)
	}
	switch {
	case x.Every == invalidDuration:
		checkDuration(p, "region_exchange.every", x.Every)
	case x.Every <= c.Store.Timeout || x.Every > Duration(time.Hour):
		p.add("region_exchange.every", "must be longer than store.timeout (%v: a take in flight must end within one interval) and at most 1h (got %v)",
			time.Duration(c.Store.Timeout), time.Duration(x.Every))
	}
	if !(x.MaxStep > 0 && x.MaxStep <= 1) {
		p.add("region_exchange.max_step", "must be a fraction of the limit in (0, 1] (got %v)", x.MaxStep)
	}
	if !(x.MinShare > 0 && x.MinShare <= 1) {
		p.add("region_exchange.min_share", "must be a fraction of the limit in (0, 1] (got %v)", x.MinShare)
	}
	for _, r := range slices.Sorted(maps.Keys(x.Peers)) {
		f := "region_exchange.peers." + r
		switch u := x.Peers[r]; {
		case !validRegionName(r):
			p.add(f, "region names are 1-%d lowercase letters, digits, - or _", maxRegionName)
		case r == c.Region:
			p.add(f, "is this node's own region, whose Redis is the store's: remove it")
		case named[r] == "":
			p.add(f, "no token-bucket limit lists region %q in its regions", r)
		default:
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss") || pu.Host == "" {
				p.add(f, "must be a redis:// or rediss:// URL with a host (got %q)", u)
			}
		}
	}
	for _, r := range slices.Sorted(maps.Keys(named)) {
		if _, ok := x.Peers[r]; !ok && r != c.Region {
			p.add("region_exchange.peers", "no Redis for region %q (%s lists it)", r, named[r])
		}
	}
}

// validateLimitRegions reports the problems of limits[i].regions and
// records in named the regions an exchanged limit lists.
func (c *Config) validateLimitRegions(p *problems, i int, l Limit, named map[string]string) {
	f := fmt.Sprintf("limits[%d].regions", i)
	if scope, ok := spec.ParseScope(l.Scope); ok && scope != spec.ScopeGlobal {
		p.add(f, "only a global limit is split between regions (scope is %q)", l.Scope)
	}
	given, what := l.Burst, "burst"
	if l.Quota != 0 {
		given, what = l.Quota, "quota"
	}
	amount := given // in units
	if unit, ok := spec.ParseUnit(l.Unit); ok && unit == spec.UnitUSD {
		amount *= 1e6 // micro-USD
	}
	var sum int64
	names := slices.Sorted(maps.Keys(l.Regions))
	for _, r := range names {
		share := l.Regions[r]
		switch {
		case !validRegionName(r):
			p.add(f+"."+r, "region names are 1-%d lowercase letters, digits, - or _", maxRegionName)
		case !(share > 0 && share <= 1) || SharePPM(share) < 1:
			p.add(f+"."+r, "must be a share of the limit in (0, 1], at least 0.000001 (got %v)", share)
		default:
			sum += SharePPM(share)
			least := share
			if c.Exchanged(l) && c.RegionExchange.MinShare > 0 {
				least = min(least, c.RegionExchange.MinShare)
			}
			if amount > 0 && math.Floor(amount*float64(SharePPM(least))/PPM) < 1 {
				p.add(f+"."+r, "a share of %v of %s %v holds less than one unit (region_exchange.min_share lowers a share to at most its value)", least, what, given)
			}
		}
		if c.Exchanged(l) && named[r] == "" {
			named[r] = fmt.Sprintf("limits[%d]", i)
		}
	}
	if sum > PPM {
		p.add(f, "shares add up to %v, more than the whole limit (1)", float64(sum)/PPM)
	}
	if validRegionName(c.Region) && !slices.Contains(names, c.Region) {
		p.add(f, "does not list this node's region %q (regions: %s): a node enforces its own region's share", c.Region, strings.Join(names, ", "))
	}
}
