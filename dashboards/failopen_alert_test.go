package dashboards

import "testing"

// LLMGuardFailOpenDecisions warns of a store down for five minutes, not of
// one that was down for half a minute five minutes ago. Ten minutes at a
// 15 s step: "blip" serves fail-open at three scrapes in a row (a 30 s
// outage) and never again; "isolated" at one scrape every two minutes (a
// take past store.timeout on a busy Redis now and then); "down" at every
// scrape. Only "down" may fire. With the old [5m] window a decision held
// the expression five minutes, so "blip" fired at 5m45s and "isolated"
// from 5m15s on (trial19: a 16 s outage of two nodes' Redis fired it five
// minutes later, under a real Prometheus).
func TestFailOpenAlertNeedsALastingOutage(t *testing.T) {
	promtoolTest(t, `  - interval: 15s
    input_series:
      - series: 'llmguard_store_failure_decisions_total{instance="blip",limit="user-tpm",decision="fail_open"}'
        values: '0 0 5 10 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15'
      - series: 'llmguard_store_failure_decisions_total{instance="isolated",limit="user-tpm",decision="fail_open"}'
        values: '0 0 0 0 0 0 0 0 1 1 1 1 1 1 1 1 2 2 2 2 2 2 2 2 3 3 3 3 3 3 3 3 4 4 4 4 4 4 4 4 5'
      - series: 'llmguard_store_failure_decisions_total{instance="down",limit="user-tpm",decision="fail_open"}'
        values: '0+20x40'
    alert_rule_test:
      - eval_time: 4m
        alertname: LLMGuardFailOpenDecisions
      - eval_time: 5m45s
        alertname: LLMGuardFailOpenDecisions
        exp_alerts:
          - exp_labels: {instance: down, limit: user-tpm, severity: warning}
            exp_annotations:
              summary: "llmguard down: limit user-tpm is enforced per node (store unavailable)"
              description: "For five minutes down has admitted requests of limit user-tpm against its per-node fallback bucket: the cluster as a whole may admit up to llmguard_fallback_over_admission_factor times the limit."
      - eval_time: 9m
        alertname: LLMGuardFailOpenDecisions
        exp_alerts:
          - exp_labels: {instance: down, limit: user-tpm, severity: warning}
            exp_annotations:
              summary: "llmguard down: limit user-tpm is enforced per node (store unavailable)"
              description: "For five minutes down has admitted requests of limit user-tpm against its per-node fallback bucket: the cluster as a whole may admit up to llmguard_fallback_over_admission_factor times the limit."
`)
}
