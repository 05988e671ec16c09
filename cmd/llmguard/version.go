package main

import (
	"fmt"
	"net/url"
	"runtime/debug"
	"strings"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/lua"
)

// version is the release this binary was built as, set by the linker:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/llmguard
//
// Empty: the module version Go recorded (a `go install …@v1.2.3`), else
// "devel".
var version string

// versionInfo is what `llmguard version` prints and the start-up log names.
type versionInfo struct {
	Version  string // the release, or "devel"
	Commit   string // the VCS revision Go recorded at build, "" when none
	Modified bool   // the work tree had uncommitted changes at build
	Time     string // the revision's commit time (RFC 3339), "" when none
	Go       string // the Go release that built it, e.g. go1.26.8
	// Scripts is the Redis Functions library this build loads and calls
	// (lua.LibraryName, "llmguard_" + 12 hex digits of its text's SHA-256):
	// the one library an operator keeps when deleting old ones after an
	// upgrade (README "Redis work per request").
	Scripts string
}

// buildVersion reads the linker's version and Go's build information
// (runtime/debug.ReadBuildInfo: vcs.revision, vcs.time, vcs.modified).
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Scripts: lua.LibraryName}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if v.Version == "" {
			v.Version = "devel"
		}
		return v
	}
	v.Go = bi.GoVersion
	if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is one line: "llmguard v1.2.3 (commit 0123abcd…, 2026-12-01T…,
// go1.26.8, scripts llmguard_0123456789ab)".
func (v versionInfo) String() string {
	var parts []string
	if v.Commit != "" {
		c := "commit " + v.Commit
		if v.Modified {
			c += " with local changes"
		}
		parts = append(parts, c)
	}
	if v.Time != "" {
		parts = append(parts, v.Time)
	}
	if v.Go != "" {
		parts = append(parts, v.Go)
	}
	if v.Scripts != "" {
		parts = append(parts, "scripts "+v.Scripts)
	}
	if len(parts) == 0 {
		return "llmguard " + v.Version
	}
	return fmt.Sprintf("llmguard %s (%s)", v.Version, strings.Join(parts, ", "))
}

type versionCmd struct{}

// Run prints the version line.
func (versionCmd) Run() error {
	fmt.Println(buildVersion())
	return nil
}

// upstreamsForLog names each upstream as name=flavor:base_url for the
// start-up log. A base URL's user information (a password) is redacted.
func upstreamsForLog(cfg *config.Config) string {
	parts := make([]string, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		parts = append(parts, u.Name+"="+u.Flavor+":"+redactURL(u.BaseURL))
	}
	return strings.Join(parts, " ")
}

// storeForLog names the store backend and where it is, without a
// password: "memory", "redis redis://:xxxxx@10.0.0.5:6379/0",
// "redis_cluster 10.0.0.5:6379,10.0.0.6:6379" (an entry given as a URL
// with its password redacted too).
func storeForLog(s config.Store) string {
	switch {
	case s.RedisURL != "":
		return s.Backend + " " + redactURL(s.RedisURL)
	case len(s.ClusterAddrs) > 0:
		addrs := make([]string, len(s.ClusterAddrs))
		for i, a := range s.ClusterAddrs {
			addrs[i] = a
			if strings.Contains(a, "://") { // redis://user:password@host:port
				addrs[i] = redactURL(a)
			}
		}
		return s.Backend + " " + strings.Join(addrs, ",")
	}
	return s.Backend
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
