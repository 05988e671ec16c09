package loadbench

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// llmguardCounters are the counters of llmguard's /metrics the benchmark
// checks: that every request was admitted by the limiter (not refused, not
// unmetered), and that the store answered every call.
type llmguardCounters struct {
	allowed     float64 // llmguard_requests_total{outcome="allowed"}, summed
	storeErrors float64 // llmguard_store_errors_total, summed
	// storeErrorsBy is llmguard_store_errors_total by "op/kind" (take or
	// reconcile; timeout, connection or other).
	storeErrorsBy map[string]float64
	// cacheHits and cacheMisses are llmguard_count_cache_hits_total and
	// _misses_total: lookups of the weigher's count cache.
	cacheHits, cacheMisses float64
	// reconcilePending is llmguard_reconcile_queue_length: reconciliations
	// accepted and not yet applied (or dropped).
	reconcilePending float64
}

var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// scrape reads llmguardCounters from the admin listener at admin (a base
// URL). Errors: the request fails or the status is not 200.
func scrape(admin string) (llmguardCounters, error) {
	c := llmguardCounters{storeErrorsBy: map[string]float64{}}
	resp, err := scrapeClient.Get(admin + "/metrics")
	if err != nil {
		return c, fmt.Errorf("loadbench: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("loadbench: metrics: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch series := line[:i]; {
		case strings.HasPrefix(series, "llmguard_requests_total{") && strings.Contains(series, `outcome="allowed"`):
			c.allowed += v
		case series == "llmguard_count_cache_hits_total":
			c.cacheHits += v
		case series == "llmguard_count_cache_misses_total":
			c.cacheMisses += v
		case series == "llmguard_reconcile_queue_length":
			c.reconcilePending = v
		case strings.HasPrefix(series, "llmguard_store_errors_total"):
			c.storeErrors += v
			c.storeErrorsBy[label(series, "op")+"/"+label(series, "kind")] += v
		}
	}
	return c, sc.Err()
}

// label is the value of label name in a series `metric{a="x",b="y"}`, or "".
func label(series, name string) string {
	_, rest, ok := strings.Cut(series, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
