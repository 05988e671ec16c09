package deploy

import (
	"bytes"
	"fmt"
	"go/version"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
)

// root is the repository, the Docker build context and compose's project
// directory.
const root = ".."

// Services docker-compose.yml must run.
const (
	svcLlmguard   = "llmguard"
	svcRedis      = "redis"
	svcPrometheus = "prometheus"
	svcGrafana    = "grafana"
)

// compose is the part of the Compose file format
// (https://docs.docker.com/reference/compose-file/) docker-compose.yml
// uses; decoding refuses any other field, so a misspelt key fails.
type compose struct {
	Name     string             `yaml:"name"`
	Services map[string]service `yaml:"services"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       *build            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"` // short syntax: SOURCE:TARGET[:MODE]
	Ports       []string          `yaml:"ports"`   // [HOST_IP:]HOST_PORT:CONTAINER_PORT
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
	Target     string `yaml:"target"`
}

// mount is one bind mount of a service: source in the repository (a path
// relative to root), target in the container.
type mount struct{ source, target string }

// loadYAML decodes the file at root-relative path into out, refusing
// unknown fields.
func loadYAML(t *testing.T, rel string, out any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	if err := d.Decode(out); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

func loadCompose(t *testing.T) *compose {
	t.Helper()
	var c compose
	loadYAML(t, "docker-compose.yml", &c)
	return &c
}

// mounts returns the service's bind mounts (sources starting with ./);
// named volumes are left out.
func (s service) mounts(t *testing.T, name string) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[1] == "" || !path.IsAbs(parts[1]) {
			t.Errorf("docker-compose.yml: service %s: volume %q is not SOURCE:/TARGET[:MODE]", name, v)
			continue
		}
		if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
			t.Errorf("docker-compose.yml: service %s: volume %q: mode %q", name, v, parts[2])
		}
		if strings.HasPrefix(parts[0], "./") {
			out = append(out, mount{source: path.Clean(parts[0]), target: path.Clean(parts[1])})
		}
	}
	return out
}

// resolve maps a path inside the service's container to the repository
// file mounted there (root-relative), or "" when no bind mount covers it.
func resolve(ms []mount, inContainer string) string {
	p := path.Clean(inContainer)
	best, src := -1, ""
	for _, m := range ms {
		if rel, ok := strings.CutPrefix(p, m.target); ok && (rel == "" || rel[0] == '/') && len(m.target) > best {
			best, src = len(m.target), path.Join(m.source, rel)
		}
	}
	return src
}

// flagValue returns the value of --name in args, as "--name value" or
// "--name=value".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// interpolate resolves compose's ${VAR:-default} and ${VAR:?message} to
// their default (empty for the second), as on a machine without the
// variables: enough to read llmguard's environment.
var interpolation = regexp.MustCompile(`\$\{(\w+)(?::?-([^}]*)|:?\?[^}]*)?\}`)

func interpolate(s string) string {
	return interpolation.ReplaceAllString(s, "$2")
}

func exists(t *testing.T, rel string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(root, rel))
	return err == nil
}

