package dashboards

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// promStartTimeout bounds how long Prometheus may take to answer /-/ready,
// and promPollTimeout how long the tests wait for something Prometheus
// does on its own schedule (a scrape, a rule evaluation). Both are
// failure timeouts for a loaded machine, not timing assertions.
const (
	promStartTimeout = 60 * time.Second
	promPollTimeout  = 60 * time.Second
)

// maxAPIBody bounds what the tests read of one Prometheus API answer.
const maxAPIBody = 16 << 20

// lookTool finds one of Prometheus's binaries: the path in the environment
// variable env (PROMETHEUS, PROMTOOL) when set, else name on $PATH
// (Debian's prometheus package installs /usr/bin/prometheus and
// /usr/bin/promtool). It skips t when the binary is missing, and fails t
// instead when CI=true: CI must run the real-Prometheus tests (.ci/run
// installs the package).
func lookTool(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found (apt-get install prometheus, or set $%s): %v", name, env, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// promServer is one Prometheus process owned by a test, with its own
// config file and TSDB directory under t.TempDir().
type promServer struct {
	t      *testing.T
	url    string // "http://127.0.0.1:port"
	log    string // the process's output
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	http   *http.Client
}

// startPrometheus starts bin with config (a prometheus.yml) on a free
// loopback port, waits until it answers /-/ready, and has t.Cleanup stop
// it: SIGTERM and a wait when the test passed, SIGKILL at once when it
// failed (its log is then printed). A port taken between choosing and
// binding it is retried.
func startPrometheus(t *testing.T, bin, config string) *promServer {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := range 3 {
		p, err := launchPrometheus(t, bin, cfgPath, filepath.Join(dir, "data"), filepath.Join(dir, fmt.Sprintf("prometheus-%d.log", attempt)))
		if err == nil {
			return p
		}
		lastErr = err
	}
	t.Fatalf("prometheus did not start: %v", lastErr)
	return nil
}

func launchPrometheus(t *testing.T, bin, cfgPath, dataDir, logPath string) (*promServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+dataDir,
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &promServer{t: t, url: "http://" + addr, log: logPath, cmd: cmd, exited: make(chan struct{}),
		http: &http.Client{Timeout: 10 * time.Second}}
	go func() {
		cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	deadline := time.Now().Add(promStartTimeout)
	for {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("exited before it was ready (%s): %s", cmd.ProcessState, p.logTail())
		default:
		}
		resp, err := p.http.Get(p.url + "/-/ready")
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxAPIBody))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("not ready after %s: %s", promStartTimeout, p.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		if t.Failed() {
			p.kill()
			t.Logf("prometheus log (%s):\n%s", p.log, p.logTail())
			return
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("prometheus did not stop within 30 s of SIGTERM: killed")
			p.kill()
		}
	})
	return p, nil
}

// kill stops the process with SIGKILL and waits for it.
func (p *promServer) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// logTail returns the last 4 KiB of the process's output.
func (p *promServer) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// apiResponse is the envelope of every /api/v1 answer
// (https://prometheus.io/docs/prometheus/2.42/querying/api/#format-overview).
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
}

// get calls the API at path with params and decodes its data into out.
// Errors: the call failed, or Prometheus answered an error (its type and
// message).
func (p *promServer) get(path string, params url.Values, out any) error {
	resp, err := p.http.Get(p.url + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: HTTP %d, not the API's JSON: %.200q", path, resp.StatusCode, b)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Data, out)
}

// promSample is one series of an instant query's result.
type promSample struct {
	Metric map[string]string
	V      float64
}

// query evaluates expr with /api/v1/query at instant at (now when zero).
// A scalar result is returned as one sample without labels. Errors: those
// of get, and a result that is neither a vector nor a scalar.
func (p *promServer) query(expr string, at time.Time) ([]promSample, error) {
	params := url.Values{"query": {expr}}
	if !at.IsZero() {
		params.Set("time", formatPromTime(at))
	}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", params, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]promSample, 0, len(vec))
		for _, s := range vec {
			v, err := promValue(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, promSample{Metric: s.Metric, V: v})
		}
		return out, nil
	case "scalar":
		var pair [2]any
		if err := json.Unmarshal(data.Result, &pair); err != nil {
			return nil, err
		}
		v, err := promValue(pair)
		return []promSample{{V: v}}, err
	}
	return nil, fmt.Errorf("query %q: result type %q", expr, data.ResultType)
}

// promValue reads the [timestamp, "value"] pair of the API's results.
func promValue(pair [2]any) (float64, error) {
	s, ok := pair[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", pair[1])
	}
	return strconv.ParseFloat(s, 64) // also reads "NaN", "+Inf", "-Inf"
}

// formatPromTime writes t as the API's Unix seconds with milliseconds.
func formatPromTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// labelValues returns the values of label on the series of metric, as
// Grafana's label_values(metric, label) asks for them
// (/api/v1/label/<label>/values?match[]=metric).
func (p *promServer) labelValues(metric, label string) ([]string, error) {
	var vals []string
	err := p.get("/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": {metric}}, &vals)
	return vals, err
}

// scrapedAfter waits until Prometheus holds a successful scrape of job
// taken after end (so it saw everything done before end) and returns that
// scrape's timestamp. It fails the test after promPollTimeout.
func (p *promServer) scrapedAfter(job string, end time.Time) time.Time {
	p.t.Helper()
	sel := fmt.Sprintf(`up{job=%q}`, job)
	deadline := time.Now().Add(promPollTimeout)
	for {
		// timestamp() of a selector is its sample's scrape time (of any
		// other expression, the evaluation time); both at one instant.
		now := time.Now()
		ts, err := p.query("timestamp("+sel+")", now)
		if err != nil {
			p.t.Fatalf("waiting for a scrape: %v", err)
		}
		up, err := p.query(sel, now)
		if err != nil {
			p.t.Fatalf("waiting for a scrape: %v", err)
		}
		if len(ts) == 1 && len(up) == 1 && up[0].V == 1 && !math.IsNaN(ts[0].V) {
			at := time.UnixMilli(int64(math.Round(ts[0].V * 1000)))
			if at.After(end) {
				return at
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("prometheus scraped %s successfully after %s not within %s (up: %s)\n%s", job, end.Format(time.RFC3339Nano), promPollTimeout, describeProm(up), p.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promRule is one rule of /api/v1/rules.
type promRule struct {
	Name           string    `json:"name"`
	Type           string    `json:"type"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	State          string    `json:"state"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// rules returns every rule Prometheus loaded, with its health.
func (p *promServer) rules() ([]promRule, error) {
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// describeProm summarises a result for the report.
func describeProm(v []promSample) string {
	if len(v) == 0 {
		return "no data"
	}
	var parts []string
	for i, s := range v {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("… %d series", len(v)))
			break
		}
		var ls []string
		for k, val := range s.Metric {
			if k != "__name__" && k != "instance" && k != "job" {
				ls = append(ls, k+"="+strconv.Quote(val))
			}
		}
		sort.Strings(ls)
		parts = append(parts, fmt.Sprintf("{%s} %.4g", strings.Join(ls, ", "), s.V))
	}
	return strings.Join(parts, ", ")
}

func allPromNaN(v []promSample) bool {
	for _, s := range v {
		if !math.IsNaN(s.V) {
			return false
		}
	}
	return len(v) > 0
}
