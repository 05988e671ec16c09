package reserve

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The sketch's quantile is never below the exact quantile of the same
// outputs and at most γ (4%) above it, over skewed workloads; with no decay
// to speak of (a half-life far longer than the run) the weights are equal.
func TestSketchQuantileBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		s := NewSketch(1 << 30)
		var xs []int64
		for range 20000 {
			v := int64(rng.ExpFloat64()*400) + int64(rng.IntN(3))*2000 // a mix: short replies and long ones
			s.Add(v)
			xs = append(xs, v)
		}
		slices.Sort(xs)
		exact := xs[int(q*float64(len(xs)-1)+0.999999)]
		got := s.Quantile(q)
		if got < exact || float64(got) > float64(exact)*gamma+1 {
			t.Errorf("q=%v: sketch %d, exact %d: outside [exact, exact×%v]", q, got, exact, gamma)
		}
	}
}

// An output lands in the bucket whose bound holds it: upper(bucketOf(n)) ≥ n
// and upper(bucketOf(n)-1) < n.
func TestBucketOfBounds(t *testing.T) {
	for n := int64(1); n < 3_000_000; n = n*11/10 + 1 {
		i := bucketOf(n)
		if i < numBuckets-1 && upper(i) < n {
			t.Fatalf("n=%d: bucket %d ends at %d, below n", n, i, upper(i))
		}
		if i > 1 && upper(i-1) >= n {
			t.Fatalf("n=%d: bucket %d, but the bucket before ends at %d", n, i, upper(i-1))
		}
	}
	if bucketOf(0) != 0 || bucketOf(-5) != 0 || upper(0) != 0 {
		t.Fatal("0 and negative outputs belong to bucket 0")
	}
}

// Decay: after the workload shifts from short to long outputs, the learned
// quantile follows within a few half-lives, and the weight rescaling keeps
// it finite over a long run.
func TestSketchDecayFollowsShift(t *testing.T) {
	s := NewSketch(100)
	for range 5000 {
		s.Add(100)
	}
	if got := s.Quantile(0.95); got < 100 || got > 105 {
		t.Fatalf("short phase: p95 %d, want ≈100", got)
	}
	for range 1000 { // ten half-lives: the old outputs weigh 2^-10
		s.Add(3000)
	}
	if got := s.Quantile(0.5); got < 3000 || got > 3120 {
		t.Fatalf("after the shift: p50 %d, want ≈3000 (the old outputs should have faded)", got)
	}
	for range 200_000 { // past rescaleAbove many times over
		s.Add(50)
	}
	if got := s.Quantile(0.95); got < 50 || got > 52 {
		t.Fatalf("after a long run: p95 %d, want ≈50", got)
	}
}
