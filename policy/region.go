package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
)

// PPM is the resolution of a region's share: parts per million of a
// limit (config.PPM).
const PPM = config.PPM

// Regional is the split of a global rule between regions (config
// Limit.Regions), as this node sees it: the configured share of every
// region, and the share this node's region holds now. A node in region r
// takes from its own store with the rule's capacity and refill rate (a
// quota: its quota) scaled by r's share, under a key that names r. Without
// the region exchange (or for a quota) the share is the configured one;
// with it, the share is what package region last read from this region's
// Redis (Hold), and the region's floor when that read is older than its
// validity. Its fields are immutable after Compile; the held share and the
// demand counter are safe for concurrent use.
type Regional struct {
	// Region is this node's region (config Region); Regions holds it at
	// index Self.
	Region string
	// Regions are the limit's regions, sorted by name.
	Regions []string
	// Shares are the configured shares of Regions, in ppm (parts per
	// million of the limit), summing to at most PPM.
	Shares []int64
	// Floors are the least shares of Regions under the exchange, in ppm:
	// min(region_exchange.min_share, the configured share). Without the
	// exchange, the configured shares.
	Floors []int64
	// Self is the index of Region in Regions.
	Self int
	// Exchanged: region_exchange moves this rule's shares (a token bucket
	// while the exchange is on).
	Exchanged bool
	// Fill is the time the whole limit's token bucket takes to fill from
	// empty (capacity / rate × per; the same at every share): how long a
	// grown share waits before its bucket refills at the higher rate (see
	// package region). Zero for a quota.
	Fill time.Duration
	// Fingerprint is 8 hex digits of a SHA-256 of the regions, shares and
	// floors: the exchange keeps its records under it, so that a change of
	// shares starts afresh instead of mixing two configurations.
	Fingerprint string

	key    string // the store key of the region's bucket
	held   atomic.Pointer[heldShare]
	demand atomic.Int64
}

// heldShare is a share read by the exchange and the instant (node clock)
// until which it may be used.
type heldShare struct {
	ppm   int64
	until time.Time
}

// newRegional compiles l's regions for rule r (compiled, without regions)
// on a node of c.Region. c is validated.
func newRegional(c *config.Config, l config.Limit, r *Rule) *Regional {
	g := &Regional{Region: c.Region, Regions: slices.Sorted(maps.Keys(l.Regions)), Exchanged: c.Exchanged(l)}
	fp := sha256.New()
	for i, name := range g.Regions {
		share := config.SharePPM(l.Regions[name])
		floor := share
		if g.Exchanged {
			floor = min(share, config.SharePPM(c.RegionExchange.MinShare))
		}
		g.Shares, g.Floors = append(g.Shares, share), append(g.Floors, floor)
		if name == c.Region {
			g.Self = i
		}
		fmt.Fprintf(fp, "%s=%d/%d;", name, share, floor)
	}
	g.Fingerprint = hex.EncodeToString(fp.Sum(nil)[:4])
	g.key = "llmguard:{global}:" + r.Name + ";region=" + c.Region
	if !r.IsQuota() && r.Limit.Rate > 0 {
		fill := float64(r.Limit.Per) * float64(r.Limit.Capacity) / float64(r.Limit.Rate)
		g.Fill = time.Duration(min(math.Ceil(fill), math.MaxInt64/4))
	}
	return g
}

// Key is the store key of the region's bucket:
// llmguard:{global}:<rule>;region=<region>. A limit name cannot hold ';'
// or '=', nor a region name either, so no other rule's key can equal it.
func (g *Regional) Key() string { return g.key }

// Total is the sum of the configured shares, in ppm: what the exchange
// distributes.
func (g *Regional) Total() int64 {
	var t int64
	for _, s := range g.Shares {
		t += s
	}
	return t
}

// Share is this region's share at now (node clock), in ppm: the configured
// share without the exchange; with it, the share last held (Hold) while
// now is before its deadline, else the region's floor (also before the
// first Hold).
func (g *Regional) Share(now time.Time) int64 {
	if !g.Exchanged {
		return g.Shares[g.Self]
	}
	h := g.held.Load()
	if h == nil || !now.Before(h.until) {
		return g.Floors[g.Self]
	}
	return h.ppm
}

// Hold makes ppm (clamped to [floor, PPM]) this region's share until the
// instant until (node clock), after which Share falls back to the floor.
// Package region calls it after each read of the region's share.
func (g *Regional) Hold(ppm int64, until time.Time) {
	g.held.Store(&heldShare{ppm: min(max(ppm, g.Floors[g.Self]), PPM), until: until})
}

