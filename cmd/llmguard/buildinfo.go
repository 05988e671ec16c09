package main

import "github.com/prometheus/client_golang/prometheus"

// buildInfoGauge is llmguard_build_info{version,commit,go_version,scripts}:
// one series at 1 naming v, what `llmguard version` prints (commit "" when
// Go recorded none; "+modified" after it for a dirty tree), so that
// Prometheus shows which build each node runs through a rolling upgrade
// (`count by (version, commit) (llmguard_build_info)`), the convention of
// Prometheus's own <name>_build_info. Register it on the app's registry.
func buildInfoGauge(v versionInfo) prometheus.Collector {
	commit := v.Commit
	if commit != "" && v.Modified {
		commit += "+modified"
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "llmguard_build_info",
		Help: "Always 1: the build this llmguard runs, as `llmguard version` prints it (version, VCS commit, Go release, Redis Functions library).",
	}, []string{"version", "commit", "go_version", "scripts"})
	g.WithLabelValues(v.Version, commit, v.Go, v.Scripts).Set(1)
	return g
}
