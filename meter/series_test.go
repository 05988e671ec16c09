package meter

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A cached child is the vector's own: what is recorded through the cache
// is exported as before, past the cache's bound and after a reset too.
func TestSeriesCacheIsTheVectorsChild(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"a", "b"})
	c := newSeriesCache(vec.WithLabelValues)
	c.max = 64
	for i := range c.max + 10 {
		c.get(2, labelValues{"r" + strconv.Itoa(i), "t"}).Inc()
	}
	c.get(2, labelValues{"r1", "t"}).Add(2)
	c.get(2, labelValues{"r" + strconv.Itoa(c.max+5), "t"}).Add(2) // past the bound: not cached
	c.reset()
	c.get(2, labelValues{"r1", "t"}).Inc()
	if got := testutil.ToFloat64(vec.WithLabelValues("r1", "t")); got != 4 {
		t.Errorf("r1: %v, want 4", got)
	}
	if got := testutil.ToFloat64(vec.WithLabelValues("r"+strconv.Itoa(c.max+5), "t")); got != 3 {
		t.Errorf("past the bound: %v, want 3", got)
	}
	if n := len(*c.snap.Load()); n != 1 {
		t.Errorf("%d series cached after a reset and one lookup, want 1", n)
	}
	if got := testutil.CollectAndCount(vec); got != c.max+10 {
		t.Errorf("%d series, want %d", got, c.max+10)
	}
}

// BenchmarkSeriesCache is a child looked up through the cache against the
// vector's WithLabelValues, as requests_total's four labels.
func BenchmarkSeriesCache(b *testing.B) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"flavor", "model", "outcome", "limit"})
	c := newSeriesCache(vec.WithLabelValues)
	b.Run("cache", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c.get(4, labelValues{"openai", "gpt-4o-mini", OutcomeAllowed, ""}).Inc()
		}
	})
	b.Run("vector", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			vec.WithLabelValues("openai", "gpt-4o-mini", OutcomeAllowed, "").Inc()
		}
	})
}
