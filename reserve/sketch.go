package reserve

import (
	"math"
)

// Sketch geometry: bucket 0 holds outputs of 0 tokens; bucket i ≥ 1 holds
// outputs in (γ^(i-1), γ^i] tokens with γ = 1.04, so a quantile read as its
// bucket's upper bound is at most 4% above the true value and never below
// it. The last bucket also holds everything above γ^(numBuckets-1) ≈ 2.6M
// tokens, beyond any model's output.
const (
	gamma      = 1.04
	numBuckets = 378
)

// logGamma is ln γ.
var logGamma = math.Log(gamma)

// bucketOf is the bucket of an output of n tokens.
func bucketOf(n int64) int {
	if n <= 0 {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(n))/logGamma - 1e-9))
	return min(max(i, 1), numBuckets-1)
}

// upper is the largest output, in tokens, bucket i holds (the bound a
// quantile reports).
func upper(i int) int64 {
	if i == 0 {
		return 0
	}
	return int64(math.Floor(math.Pow(gamma, float64(i)) + 1e-9))
}

// rescaleAbove is the weight past which a Sketch divides every count by it,
// keeping float64 far from overflow.
const rescaleAbove = 1e100

// Sketch is a decaying histogram of output sizes in tokens: each observation
// counts 2^(k/HalfLife) where k is its sequence number (forward decay), so
// an observation HalfLife observations old weighs half as much as the
// newest. Its size is fixed (numBuckets counts, about 3 KiB). The zero value
// is not usable: build one with NewSketch. Not safe for concurrent use
// (Learner guards its sketches).
type Sketch struct {
	counts [numBuckets]float64
	total  float64
	weight float64 // the weight of the next observation
	growth float64 // 2^(1/HalfLife)
	n      int64   // observations, undecayed
}

// NewSketch returns an empty sketch whose observations lose half their
// weight every halfLife later observations (at least 1).
func NewSketch(halfLife int) *Sketch {
	return &Sketch{weight: 1, growth: math.Exp2(1 / float64(max(halfLife, 1)))}
}

// Add records one output of n tokens (negative counts as 0).
func (s *Sketch) Add(n int64) {
	s.counts[bucketOf(n)] += s.weight
	s.total += s.weight
	s.n++
	s.weight *= s.growth
	if s.weight > rescaleAbove {
		for i := range s.counts {
			s.counts[i] /= s.weight
		}
		s.total /= s.weight
		s.weight = 1
	}
}

// Count is the number of outputs recorded, undecayed.
func (s *Sketch) Count() int64 { return s.n }

// Quantile is the q-quantile (0 < q < 1) of the recorded outputs, weighted
// by recency, in tokens: the upper bound of the first bucket where the
// cumulative weight reaches q of the total, so at most 4% above the true
// weighted quantile and never below it. 0 when nothing was recorded.
func (s *Sketch) Quantile(q float64) int64 {
	if s.n == 0 {
		return 0
	}
	target := q * s.total
	var cum float64
	for i, c := range s.counts {
		cum += c
		if cum >= target && c > 0 {
			return upper(i)
		}
	}
	return upper(numBuckets - 1)
}
