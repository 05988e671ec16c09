package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// llmguard_build_info names the build's version, commit (marked when the
// tree was dirty), Go release and Functions library, at 1 (trial18: two
// builds in a rolling upgrade both logged version=devel, and /metrics
// said nothing of which ran where).
func TestBuildInfoGauge(t *testing.T) {
	cases := []struct {
		name string
		v    versionInfo
		want string
	}{
		{"release", versionInfo{Version: "v1.4.0", Commit: "3f9c2e", Go: "go1.26.8", Scripts: "llmguard_b6e0fdee40f8"},
			`llmguard_build_info{commit="3f9c2e",go_version="go1.26.8",scripts="llmguard_b6e0fdee40f8",version="v1.4.0"} 1`},
		{"dirty tree", versionInfo{Version: "devel", Commit: "3f9c2e", Modified: true, Go: "go1.26.8", Scripts: "llmguard_b6e0fdee40f8"},
			`llmguard_build_info{commit="3f9c2e+modified",go_version="go1.26.8",scripts="llmguard_b6e0fdee40f8",version="devel"} 1`},
		{"no commit recorded", versionInfo{Version: "devel", Modified: true, Go: "go1.26.8", Scripts: "llmguard_b6e0fdee40f8"},
			`llmguard_build_info{commit="",go_version="go1.26.8",scripts="llmguard_b6e0fdee40f8",version="devel"} 1`},
	}
	for i, c := range cases {
		reg := prometheus.NewRegistry()
		reg.MustRegister(buildInfoGauge(c.v))
		want := "# HELP llmguard_build_info Always 1: the build this llmguard runs, as `llmguard version` prints it (version, VCS commit, Go release, Redis Functions library).\n# TYPE llmguard_build_info gauge\n" + c.want + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmguard_build_info"); err != nil {
			t.Errorf("case %d (%s): %v", i, c.name, err)
		}
	}
	// This binary's own: the library it loads.
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoGauge(buildVersion()))
	if n := testutil.CollectAndCount(reg, "llmguard_build_info"); n != 1 {
		t.Fatalf("buildVersion's gauge: %d series, want 1", n)
	}
}
