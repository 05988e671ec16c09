package config

import (
	"strings"
	"testing"
)

const observeBase = `
upstreams: [{name: openai, flavor: openai, base_url: "https://api.openai.com"}]
`

func TestObserveDefaultsAreOff(t *testing.T) {
	c, err := Parse([]byte(observeBase))
	if err != nil {
		t.Fatal(err)
	}
	a, tr := c.AccessLog, c.Tracing
	if a.Enabled || tr.Enabled {
		t.Errorf("access log or tracing on by default: %+v %+v", a, tr)
	}
	if a.Format != "json" || a.Output != "stderr" || a.MaxSizeMB != 100 || *a.SampleAllowed != 1 {
		t.Errorf("access_log defaults: %+v (sample %v)", a, *a.SampleAllowed)
	}
	if tr.Protocol != "grpc" || *tr.SampleRatio != 1 || tr.ServiceName != "llmguard" {
		t.Errorf("tracing defaults: %+v", tr)
	}
}

func TestObserveSampleZeroIsKept(t *testing.T) {
	c, err := Parse([]byte(observeBase + `
access_log: {enabled: true, sample_allowed: 0}
tracing: {enabled: true, endpoint: "http://127.0.0.1:4318/v1/traces", protocol: http, sample_ratio: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	if *c.AccessLog.SampleAllowed != 0 || *c.Tracing.SampleRatio != 0 {
		t.Errorf("an explicit 0 became %v / %v", *c.AccessLog.SampleAllowed, *c.Tracing.SampleRatio)
	}
}

func TestObserveBadFieldsAreNamed(t *testing.T) {
	_, err := Parse([]byte(observeBase + `
access_log: {enabled: true, format: xml, sample_allowed: 1.5, max_backups: -1}
tracing:
  enabled: true
  protocol: thrift
  sample_ratio: -0.1
  headers: {"bad name": x, ok: "a\nb"}
`))
	if err == nil {
		t.Fatal("bad access_log and tracing accepted")
	}
	for _, field := range []string{"access_log.format", "access_log.sample_allowed", "access_log:", "tracing.protocol",
		"tracing.sample_ratio", "tracing.endpoint: is required", "tracing.headers: header name", "tracing.headers: a header value"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s:\n%v", field, err)
		}
	}
	for _, ep := range []string{"ftp://collector:4317", "collector", "http://", "host:4317/v1/traces"} {
		_, err := Parse([]byte(observeBase + "tracing: {enabled: true, endpoint: \"" + ep + "\"}\n"))
		if err == nil || !strings.Contains(err.Error(), "tracing.endpoint") {
			t.Errorf("endpoint %q: %v", ep, err)
		}
	}
	for _, ep := range []string{"127.0.0.1:4317", "collector.internal:4317", "https://otlp.example.com/v1/traces"} {
		if _, err := Parse([]byte(observeBase + "tracing: {enabled: true, endpoint: \"" + ep + "\"}\n")); err != nil {
			t.Errorf("endpoint %q refused: %v", ep, err)
		}
	}
}
