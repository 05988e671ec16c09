package region

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/llmguard/llmguard/policy"
)

// Standing is one region's part in an exchange step: its share now, what
// it asked for in the last interval, and its configured share and floor.
// Shares are in ppm (parts per million of the limit), demand in the limit's
// units.
type Standing struct {
	// Share is the region's share in the current plan, ppm.
	Share int64
	// Demand is the units the region's nodes asked of the limit in the
	// last whole interval (admitted or denied).
	Demand int64
	// Configured is the region's configured share (regions:), ppm.
	Configured int64
	// Floor is the least share the region holds, ppm.
	Floor int64
}

// Headroom is how much a region's need exceeds its demand, in percent: a
// region is lent share up to 125% of what it asked for in the last
// interval, so that a region using all it holds may still grow.
const Headroom = 125

// Next is the exchange's one decision, the same on every node: the shares
// (ppm, in the order of regions) of the step after regions' current
// shares. supply is the units the whole limit refills in one interval
// (rate × interval); maxStep the most any share moves, ppm.
//
// The target is a weighted water-filling of the configured total T (the sum
// of configured shares): every region first holds its floor; the rest goes
// to the regions in proportion to their configured shares above their
// floors (equally among regions configured at their floor, when only they
// are left), but no region
// gets more than its need (Headroom % of its demand, as a share of supply,
// and at least its floor), what a satisfied region leaves going to the
// others; what no region needs is spread in proportion to configured share
// minus floor. So when every region asks for more than its configured
// share, or none asks for anything, the target is the configured split;
// share moves only from a region that does not use it to one that does, and
// a retry storm in one region cannot take more than the others leave.
// Each share then moves toward its target by at most maxStep; if the grown
// shares would sum above T, every growth is scaled down (rounded down) so
// that they fit. The result sums to at most T (given current shares that
// do), and each share lies between its current share and its target, so
// never below its floor (given a current share that is not).
func Next(regions []Standing, supply, maxStep int64) []int64 {
	target := waterFill(regions, supply)
	next := make([]int64, len(regions))
	var total, sum, shrunk, grown int64
	for i, r := range regions {
		total += r.Configured
		sum += r.Share
		d := min(max(target[i]-r.Share, -maxStep), maxStep)
		next[i] = d
		if d < 0 {
			shrunk -= d
		} else {
			grown += d
		}
	}
	room := max(total-sum+shrunk, 0)
	for i, r := range regions {
		d := next[i]
		if d > 0 && grown > room {
			d = mulDiv(d, room, grown)
		}
		next[i] = r.Share + d
	}
	return next
}

// waterFill is Next's target: see Next.
func waterFill(regions []Standing, supply int64) []int64 {
	n := len(regions)
	share := make([]int64, n)
	need := make([]int64, n)
	var total, rest int64
	for i, r := range regions {
		total += r.Configured
		share[i] = r.Floor
		rest -= r.Floor
		need[i] = max(r.Floor, min(policy.PPM, demandPPM(r.Demand, supply)))
	}
	rest += total
	// Each round satisfies at least one region or hands out all that is
	// left (but for rounding), so n+1 rounds suffice.
	for range n + 1 {
		var weights int64
		active := 0
		for i, r := range regions {
			if share[i] < need[i] {
				weights += r.Configured - r.Floor
				active++
			}
		}
		if rest <= 0 || active == 0 {
			break
		}
		weight := func(r Standing) int64 { return r.Configured - r.Floor }
		if weights == 0 { // only regions configured at their floor still need more: equal weights
			weights, weight = int64(active), func(Standing) int64 { return 1 }
		}
		var given int64
		for i, r := range regions {
			if share[i] < need[i] {
				g := min(mulDiv(rest, weight(r), weights), need[i]-share[i])
				share[i] += g
				given += g
			}
		}
		rest -= given
		if given == 0 {
			break
		}
	}
	// What no region needs goes back in proportion to configured share
	// above the floor.
	if rest > 0 {
		var weights int64
		for _, r := range regions {
			weights += r.Configured - r.Floor
		}
		if weights > 0 {
			left := rest
			for i, r := range regions {
				share[i] += mulDiv(left, r.Configured-r.Floor, weights)
			}
		}
	}
	return share
}

// demandPPM is demand as a share of supply with Headroom, ppm, saturating.
func demandPPM(demand, supply int64) int64 {
	if demand <= 0 {
		return 0
	}
	if supply <= 0 {
		return policy.PPM
	}
	hi, lo := bits.Mul64(uint64(demand), uint64(policy.PPM*Headroom/100))
	if hi >= uint64(supply) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(supply))
	return int64(min(q, math.MaxInt64))
}

// mulDiv is a × b / c rounded down, for a, b >= 0, c > 0, b <= c.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// entry is one step of a region's share history: the share (ppm) written at
// At (µs, the region's Redis clock).
type entry struct {
	At    int64
	Share int64
}

// record is a region's share record: the epoch of the plan it holds, and
// its history, newest first. Stored as "<epoch> <at> <share> <at> <share>
// …" (share_write.lua).
type record struct {
	Epoch   int64
	History []entry
}

// parseRecord reads a record; ok is false when s is not one.
func parseRecord(s string) (r record, ok bool) {
	f := strings.Fields(s)
	if len(f) < 3 || len(f)%2 != 1 {
		return record{}, false
	}
	var err error
	if r.Epoch, err = strconv.ParseInt(f[0], 10, 64); err != nil || r.Epoch < 0 {
		return record{}, false
	}
	for i := 1; i < len(f); i += 2 {
		at, err1 := strconv.ParseInt(f[i], 10, 64)
		sh, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || sh < 0 || sh > policy.PPM {
			return record{}, false
		}
		r.History = append(r.History, entry{At: at, Share: sh})
	}
	return r, true
}

// Current is the share the record holds now, ppm.
func (r record) Current() int64 { return r.History[0].Share }

// heldAt is the share a node may use after reading history at now (µs, the
// same Redis clock): the least share the history held over [now − lookback,
// now], or floor when the history does not reach back that far (a new or
// lost record, or a history cut short). See the package documentation for
// why the least over this window is safe.
func heldAt(history []entry, now, lookback, floor int64) int64 {
	least := int64(math.MaxInt64)
	for _, e := range history {
		least = min(least, e.Share)
		if e.At <= now-lookback {
			return max(least, floor)
		}
	}
	return floor
}

// plan is the exchange's current decision for one limit: the epoch, the
// interval it was made in, and every region's share (ppm, in the order of
// the limit's sorted regions). Stored in the coordinating region's Redis
// as "<epoch> <interval> <share> …".
type plan struct {
	Epoch    int64
	Interval int64
	Shares   []int64
}

// String is the plan as stored.
func (p plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d", p.Epoch, p.Interval)
	for _, s := range p.Shares {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(s, 10))
	}
	return b.String()
}

// parsePlan reads a plan of n regions whose shares sum to at most total;
// ok is false when s is not one.
func parsePlan(s string, n int, total int64) (p plan, ok bool) {
	f := strings.Fields(s)
	if len(f) != n+2 {
		return plan{}, false
	}
	var err error
	if p.Epoch, err = strconv.ParseInt(f[0], 10, 64); err != nil || p.Epoch < 0 {
		return plan{}, false
	}
	if p.Interval, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return plan{}, false
	}
	var sum int64
	for _, v := range f[2:] {
		sh, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sh < 0 || sh > policy.PPM {
			return plan{}, false
		}
		sum += sh
		p.Shares = append(p.Shares, sh)
	}
	if sum > total {
		return plan{}, false
	}
	return p, true
}
