package loadbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Markdown writes the report: how it ran, one table with a row per cell and
// target, and notes on anything that went wrong.
func (r *Report) Markdown(w io.Writer) {
	o := r.Options
	withRedis := slices.Contains(o.Targets, TargetRedis)
	fmt.Fprintf(w, "llmguard-bench — %s; %s, took %s", machine(), r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Took.Round(time.Second))
	if r.LoadBefore != "" {
		fmt.Fprintf(w, "; load average %s before, %s after (the benchmark's own processes included)", r.LoadBefore, r.LoadAfter)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintf(w, "Each run: at most %d requests or %s, whichever comes first; POST /v1/chat/completions (%s, max_tokens %d: 16-token answers), one key, 3 rules (user tokens, tenant USD, global requests).\n",
		o.Requests, o.Duration, benchModel, maxTokens)
	mockNote := "reports len(body)/4 input tokens (no tokenizing)"
	if o.TokenizeMock {
		mockNote = "counts input with llmguard's weigher"
	}
	procs := "load generator (this one), mock upstream (" + mockNote + ")"
	for _, t := range o.Targets {
		switch t {
		case TargetBare:
			procs += ", bare proxy"
		case TargetMemory:
			procs += ", llmguard (memory store)"
		case TargetRedis:
			procs += ", llmguard (Redis store) + redis-server"
		}
	}
	fmt.Fprintf(w, "Processes: %s; all on 127.0.0.1, sharing the CPUs.\n\n", procs)

	head := []string{"cell", "target", "n", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "+p50 ms", "+p99 ms", "CPU µs/req", "sys µs/req"}
	if withRedis {
		head = append(head, "redis µs/req")
	}
	head = append(head, "CPU × bare", "+p99 vs bare ms", "req/s × bare", "cache hits")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	find := func(cell Cell, target string) *Row {
		for i := range r.Rows {
			if r.Rows[i].Cell == cell && r.Rows[i].Target == target {
				return &r.Rows[i]
			}
		}
		return nil
	}
	for _, row := range r.Rows {
		direct, bare := find(row.Cell, TargetDirect), find(row.Cell, TargetBare)
		cells := []string{row.Cell.String(), row.Target, fmt.Sprint(row.N), fmt.Sprintf("%.0f", row.RPS), ms(row.P50), ms(row.P99), ms(row.P999)}
		if direct != nil && row.Target != TargetDirect {
			cells = append(cells, msDiff(row.P50-direct.P50), msDiff(row.P99-direct.P99))
		} else {
			cells = append(cells, "—", "—")
		}
		cells = append(cells, micros(row.ProxyCPU), micros(row.ProxySys))
		if withRedis {
			cells = append(cells, micros(row.StoreCPU))
		}
		if bare != nil && row.Target != TargetBare && row.Target != TargetDirect {
			cells = append(cells, ratio(row.ProxyCPU, bare.ProxyCPU), msDiff(row.P99-bare.P99), ratio(row.RPS, bare.RPS))
		} else {
			cells = append(cells, "—", "—", "—")
		}
		if row.CacheHit >= 0 {
			cells = append(cells, fmt.Sprintf("%.0f%%", 100*row.CacheHit))
		} else {
			cells = append(cells, "—")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "cell: body size (bodies run from ¾ to 1¼ of it), cold (all text new) or warm (a growing conversation resent), json or sse, concurrency.")
	fmt.Fprintln(w, "Latency: send to last byte, nearest rank (p99.9 is the maximum below 1000 requests). +p50/+p99: minus the direct run of the same cell.")
	cpuNote := "CPU µs/req: the proxy process's own user+system time (getrusage) over the run, per request; sys: the system part of it (/proc, 10 ms ticks)"
	if withRedis {
		cpuNote += "; redis: redis-server's (/proc, 10 ms ticks)"
	}
	fmt.Fprintln(w, cpuNote+".")
	fmt.Fprintln(w, "cache hits: the share of llmguard's count-cache lookups over the run that found the element's count (llmguard_count_cache_hits_total and _misses_total).")
	var client, mock []float64
	for _, row := range r.Rows {
		client, mock = append(client, row.ClientCPU), append(mock, row.MockCPU)
	}
	fmt.Fprintf(w, "The load generator (fasthttp client, bodies built between requests from a pre-escaped text pool, buffers reused) spent %s µs/req (median, max %s), the mock %s µs/req: on a small machine they take CPU the proxy would otherwise have, which shows in the latencies and req/s at high concurrency, not in CPU µs/req.\n",
		micros(median(client)), micros(slices.Max(append(client, 0))), micros(median(mock)))
	for _, row := range r.Rows {
		if row.Errors > 0 {
			fmt.Fprintf(w, "- %s %s: %d requests failed; first: %s\n", row.Cell, row.Target, row.Errors, row.FirstError)
		}
		if row.Allowed >= 0 && int(row.Allowed) != row.N+row.Errors {
			fmt.Fprintf(w, "- %s %s: llmguard counted %.0f allowed requests of %d sent\n", row.Cell, row.Target, row.Allowed, row.N+row.Errors)
		}
		if row.StoreErrors > 0 {
			var kinds []string
			for k, v := range row.StoreErrorsBy {
				kinds = append(kinds, fmt.Sprintf("%s %.0f", k, v))
			}
			slices.Sort(kinds)
			fmt.Fprintf(w, "- %s %s: %.0f store calls failed (%s); a take that fails, or finds the breaker open, is admitted fail-open by the node's fallback bucket\n",
				row.Cell, row.Target, row.StoreErrors, strings.Join(kinds, ", "))
		}
	}
}

// ms formats a duration in milliseconds with 2 significant decimals below
// 10 ms.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10 && v > -10:
		return fmt.Sprintf("%.2f", v)
	case v < 100 && v > -100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// msDiff is ms with a sign.
func msDiff(d time.Duration) string {
	if d >= 0 {
		return "+" + ms(d)
	}
	return ms(d)
}

// micros formats a CPU figure, "—" when not measured.
func micros(v float64) string {
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}

// ratio is a/b to two decimals, "—" when either is not measured.
func ratio(a, b float64) string {
	if a < 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return x < 0 })
	if len(v) == 0 {
		return -1
	}
	slices.Sort(v)
	return v[len(v)/2]
}
