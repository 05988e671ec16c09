package spec

// LogFormat is how the access log writes a line (access_log.format). The
// zero value is LogJSON, the default.
type LogFormat uint8

// Access log formats, in the order of logFormatNames.
const (
	LogJSON LogFormat = iota // one JSON object a line (log/slog's JSONHandler)
	LogText                  // key=value pairs (log/slog's TextHandler)
)

// logFormatNames is the config name of each LogFormat, indexed by its
// value: the one table of access log formats.
var logFormatNames = names[LogFormat]{LogJSON: "json", LogText: "text"}

// String is the format's config name; a value outside the enum is
// "unknown(<n>)".
func (f LogFormat) String() string { return logFormatNames.of(f) }

// ParseLogFormat returns the LogFormat whose config name is s; false if
// none is.
func ParseLogFormat(s string) (LogFormat, bool) { return logFormatNames.parse(s) }

// LogFormatNames returns every access log format's config name in value
// order (a fresh slice the caller may keep).
func LogFormatNames() []string { return logFormatNames.list() }

// TraceProtocol is how spans go to the OpenTelemetry collector
// (tracing.protocol): OTLP over gRPC or over HTTP
// (https://opentelemetry.io/docs/specs/otlp/). The zero value is
// TraceGRPC, the default.
type TraceProtocol uint8

// Trace export protocols, in the order of traceProtocolNames.
const (
	TraceGRPC TraceProtocol = iota // OTLP/gRPC (port 4317 by convention)
	TraceHTTP                      // OTLP/HTTP with protobuf bodies (port 4318)
)

// traceProtocolNames is the config name of each TraceProtocol, indexed by
// its value: the one table of trace export protocols.
var traceProtocolNames = names[TraceProtocol]{TraceGRPC: "grpc", TraceHTTP: "http"}

// String is the protocol's config name; a value outside the enum is
// "unknown(<n>)".
func (p TraceProtocol) String() string { return traceProtocolNames.of(p) }

// ParseTraceProtocol returns the TraceProtocol whose config name is s;
// false if none is.
func ParseTraceProtocol(s string) (TraceProtocol, bool) { return traceProtocolNames.parse(s) }

// TraceProtocolNames returns every trace protocol's config name in value
// order (a fresh slice the caller may keep).
func TraceProtocolNames() []string { return traceProtocolNames.list() }

// AlertFormat is the body a budget alert's webhook receives
// (alerts.webhook.format). The zero value is AlertJSON, the default.
type AlertFormat uint8

// Alert body formats, in the order of alertFormatNames.
const (
	AlertJSON  AlertFormat = iota // the alert's payload as JSON
	AlertSlack                    // {"text": "..."}, as a Slack incoming webhook takes it
)

// alertFormatNames is the config name of each AlertFormat, indexed by its
// value: the one table of alert body formats.
var alertFormatNames = names[AlertFormat]{AlertJSON: "json", AlertSlack: "slack"}

// String is the format's config name; a value outside the enum is
// "unknown(<n>)".
func (f AlertFormat) String() string { return alertFormatNames.of(f) }

// ParseAlertFormat returns the AlertFormat whose config name is s; false
// if none is.
func ParseAlertFormat(s string) (AlertFormat, bool) { return alertFormatNames.parse(s) }

// AlertFormatNames returns every alert body format's config name in value
// order (a fresh slice the caller may keep).
func AlertFormatNames() []string { return alertFormatNames.list() }
