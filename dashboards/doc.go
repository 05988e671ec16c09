// Package dashboards holds llmguard's Grafana dashboards (overview.json,
// tenants-budgets.json, limiter-internals.json) and Prometheus alerting
// rules (alerts.yml) over the metrics of DESIGN.md §9. It has no Go API:
// its tests parse every query, check that each metric and label a query
// names is one a running llmguard exports, and evaluate the queries with
// the Prometheus engine on what a small workload through llmguard produced;
// with Debian's prometheus package, it also runs promtool on the rules and a
// real Prometheus server scraping llmguard through that workload.
// README.md says how to import them.
package dashboards