// TestCompose checks docker-compose.yml without Docker: it parses; it runs
// redis, llmguard, prometheus and grafana; every image is named or built
// from a target of the Dockerfile; every bind-mounted file exists in the
// repository; every depends_on names a service; no host port is published
// twice.
func TestCompose(t *testing.T) {
	c := loadCompose(t)
	stages := map[string]bool{}
	for _, st := range dockerStages(t, loadDockerfile(t)) {
		stages[st.name] = true
	}
	for _, want := range []string{svcRedis, svcLlmguard, svcPrometheus, svcGrafana} {
		if _, ok := c.Services[want]; !ok {
			t.Errorf("docker-compose.yml: no service %s", want)
		}
	}
	hostPorts := map[string]string{}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("docker-compose.yml: service %s has neither image nor build", name)
		}
		if b := s.Build; b != nil {
			df := path.Join(b.Context, cmpOr(b.Dockerfile, "Dockerfile"))
			if !exists(t, df) {
				t.Errorf("docker-compose.yml: service %s builds from %s, which does not exist", name, df)
			}
			if b.Target == "" || !stages[b.Target] {
				t.Errorf("docker-compose.yml: service %s builds target %q, not a stage of the Dockerfile %v", name, b.Target, stages)
			}
		}
		for _, m := range s.mounts(t, name) {
			if !exists(t, m.source) {
				t.Errorf("docker-compose.yml: service %s mounts %s, which does not exist", name, m.source)
			}
		}
		for dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("docker-compose.yml: service %s depends on %s, which is not a service", name, dep)
			}
		}
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			if len(parts) < 2 {
				t.Errorf("docker-compose.yml: service %s publishes %q without a host port", name, p)
				continue
			}
			host := parts[len(parts)-2]
			if other, dup := hostPorts[host]; dup {
				t.Errorf("docker-compose.yml: host port %s published by %s and %s", host, other, name)
			}
			hostPorts[host] = name
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// composeLlmguard returns the compose llmguard service's config: the file
// mounted where its --config points, loaded and validated as `llmguard
// validate --strict` does (config.Load, then app.CheckConfig with the
// service's environment: no finding, not even a warning, may remain).
func composeLlmguard(t *testing.T, c *compose) (*config.Config, string) {
	t.Helper()
	s := c.Services[svcLlmguard]
	in := flagValue(s.Command, "--config")
	if in == "" {
		t.Fatalf("docker-compose.yml: llmguard's command %q has no --config", s.Command)
	}
	file := resolve(s.mounts(t, svcLlmguard), in)
	if file == "" {
		t.Fatalf("docker-compose.yml: llmguard's --config %s is not in a bind mount", in)
	}
	cfg, err := config.Load(filepath.Join(root, file))
	if err != nil {
		t.Fatalf("%s (llmguard's config in compose): %v", file, err)
	}
	env := map[string]string{}
	for k, v := range s.Environment {
		env[k] = interpolate(v)
	}
	findings, err := app.CheckConfig(cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, f := range findings {
		t.Errorf("%s: %s (fatal %t)", file, f, f.Fatal)
	}
	return cfg, file
}

// TestComposeLlmguardConfig checks llmguard's config in compose: valid
// (composeLlmguard), on a Redis store at the redis service, listening on
// every interface of its container on the ports compose publishes, and its
// admin token's variable set in the service's environment.
func TestComposeLlmguardConfig(t *testing.T) {
	c := loadCompose(t)
	cfg, file := composeLlmguard(t, c)
	if cfg.Store.Backend != "redis" {
		t.Errorf("%s: store.backend %q, want redis (one Redis for every replica)", file, cfg.Store.Backend)
	}
	if u, err := url.Parse(cfg.Store.RedisURL); err != nil || u.Hostname() != svcRedis {
		t.Errorf("%s: store.redis_url %q does not name the %s service (%v)", file, cfg.Store.RedisURL, svcRedis, err)
	}
	s := c.Services[svcLlmguard]
	for _, l := range []struct{ field, addr string }{{"listen", cfg.Listen}, {"admin_listen", cfg.AdminListen}} {
		host, port, err := net.SplitHostPort(l.addr)
		if err != nil || (host != "0.0.0.0" && host != "" && host != "::") {
			t.Errorf("%s: %s %q is not on every interface: unreachable from outside the container", file, l.field, l.addr)
			continue
		}
		if !slices.ContainsFunc(s.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
			t.Errorf("docker-compose.yml: llmguard's %s port %s is not published (%v)", l.field, port, s.Ports)
		}
	}
	// On SIGTERM llmguard waits for what is in flight; compose kills it
	// after stop_grace_period: the longest exchange must fit.
	grace, err := time.ParseDuration(s.StopGracePeriod)
	if err != nil {
		t.Errorf("docker-compose.yml: llmguard's stop_grace_period %q: %v", s.StopGracePeriod, err)
	}
	for i, u := range cfg.Upstreams {
		if d := time.Duration(u.Timeout); d >= grace {
			t.Errorf("%s: upstreams[%d].timeout %s is not below docker-compose.yml's stop_grace_period %s: a stream still running at shutdown would be killed", file, i, d, grace)
		}
	}
	if cfg.AdminTokenEnv == "" {
		t.Errorf("%s: no admin_token_env: /admin/* would answer only loopback clients", file)
	} else if _, ok := s.Environment[cfg.AdminTokenEnv]; !ok {
		t.Errorf("docker-compose.yml: llmguard's environment does not set %s (admin_token_env)", cfg.AdminTokenEnv)
	}
}

// promConfig is the part of prometheus.yml the tests read.
type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// TestComposePrometheus checks the compose Prometheus: its config, mounted
// from the repository, scrapes llmguard's admin listener (the service's
// name and admin_listen's port) on /metrics, and loads
// dashboards/alerts.yml through a mount. With promtool present it also
// runs `promtool check config` on a copy whose rule files point at the
// repository's (where the container would find them); under CI=true
// promtool must be present.
func TestComposePrometheus(t *testing.T) {
	c := loadCompose(t)
	cfg, _ := composeLlmguard(t, c)
	_, adminPort, _ := net.SplitHostPort(cfg.AdminListen)
	s := c.Services[svcPrometheus]
	ms := s.mounts(t, svcPrometheus)
	cfgIn := cmpOr(flagValue(s.Command, "--config.file"), "/etc/prometheus/prometheus.yml")
	file := resolve(ms, cfgIn)
	if file == "" {
		t.Fatalf("docker-compose.yml: Prometheus's --config.file %s is not in a bind mount", cfgIn)
	}
	var pc promConfig
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	want := net.JoinHostPort(svcLlmguard, adminPort)
	scraped := false
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, want) {
				scraped = true
				if p := cmpOr(sc.MetricsPath, "/metrics"); p != "/metrics" {
					t.Errorf("%s: job %s scrapes %s%s, want /metrics", file, sc.JobName, want, p)
				}
			}
		}
	}
	if !scraped {
		t.Errorf("%s: no scrape target %s (llmguard's admin listener)", file, want)
	}
	repoRules := map[string]string{} // in the container → in the repository
	for _, rf := range pc.RuleFiles {
		src := resolve(ms, rf)
		if src == "" || !exists(t, src) {
			t.Errorf("%s: rule file %s is not mounted from a file of the repository", file, rf)
			continue
		}
		repoRules[rf] = src
	}
	if !slices.Contains(mapValues(repoRules), "dashboards/alerts.yml") {
		t.Errorf("%s: does not load dashboards/alerts.yml (%v)", file, repoRules)
	}

	promtool := lookPromtool(t)
	if promtool == "" {
		return
	}
	local := string(b)
	for in, src := range repoRules {
		abs, err := filepath.Abs(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		local = strings.ReplaceAll(local, in, abs)
	}
	tmp := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(tmp, []byte(local), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", tmp).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check config %s (rule files as mounted): %v\n%s", file, err, out)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// lookPromtool finds promtool ($PROMTOOL, else on $PATH). Missing, it
// returns "" (the caller skips that part), and fails t under CI=true.
func lookPromtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool not found (apt-get install prometheus): %v", err)
		}
		t.Logf("promtool not found: promtool check config skipped")
		return ""
	}
	return p
}

