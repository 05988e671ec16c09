package dashboards

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// promScrapeInterval is how often the real Prometheus of
// TestRealPrometheus scrapes llmguard and evaluates the rules.
const promScrapeInterval = time.Second

// promVars are the Grafana variables for the real Prometheus, which
// scrapes every second: $__interval is one scrape, and $__rate_interval
// (which Grafana computes as max($__interval + scrape interval, 4 × scrape
// interval) for the dashboard's range) and $__range are taken wide enough
// to cover the whole workload, so that every rate panel evaluated at the
// last phase sees every phase's samples and no ratio divides by a window
// without traffic.
var promVars = func() map[string]string {
	v := maps.Clone(vars)
	v["__interval"], v["__interval_ms"] = "1s", "1000"
	v["__rate_interval"], v["__rate_interval_ms"] = "1m", "60000"
	return v
}()

// promConfig is the Prometheus configuration of TestRealPrometheus: the
// rules file, and llmguard's admin listener (%[2]s) scraped every second.
const promConfig = `
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %[1]q
scrape_configs:
  - job_name: llmguard
    metrics_path: /metrics
    static_configs:
      - targets: [%[2]q]
`

// TestPromtoolCheckRules runs the real `promtool check rules` on the
// alerting rules, as README.md tells operators to.
func TestPromtoolCheckRules(t *testing.T) {
	bin := lookTool(t, "promtool", "PROMTOOL")
	out, err := exec.Command(bin, "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	want := fmt.Sprintf("SUCCESS: %d rules found", len(alertPhases))
	if !strings.Contains(string(out), want) {
		t.Errorf("promtool check rules %s said %q, want %q", rulesFile, out, want)
	}
}

// alertsOnlyValid are the alerts TestRealPrometheus checks for validity
// only (Prometheus evaluates them without error at every phase and they
// hold at none they must not), and why the workload cannot make them
// fire. Every other alert in alertPhases must hold at its phases and go
// pending in Prometheus's own rule evaluation.
var alertsOnlyValid = map[string]string{
	"LLMGuardStoreErrors":          "the error ratio over 5m may or may not pass 5 %: the breaker opens after 2 failed calls and calls it refuses are not store calls",
	"LLMGuardReconcileBacklog":     "needs over 1000 reconciliations queued; the workload's replay queue holds 4",
	"LLMGuardConfigReloadFailed":   "the workload reloads no config file; internal/app's TestFailedReloadOnReadyz shows the gauge it reads going to 0",
	"LLMGuardConnectionsRefused":   "the workload stays under max_connections; internal/app's TestConnectionsPastTheCapAreRefused shows the counter it reads counting a refusal",
	"LLMGuardLedgerRecordsLost":    "the workload's ledger never fails; ledger's TestRedisRetryBounds and TestFullBufferDropsWithoutBlocking show the counters it reads counting losses",
	"LLMGuardAccessLogWriteErrors": "the workload writes no access log; obs's TestAccessLogWriteErrorsCounted shows the counter it reads counting a failed line",
	"LLMGuardUpstreamRateLimited":  "the workload's upstream never answers 429; TestUpstreamAlerts feeds promtool series that do",
}

// TestRealPrometheus runs the dashboards' workload (TestAgainstRunningLlmguard's)
// against llmguard with a real Prometheus server scraping its admin
// listener every second and evaluating alerts.yml, then asks Prometheus,
// through its HTTP API:
//   - every panel's query (Grafana variables substituted with promVars)
//     at the scrape after the last phase: each must return data, not only
//     NaN; every template variable's label_values through the label
//     values API: each must return values;
//   - every alert's expression at the scrape after each phase: it must
//     evaluate, and hold at the phases of alertPhases and at no other
//     (mayHold aside);
//   - the rules: all loaded, evaluated with health "ok", and every alert
//     the workload can trigger (all but alertsOnlyValid) pending or firing
//     at some point (its ALERTS series; `for:` is not waited out).
//
// After each phase the workload waits until Prometheus has a scrape taken
// after it, so each phase is seen whatever the machine's load; the store
// breaker stays open for 10 s so that the scrape after the outage sees it
// open.
func TestRealPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llmguard and Prometheus")
	}
	bin := lookTool(t, "prometheus", "PROMETHEUS")
	rulesPath, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	qs := collectQueries(t, loadDashboards(t), loadRules(t), promVars)
	if t.Failed() {
		t.FailNow()
	}

	var (
		prom   *promServer
		phases []string
		at     = map[string]time.Time{} // the scrape that saw each phase
	)
	r := runWorkload(t, workloadOptions{
		openFor: 10 * time.Second,
		started: func(admin string) {
			prom = startPrometheus(t, bin, fmt.Sprintf(promConfig, rulesPath, admin))
		},
		phaseDone: func(phase string, end time.Time) {
			phases = append(phases, phase)
			at[phase] = prom.scrapedAfter("llmguard", end)
		},
	})
	last := at[phases[len(phases)-1]]

	t.Run("panels return data", func(t *testing.T) {
		var report []string
		for _, q := range qs {
			if q.alert != "" {
				continue
			}
			if q.labelValues != nil {
				vals, err := prom.labelValues(q.labelValues.metric, q.labelValues.label)
				switch {
				case err != nil:
					t.Errorf("%s: %v", q.where, err)
				case len(vals) == 0:
					t.Errorf("%s: label_values(%s, %s) has no values", q.where, q.labelValues.metric, q.labelValues.label)
				default:
					report = append(report, fmt.Sprintf("DATA %s: %v", q.where, vals))
				}
				continue
			}
			v, err := prom.query(q.expr, last)
			switch {
			case err != nil:
				t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			case len(v) == 0:
				t.Errorf("%s: no data:\n%s", q.where, q.expr)
			case allPromNaN(v):
				t.Errorf("%s: only NaN:\n%s", q.where, q.expr)
			default:
				report = append(report, fmt.Sprintf("DATA %s: %s", q.where, describeProm(v)))
			}
		}
		sort.Strings(report)
		t.Logf("evaluated by Prometheus at the scrape after %q:\n%s", phases[len(phases)-1], strings.Join(report, "\n"))
	})

	t.Run("alert expressions hold when they should", func(t *testing.T) {
		holds := alertsHoldWhenTheyShould(t, qs, phases, r.quota, func(expr string, i int) (bool, string, error) {
			v, err := prom.query(expr, at[phases[i]])
			return len(v) > 0, describeProm(v), err
		})
		var report []string
		for _, q := range qs {
			if q.alert == "" {
				continue
			}
			kind := "FIRES"
			if why, ok := alertsOnlyValid[q.alert]; ok {
				kind = "VALID ONLY (" + why + ")"
			} else if want, known := alertPhases[q.alert]; known && len(want) == 0 {
				t.Errorf("%s: the workload never makes it hold, and alertsOnlyValid does not say why", q.where)
			}
			report = append(report, fmt.Sprintf("%s %s holds at: %s", kind, q.alert, strings.Join(holds[q.alert], "; ")))
		}
		t.Logf("alert expressions evaluated by Prometheus after each phase:\n%s", strings.Join(report, "\n"))
	})

	t.Run("rules evaluate and alerts go pending", func(t *testing.T) {
		var alerts []string
		for _, q := range qs {
			if q.alert != "" {
				alerts = append(alerts, q.alert)
			}
		}
		var firable []string
		for _, a := range alerts {
			_, validOnly := alertsOnlyValid[a]
			if len(alertPhases[a]) > 0 && !validOnly && (r.quota || !strings.HasPrefix(a, "LLMGuardBudget")) {
				firable = append(firable, a)
			}
		}
		deadline := time.Now().Add(promPollTimeout)
		for {
			rules, err := prom.rules()
			if err != nil {
				t.Fatal(err)
			}
			problems := ruleProblems(rules, alerts, last)
			seen, err := prom.query(`group by (alertname, alertstate) (last_over_time(ALERTS[1h]))`, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			went := map[string]bool{}
			for _, s := range seen {
				went[s.Metric["alertname"]] = true
			}
			for _, a := range firable {
				if !went[a] {
					problems = append(problems, a+" has never been pending or firing")
				}
			}
			if len(problems) == 0 {
				t.Logf("every rule evaluated with health ok; pending or firing at some point: %s", describeProm(seen))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s:\n%s", promPollTimeout, strings.Join(problems, "\n"))
			}
			time.Sleep(promScrapeInterval / 2)
		}
	})
}

// ruleProblems lists what is wrong with the rules Prometheus reports: an
// alert of the file it did not load, one it loaded that is not in the file,
// and one not evaluated since after or not healthy.
func ruleProblems(rules []promRule, alerts []string, after time.Time) []string {
	var problems []string
	loaded := map[string]bool{}
	for _, r := range rules {
		loaded[r.Name] = true
		switch {
		case !slices.Contains(alerts, r.Name):
			problems = append(problems, fmt.Sprintf("rule %s is loaded but not in %s", r.Name, rulesFile))
		case r.Health != "ok":
			problems = append(problems, fmt.Sprintf("rule %s: health %q, last error %q", r.Name, r.Health, r.LastError))
		case !r.LastEvaluation.After(after):
			problems = append(problems, fmt.Sprintf("rule %s last evaluated at %s, not after the workload", r.Name, r.LastEvaluation))
		}
	}
	for _, a := range alerts {
		if !loaded[a] {
			problems = append(problems, fmt.Sprintf("alert %s of %s is not loaded", a, rulesFile))
		}
	}
	return problems
}