// NoteDemand adds units (in the rule's unit) to the demand this node has
// seen since the last TakeDemand: what requests asked of the rule, whether
// it admitted them or denied them. Only an exchanged rule counts.
func (g *Regional) NoteDemand(units int64) {
	if g.Exchanged && units > 0 {
		g.demand.Add(units)
	}
}

// TakeDemand returns the demand noted since the last call, in units, and
// starts a new count.
func (g *Regional) TakeDemand() int64 { return g.demand.Swap(0) }

// Adopt carries old's held share and uncounted demand over to g, when both
// describe the same split of the same limit (a reload that left it alone),
// so that a reload neither drops the share to the floor nor loses demand.
// It does nothing otherwise.
func (g *Regional) Adopt(old *Regional) {
	if old == nil || old.Fingerprint != g.Fingerprint || old.Region != g.Region || old.Exchanged != g.Exchanged {
		return
	}
	if h := old.held.Load(); h != nil {
		g.held.Store(h)
	}
	g.demand.Add(old.demand.Swap(0))
}

// NoteDemand records units of demand on the rule when it is split between
// regions and exchanged (see Regional.NoteDemand); otherwise it does
// nothing.
func (r *Rule) NoteDemand(units int64) {
	if r.Regional != nil {
		r.Regional.NoteDemand(units)
	}
}

// maxUnits is the largest capacity or rate a bucket.Limit holds (2^53).
const maxUnits = 1 << 53

// scaleLimit is l scaled to ppm parts per million, never above: the
// capacity rounded down; a token bucket's rate exactly when it fits (rate
// × n per per × d, n/d the reduced fraction), else rounded down, else one
// unit per a period stretched to keep it below the share. ok is false when
// no limit at or below the share is valid (under one unit of capacity, or
// a refill slower than one unit per 292 years): the result is then the
// least valid limit, above the share. Compile refuses every split whose
// least share is not ok.
func scaleLimit(l bucket.Limit, ppm int64) (_ bucket.Limit, ok bool) {
	if ppm >= PPM {
		return l, true
	}
	ppm = max(ppm, 1)
	c := mulDiv(l.Capacity, ppm, PPM)
	l.Capacity, ok = max(1, c), c >= 1
	if l.IsQuota() {
		return l, ok
	}
	g := gcd(ppm, PPM)
	n, d := ppm/g, int64(PPM)/g
	if l.Rate <= maxUnits/n && l.Per <= time.Duration(math.MaxInt64/d) {
		l.Rate, l.Per = l.Rate*n, l.Per*time.Duration(d)
		return l, ok
	}
	if r := mulDiv(l.Rate, ppm, PPM); r >= 1 {
		l.Rate = r
		return l, ok
	}
	k := (PPM + l.Rate*ppm - 1) / (l.Rate * ppm) // l.Rate*ppm < PPM here
	if l.Per > time.Duration(math.MaxInt64/k) {
		l.Rate, l.Per = 1, time.Duration(math.MaxInt64)
		return l, false
	}
	l.Rate, l.Per = 1, l.Per*time.Duration(k)
	return l, ok
}

// check reports, for Compile, a region whose least share (its floor) or
// configured share of l makes no valid limit; "" when every one does.
func (g *Regional) check(l bucket.Limit) string {
	for i, name := range g.Regions {
		for _, ppm := range []int64{g.Floors[i], g.Shares[i]} {
			if _, ok := scaleLimit(l, ppm); !ok {
				return fmt.Sprintf("region %q's share %v of this limit holds less than one unit, or refills slower than one unit per 292 years",
					name, float64(ppm)/PPM)
			}
		}
	}
	return ""
}

// mulDiv is a × b / c rounded down, for a, b >= 0 and c > 0 whose quotient
// fits an int64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// AdoptRegional carries over, rule by rule (by name), the held shares and
// uncounted demand of old's split rules (Regional.Adopt). A reload calls
// it on the new policy before the policy serves. old may be nil.
func (p *Policy) AdoptRegional(old *Policy) {
	if old == nil {
		return
	}
	prev := map[string]*Regional{}
	for i := range old.rules {
		if g := old.rules[i].Regional; g != nil {
			prev[old.rules[i].Name] = g
		}
	}
	for i := range p.rules {
		if g := p.rules[i].Regional; g != nil {
			g.Adopt(prev[p.rules[i].Name])
		}
	}
}

// RegionCapacity is the rule's capacity in this node's region at its
// configured share, in units (a quota: its quota): what a request must fit
// in there. For a rule not split, Limit.Capacity.
func (r *Rule) RegionCapacity() int64 {
	if r.Regional == nil {
		return r.Limit.Capacity
	}
	l, _ := scaleLimit(r.Limit, r.Regional.Shares[r.Regional.Self])
	return l.Capacity
}
