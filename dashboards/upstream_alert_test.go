package dashboards

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promtoolTest runs `promtool test rules` on tests, a rule test file's
// tests: section, against alerts.yml with 15 s evaluations.
func promtoolTest(t *testing.T, tests string) {
	t.Helper()
	bin := lookTool(t, "promtool", "PROMTOOL")
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rules_test.yml")
	body := "rule_files: [" + rules + "]\nevaluation_interval: 15s\ntests:\n" + tests
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "test", "rules", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// An upstream that fails or rate-limits llmguard's calls alerts, each
// kind on its own (trial18: an upstream answering 502 to every call for
// minutes raised no alert and wrote no log line). Ten calls every 15 s;
// "failing" fails 2 of them (unreachable and 503), "limited" is refused 1
// with 429 (10 %), "healthy" 0 of 10 and "blip" 1 in 1000: none for them.
func TestUpstreamAlerts(t *testing.T) {
	promtoolTest(t, `  - interval: 15s
    input_series:
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="failing",status="200"}'
        values: '0+8x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="failing",status="0"}'
        values: '0+1x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="failing",status="503"}'
        values: '0+1x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="limited",status="200"}'
        values: '0+9x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="limited",status="429"}'
        values: '0+1x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="healthy",status="200"}'
        values: '0+10x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="blip",status="200"}'
        values: '0+1000x40'
      - series: 'llmguard_upstream_responses_total{instance="a",upstream="blip",status="500"}'
        values: '0+1x40'
    alert_rule_test:
      - eval_time: 4m
        alertname: LLMGuardUpstreamErrors
      - eval_time: 8m
        alertname: LLMGuardUpstreamErrors
        exp_alerts:
          - exp_labels: {instance: a, upstream: failing, severity: warning}
            exp_annotations:
              summary: "llmguard a: 20% of calls to upstream failing fail"
              description: "For five minutes over 5 % of the calls a forwarded to upstream failing were answered 5xx or not answered (status 0: unreachable). The provider (or the gateway in front of it) is failing, not llmguard: callers get its error (502 upstream_unreachable when it cannot be reached) and their reservations come back (but for 408, 504 and 524, which keep them). See llmguard_upstream_responses_total by status, the Overview dashboard's upstream panels, the provider's status page, and the upstream's base_url in the config."
      - eval_time: 8m
        alertname: LLMGuardUpstreamRateLimited
        exp_alerts:
          - exp_labels: {instance: a, upstream: limited, severity: warning}
            exp_annotations:
              summary: "llmguard a: upstream limited answers 10% of calls 429"
              description: "For five minutes over 5 % of the calls llmguard admitted on a were refused 429 by upstream limited itself: the provider's own rate or spend limit for the organisation's key is below what llmguard's limits admit. Callers get the provider's 429 and Retry-After (counted as allowed in llmguard_requests_total). Lower a global limit to the provider's (its x-ratelimit-limit-* headers or console), or raise the provider's limit."
`)
}

// A quota that denies requests is exhausted though its settled spend is
// short of 100 % (a denied reservation is never spent): the exhausted
// alert fires on llmguard_quota_exhausted, and the 80 % warning gives way
// to it (trial18: a tenant answered 429 at 99.2 % of its daily tokens got
// LLMGuardBudget80 alone). A quota at 85 % that has denied nothing keeps
// the warning.
func TestBudgetExhaustedBelowFullSpend(t *testing.T) {
	promtoolTest(t, `  - interval: 15s
    input_series:
      - series: 'llmguard_quota_used{instance="a",limit="daily",tenant="globex"}'
        values: '2976x20'
      - series: 'llmguard_quota_limit{instance="a",limit="daily",tenant="globex"}'
        values: '3000x20'
      - series: 'llmguard_quota_exhausted{instance="a",limit="daily",tenant="globex"}'
        values: '1x20'
      - series: 'llmguard_quota_used{instance="b",limit="daily",tenant="globex"}'
        values: '2900x20'
      - series: 'llmguard_quota_limit{instance="b",limit="daily",tenant="globex"}'
        values: '3000x20'
      - series: 'llmguard_quota_exhausted{instance="b",limit="daily",tenant="globex"}'
        values: '0x20'
      - series: 'llmguard_quota_used{instance="a",limit="daily",tenant="acme"}'
        values: '2550x20'
      - series: 'llmguard_quota_limit{instance="a",limit="daily",tenant="acme"}'
        values: '3000x20'
      - series: 'llmguard_quota_exhausted{instance="a",limit="daily",tenant="acme"}'
        values: '0x20'
    alert_rule_test:
      - eval_time: 2m
        alertname: LLMGuardBudgetExhausted
        exp_alerts:
          - exp_labels: {limit: daily, tenant: globex, severity: critical}
            exp_annotations:
              summary: "Tenant globex's quota daily is exhausted (99.2% spent): its requests get 429"
              description: "Quota daily of tenant globex is exhausted (99.2% spent; a user- or key-scoped quota: by its most used user or key; below 100 % when it denied a request it could not pay, as its budget webhook's \"exhausted\": true says): requests it covers are answered 429 until the period resets. Raise the quota in the config (reloaded live) or wait for the reset."
      - eval_time: 5m
        alertname: LLMGuardBudget80
        exp_alerts:
          - exp_labels: {limit: daily, tenant: acme, severity: warning}
            exp_annotations:
              summary: "Tenant acme has used 85% of quota daily"
              description: "Quota daily of tenant acme is over 80 % spent (85%) in the current period (a user- or key-scoped quota: by its most used user or key; `+"`llmguard usage --tenant`"+` lists each). At 100 % its requests are answered 429 until the period resets; see the \"Days left in budget\" panel of the llmguard / Tenants and budgets dashboard."
`)
}

// LLMGuardFailClosedDecisions pages for a store outage, not for a lone
// take past store.timeout: 3 fail-closed 503s among 100 requests a 15 s
// step hold nothing, 60 of 100 fire (trial18: three isolated timeouts in
// four minutes on a loaded node fired this critical alert).
func TestFailClosedAlertIgnoresIsolatedTimeouts(t *testing.T) {
	promtoolTest(t, `  - interval: 15s
    input_series:
      - series: 'llmguard_requests_total{instance="busy",outcome="allowed"}'
        values: '0+100x30'
      - series: 'llmguard_store_failure_decisions_total{instance="busy",limit="global-rpm",decision="fail_closed"}'
        values: '0 0 0 0 1 1 1 1 1 1 2 2 2 2 2 2 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3'
      - series: 'llmguard_requests_total{instance="down",outcome="allowed"}'
        values: '0+40x30'
      - series: 'llmguard_requests_total{instance="down",outcome="fail_closed"}'
        values: '0+60x30'
      - series: 'llmguard_store_failure_decisions_total{instance="down",limit="global-rpm",decision="fail_closed"}'
        values: '0+60x30'
    alert_rule_test:
      - eval_time: 5m
        alertname: LLMGuardFailClosedDecisions
        exp_alerts:
          - exp_labels: {instance: down, limit: global-rpm, severity: critical}
            exp_annotations:
              summary: "llmguard down: limit global-rpm is refusing requests (503) while the store is unavailable"
              description: "Requests covered by the fail-closed limit global-rpm are answered 503 on down (over 1 % of its requests) because the store cannot be reached (see the breaker and store errors on the llmguard / Limiter internals dashboard)."
`)
}
