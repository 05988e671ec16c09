package config

import (
	"net/url"
	"strings"

	"github.com/llmguard/llmguard/spec"
)

// AccessLog configures the access log: one structured line per request
// (package obs), written once the request is settled. Its zero value is off.
type AccessLog struct {
	// Enabled turns the access log on. Default false.
	Enabled bool `yaml:"enabled"`
	// Format is "json" (one JSON object a line) or "text" (slog's
	// key=value lines). Default "json".
	Format string `yaml:"format"`
	// Output is "stderr", "stdout" or a file path (relative to the working
	// directory), rotated by size. Default "stderr".
	Output string `yaml:"output"`
	// MaxSizeMB rotates the file past this size, in megabytes. Default 100.
	MaxSizeMB int `yaml:"max_size_mb"`
	// MaxBackups is how many rotated files to keep. Default 0: all.
	MaxBackups int `yaml:"max_backups"`
	// SampleAllowed is the share of allowed requests logged, in [0, 1],
	// decided by the request id (so one request is logged or not
	// everywhere). Every other outcome (denials, errors, fail-open,
	// unauthenticated, malformed) is always logged. Default 1: all.
	SampleAllowed *float64 `yaml:"sample_allowed"`
}

// Tracing configures OpenTelemetry tracing (package obs): a span per
// request, exported over OTLP. Its zero value is off.
type Tracing struct {
	// Enabled turns tracing on. Default false.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP collector: host:port, or a URL
	// (http://host:4318/v1/traces for OTLP/HTTP, whose path is then used
	// as is). Required when enabled.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" (OTLP/gRPC, port 4317 by convention) or "http"
	// (OTLP/HTTP protobuf, port 4318, path /v1/traces). Default "grpc".
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of traces recorded, in [0, 1], decided on
	// the trace id (for every request, whatever a caller's traceparent
	// says). Default 1.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// Headers are sent with every export (a collector's API key, say).
	Headers map[string]string `yaml:"headers"`
	// Insecure exports without TLS. Default false (a URL endpoint's
	// scheme decides instead: http:// is plain).
	Insecure bool `yaml:"insecure"`
	// ServiceName is the service.name resource attribute. Default
	// "llmguard".
	ServiceName string `yaml:"service_name"`
}

// applyObserveDefaults fills the access log's and tracing's defaults.
func (c *Config) applyObserveDefaults() {
	a := &c.AccessLog
	if a.Format == "" {
		a.Format = spec.LogJSON.String()
	}
	if a.Output == "" {
		a.Output = "stderr"
	}
	if a.MaxSizeMB == 0 {
		a.MaxSizeMB = 100
	}
	if a.SampleAllowed == nil {
		one := 1.0
		a.SampleAllowed = &one
	}
	t := &c.Tracing
	if t.Protocol == "" {
		t.Protocol = spec.TraceGRPC.String()
	}
	if t.SampleRatio == nil {
		one := 1.0
		t.SampleRatio = &one
	}
	if t.ServiceName == "" {
		t.ServiceName = "llmguard"
	}
}

// validateObserve checks access_log and tracing.
func (c *Config) validateObserve(p *problems) {
	a := c.AccessLog
	if _, ok := spec.ParseLogFormat(a.Format); !ok {
		p.notOneOf("access_log.format", a.Format, spec.LogFormatNames())
	}
	if a.MaxSizeMB < 0 || a.MaxBackups < 0 {
		p.add("access_log", "max_size_mb and max_backups must be positive")
	}
	if r := a.SampleAllowed; r != nil && !(*r >= 0 && *r <= 1) {
		p.add("access_log.sample_allowed", "must be in [0, 1] (got %v)", *r)
	}
	t := c.Tracing
	if _, ok := spec.ParseTraceProtocol(t.Protocol); !ok {
		p.notOneOf("tracing.protocol", t.Protocol, spec.TraceProtocolNames())
	}
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		p.add("tracing.sample_ratio", "must be in [0, 1] (got %v)", *r)
	}
	switch {
	case t.Endpoint == "":
		if t.Enabled {
			p.add("tracing.endpoint", "is required when tracing is enabled (e.g. 127.0.0.1:4317)")
		}
	case strings.Contains(t.Endpoint, "://"):
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("tracing.endpoint", "must be host:port or an http(s):// URL (got %q)", t.Endpoint)
		}
	default:
		if _, _, ok := strings.Cut(t.Endpoint, ":"); !ok || strings.ContainsAny(t.Endpoint, "/ ") {
			p.add("tracing.endpoint", "must be host:port or an http(s):// URL (got %q)", t.Endpoint)
		}
	}
	for k := range t.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			p.add("tracing.headers", "header name %q is not a valid HTTP field name", k)
		}
	}
	for _, v := range t.Headers {
		if strings.ContainsAny(v, "\r\n") {
			p.add("tracing.headers", "a header value holds a line break")
		}
	}
}
