package dashboards

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LLMGuardStoreBreakerOpen fires through an outage whose breaker the
// scrapes read open (2) and at times half-open (1): gobreaker's state goes
// open -> half-open every open_for until a probe fails again, and
// llmguard_breaker_state reads it when scraped, so a quiet node (probed once
// every half open_for) reads 1 at one scrape in several (trial4: 1 at 25-30 s
// into an outage of an idle node). With `== 2` such a scrape reset the
// alert's `for: 1m` and the alert did not fire (this test fails so). A
// closed breaker (0) between outages still resets it. Each master's
// breaker is its own series (redis21): the alert names the master that
// fails, not the healthy one beside it.
func TestBreakerAlertFiresThroughHalfOpen(t *testing.T) {
	bin := lookTool(t, "promtool", "PROMTOOL")
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	test := `rule_files: [` + rules + `]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
      - series: 'llmguard_breaker_state{instance="flapping",master="10.0.0.1:6379"}'
        values: '0 2 1 2 2 1 2 2 1 2 2'
      - series: 'llmguard_breaker_state{instance="flapping",master="10.0.0.2:6379"}'
        values: '0 0 0 0 0 0 0 0 0 0 0'
      - series: 'llmguard_breaker_state{instance="recovered",master="10.0.0.1:6379"}'
        values: '0 2 2 2 0 2 2 2 0 0 0'
    alert_rule_test:
      - eval_time: 2m30s
        alertname: LLMGuardStoreBreakerOpen
        exp_alerts:
          - exp_labels: {instance: flapping, master: "10.0.0.1:6379", severity: critical}
            exp_annotations:
              summary: "llmguard flapping: store circuit breaker of Redis 10.0.0.1:6379 not closed for over a minute"
              description: "The shared store (Redis 10.0.0.1:6379) has been failing on flapping for over a minute. Requests with a bucket on it: fail-open limits are enforced per node (limit / store.nodes, see llmguard_fallback_over_admission_factor) and fail-closed limits answer 503; in a Redis Cluster the other masters' keys are served as usual. Check Redis and the llmguard / Limiter internals dashboard."
`
	file := filepath.Join(t.TempDir(), "breaker_test.yml")
	if err := os.WriteFile(file, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "test", "rules", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
