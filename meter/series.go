package meter

import (
	"maps"
	"sync"
	"sync/atomic"
)

// maxCachedSeries bounds the series a seriesCache remembers: the label
// values llmguard records are bounded already (rules from the config,
// tenants and models capped by MetricsOptions), so this is a backstop for
// configs with thousands of rules and tenants, whose series past it are
// looked up in the vector each time, as without the cache.
const maxCachedSeries = 4096

// labelValues are the label values of one series, in the vector's label
// order, unused positions "".
type labelValues [4]string

// seriesCache remembers the children of one metric vector by their label
// values. Recording a request then finds each series in a Go map read
// without a lock, instead of prometheus' GetMetricWithLabelValues, which
// hashes and validates every label value and reads the vector's map under
// its lock (about 100–200 ns a call; a request records some eighteen). The
// map is replaced, never changed, when a series is first seen (copy on
// write): series are few and first seen rarely. The children are the
// vector's own, so what is exported does not change; nothing deletes a
// child of a cached vector. The zero value is not usable: with is
// required. Safe for concurrent use.
type seriesCache[M any] struct {
	with func(...string) M // the vector's WithLabelValues
	max  int               // the most series remembered: maxCachedSeries
	mu   sync.Mutex        // serialises replacements of snap
	snap atomic.Pointer[map[labelValues]M]
}

// newSeriesCache returns the cache of the vector whose WithLabelValues is with.
func newSeriesCache[M any](with func(...string) M) *seriesCache[M] {
	return &seriesCache[M]{with: with, max: maxCachedSeries}
}

// get returns the child of the first n values of k, made in the vector
// when first seen (WithLabelValues' panics included).
func (c *seriesCache[M]) get(n int, k labelValues) M {
	if p := c.snap.Load(); p != nil {
		if m, ok := (*p)[k]; ok {
			return m
		}
	}
	return c.miss(n, k)
}

func (c *seriesCache[M]) miss(n int, k labelValues) M {
	vals := make([]string, n)
	copy(vals, k[:n])
	m := c.with(vals...)
	c.mu.Lock()
	defer c.mu.Unlock()
	var next map[labelValues]M
	if old := c.snap.Load(); old != nil {
		if len(*old) >= c.max {
			return m
		}
		next = maps.Clone(*old)
	} else {
		next = make(map[labelValues]M, 1)
	}
	next[k] = m
	c.snap.Store(&next)
	return m
}

// reset forgets every series (a reload may drop limits; their series stay
// in the vector, as before).
func (c *seriesCache[M]) reset() { c.snap.Store(nil) }