// grafanaDatasources and grafanaProviders are the fields of Grafana's
// provisioning files that deploy/grafana uses
// (https://grafana.com/docs/grafana/latest/administration/provisioning/);
// decoding refuses others, so a misspelt key fails.
type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string         `yaml:"name"`
		UID       string         `yaml:"uid"`
		Type      string         `yaml:"type"`
		Access    string         `yaml:"access"`
		URL       string         `yaml:"url"`
		IsDefault bool           `yaml:"isDefault"`
		Editable  bool           `yaml:"editable"`
		JSONData  map[string]any `yaml:"jsonData"`
	} `yaml:"datasources"`
}

type grafanaProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		Folder                string `yaml:"folder"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path string `yaml:"path"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

// TestComposeGrafana checks Grafana's provisioning in compose: mounted at
// /etc/grafana/provisioning from the repository, a default Prometheus
// data source at the prometheus service, and a file provider whose path
// holds, through compose's mounts, each of the three dashboards of
// dashboards/.
func TestComposeGrafana(t *testing.T) {
	c := loadCompose(t)
	s := c.Services[svcGrafana]
	ms := s.mounts(t, svcGrafana)
	prov := resolve(ms, "/etc/grafana/provisioning")
	if prov == "" {
		t.Fatal("docker-compose.yml: nothing mounted at Grafana's /etc/grafana/provisioning")
	}
	promPort := "9090"
	if a := flagValue(c.Services[svcPrometheus].Command, "--web.listen-address"); a != "" {
		_, promPort, _ = net.SplitHostPort(a)
	}
	dsFiles, _ := filepath.Glob(filepath.Join(root, prov, "datasources", "*.y*ml"))
	found := false
	for _, f := range dsFiles {
		var ds grafanaDatasources
		loadYAML(t, mustRel(t, f), &ds)
		for _, d := range ds.Datasources {
			if d.Type == "prometheus" && d.IsDefault && d.URL == "http://"+net.JoinHostPort(svcPrometheus, promPort) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("%s/datasources: no default prometheus data source at http://%s:%s (%v)", prov, svcPrometheus, promPort, dsFiles)
	}
	dashboards, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if len(dashboards) != 3 {
		t.Errorf("dashboards/*.json: %d files, want the 3 dashboards", len(dashboards))
	}
	provFiles, _ := filepath.Glob(filepath.Join(root, prov, "dashboards", "*.y*ml"))
	var paths []string
	for _, f := range provFiles {
		var p grafanaProviders
		loadYAML(t, mustRel(t, f), &p)
		for _, pr := range p.Providers {
			if pr.Type == "file" {
				paths = append(paths, pr.Options.Path)
			}
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s/dashboards: no file provider", prov)
	}
	for _, d := range dashboards {
		rel := mustRel(t, d)
		ok := slices.ContainsFunc(paths, func(p string) bool {
			return resolve(ms, path.Join(p, filepath.Base(d))) == rel
		})
		if !ok {
			t.Errorf("Grafana does not get %s: not mounted into a provider's path %v", rel, paths)
		}
	}
}

// mustRel returns f relative to root, with forward slashes.
func mustRel(t *testing.T, f string) string {
	t.Helper()
	r, err := filepath.Rel(root, f)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

// stage is one FROM … of the Dockerfile and its instructions.
type stage struct {
	name, base string
	ins        []instruction
}

func loadDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ins, err := parseDockerfile(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// dockerStages groups the instructions by stage; global ARGs come before
// the first FROM and belong to none.
func dockerStages(t *testing.T, ins []instruction) []stage {
	t.Helper()
	var out []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			st := stage{base: in.args[0]}
			if len(in.args) == 3 && strings.EqualFold(in.args[1], "AS") {
				st.name = in.args[2]
			} else if len(in.args) != 1 {
				t.Errorf("Dockerfile line %d: FROM %s", in.line, in.raw)
			}
			out = append(out, st)
			continue
		}
		if len(out) == 0 {
			if in.cmd != "ARG" {
				t.Errorf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
			}
			continue
		}
		out[len(out)-1].ins = append(out[len(out)-1].ins, in)
	}
	return out
}

// knownInstructions are the Dockerfile reference's instructions.
var knownInstructions = []string{"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL", "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}

// TestDockerfile checks the Dockerfile without Docker: it parses, names
// only known instructions, and
//   - the Go image's version (ARG GO_VERSION) is at least go.mod's;
//   - the binaries are built with CGO_ENABLED=0 (static);
//   - the last stage, the image `docker build` makes, is llmguard, on
//     distroless static or scratch;
//   - every stage but the build runs as a non-root USER, in exec-form
//     ENTRYPOINT, of a binary it copied in;
//   - every COPY from the build context names files that exist and that
//     .dockerignore does not leave out; every COPY --from names an
//     earlier stage.
func TestDockerfile(t *testing.T) {
	ins := loadDockerfile(t)
	for _, in := range ins {
		if !slices.Contains(knownInstructions, in.cmd) {
			t.Errorf("Dockerfile line %d: unknown instruction %s", in.line, in.cmd)
		}
	}
	stages := dockerStages(t, ins)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and the image", len(stages))
	}

	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	goVersion := ""
	for _, in := range ins {
		if in.cmd == "ARG" {
			if v, ok := strings.CutPrefix(in.args[0], "GO_VERSION="); ok {
				goVersion = v
			}
		}
	}
	if goVersion == "" || version.Compare("go"+goVersion, "go"+string(m[1])) < 0 {
		t.Errorf("Dockerfile: ARG GO_VERSION=%q, want at least go.mod's %s", goVersion, m[1])
	}

	ignore := dockerignore(t)
	seen := map[string]bool{}
	static := false
	for i, st := range stages {
		final := i == len(stages)-1
		var user string
		var entry []string
		cgoOff := false
		copied := map[string]bool{}
		for _, in := range st.ins {
			switch in.cmd {
			case "ENV":
				if strings.Contains(in.raw, "CGO_ENABLED=0") {
					cgoOff = true
				}
			case "RUN":
				// Each command of the RUN that builds must build static.
				for _, cmd := range shellSeparators.Split(in.raw, -1) {
					if !strings.Contains(cmd, "go build") {
						continue
					}
					if !cgoOff && !strings.Contains(cmd, "CGO_ENABLED=0") {
						t.Errorf("Dockerfile line %d: %q builds without CGO_ENABLED=0: not a static binary", in.line, strings.TrimSpace(cmd))
					} else if strings.Contains(cmd, "./cmd/llmguard") {
						static = true
					}
				}
			case "USER":
				user = strings.Split(in.args[0], ":")[0]
			case "ENTRYPOINT":
				if !in.json {
					t.Errorf("Dockerfile line %d: ENTRYPOINT in shell form: signals would go to a shell, not the process", in.line)
				}
				entry = in.args
			case "COPY", "ADD":
				if len(in.args) < 2 {
					t.Errorf("Dockerfile line %d: %s needs a source and a destination", in.line, in.cmd)
					continue
				}
				srcs, dst := in.args[:len(in.args)-1], in.args[len(in.args)-1]
				if from, ok := in.flag("from"); ok {
					if !seen[from] {
						t.Errorf("Dockerfile line %d: COPY --from=%s: no earlier stage of that name", in.line, from)
					}
					for _, s := range srcs {
						copied[path.Join(dst, path.Base(s))] = true
						copied[dst] = true
					}
					continue
				}
				for _, s := range srcs {
					if s == "." {
						continue
					}
					if !exists(t, s) {
						t.Errorf("Dockerfile line %d: COPY %s: no such file in the build context", in.line, s)
					}
					if pat := ignoredBy(ignore, s); pat != "" {
						t.Errorf("Dockerfile line %d: COPY %s: left out of the build context by .dockerignore's %q", in.line, s, pat)
					}
				}
			}
		}
		seen[st.name] = true
		if final {
			if st.name != "llmguard" {
				t.Errorf("Dockerfile: the last stage (the default image) is %q, want llmguard", st.name)
			}
			if !strings.HasPrefix(st.base, "gcr.io/distroless/static") && st.base != "scratch" {
				t.Errorf("Dockerfile: the image is based on %s, want distroless static or scratch", st.base)
			}
		}
		if strings.HasPrefix(st.base, "golang:") {
			continue // the build stage
		}
		if user == "" || user == "root" || user == "0" {
			t.Errorf("Dockerfile: stage %s runs as %q, want a non-root USER", st.name, user)
		}
		if len(entry) == 0 || !copied[entry[0]] {
			t.Errorf("Dockerfile: stage %s's ENTRYPOINT %v is not a binary it copied in (%v)", st.name, entry, copied)
		}
	}
	if !static {
		t.Error("Dockerfile: no RUN builds ./cmd/llmguard with CGO_ENABLED=0")
	}
}

// shellSeparators split a shell-form RUN into its commands.
var shellSeparators = regexp.MustCompile(`&&|;|\|\|`)

// dockerignore returns .dockerignore's patterns.
func dockerignore(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && l[0] != '#' {
			out = append(out, l)
		}
	}
	return out
}

// ignoredBy returns the .dockerignore pattern that leaves rel (or a
// directory above it) out of the build context, or "". Patterns follow
// Go's filepath.Match, relative to the context's root (a leading / is
// dropped), as Docker reads them; exceptions (!) are not used here and
// are refused.
func ignoredBy(patterns []string, rel string) string {
	rel = path.Clean(rel)
	for _, p := range patterns {
		if strings.HasPrefix(p, "!") {
			return p + " (exceptions are not read by this test)"
		}
		pat := strings.TrimPrefix(path.Clean(p), "/")
		for q := rel; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(pat, q); ok {
				return p
			}
		}
	}
	return ""
}

// TestDockerBuild builds the image's two targets when a Docker engine
// answers `docker info`; this machine may have only the client, and then
// the test skips (the checks above stand in).
func TestDockerBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker client")
	}
	if out, err := exec.Command(docker, "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine (docker info: %v): build not tried\n%.300s", err, out)
	}
	for _, target := range []string{"mockllm", "llmguard"} {
		tag := fmt.Sprintf("llmguard-test-%s:%d", target, os.Getpid())
		out, err := exec.Command(docker, "build", "--target", target, "-t", tag, root).CombinedOutput()
		if err != nil {
			t.Fatalf("docker build --target %s: %v\n%s", target, err, out)
		}
		t.Cleanup(func() { exec.Command(docker, "rmi", "-f", tag).Run() })
	}
}
