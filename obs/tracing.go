package obs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmguard/llmguard/spec"
)

// TracingOptions configures Tracing. Endpoint is required unless Processor
// is set.
type TracingOptions struct {
	// Endpoint is the OTLP collector: host:port, or an http(s):// URL
	// (whose path OTLP/HTTP uses as is; the default path is /v1/traces).
	Endpoint string
	// Protocol is "grpc" (OTLP/gRPC) or "http" (OTLP/HTTP, protobuf).
	// "": grpc.
	Protocol string
	// Headers are sent with every export.
	Headers map[string]string
	// Insecure exports without TLS to a host:port Endpoint (a URL's scheme
	// decides for itself).
	Insecure bool
	// SampleRatio is the share of traces recorded, in [0, 1], decided on
	// the trace id (sdktrace.TraceIDRatioBased) for every span, whatever
	// the sampled flag of a caller's traceparent.
	SampleRatio float64
	// ServiceName is the service.name resource attribute. "": llmguard.
	ServiceName string
	// Processor, when set, receives the spans instead of a batching OTLP
	// exporter (tests pass a tracetest.SpanRecorder).
	Processor sdktrace.SpanProcessor
}

// Tracing is llmguard's tracer provider: spans sampled by ratio, batched
// to an OTLP exporter, W3C trace context (traceparent, tracestate) in and
// out. Safe for concurrent use.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
}

// TracerName is the instrumentation scope name of llmguard's spans.
const TracerName = "github.com/llmguard/llmguard/proxy"

// NewTracing builds Tracing and its exporter. The exporter connects
// lazily: an unreachable collector costs dropped spans, never a failed
// start. Errors: an unknown Protocol, a SampleRatio outside [0, 1], no
// Endpoint (without Processor), or an exporter that cannot be built.
func NewTracing(o TracingOptions) (*Tracing, error) {
	if !(o.SampleRatio >= 0 && o.SampleRatio <= 1) {
		return nil, fmt.Errorf("obs: tracing sample_ratio %v is not in [0, 1]", o.SampleRatio)
	}
	name := o.ServiceName
	if name == "" {
		name = "llmguard"
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(o.SampleRatio)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	}
	if o.Processor != nil {
		opts = append(opts, sdktrace.WithSpanProcessor(o.Processor))
	} else {
		exp, err := newExporter(o)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{provider: tp, tracer: tp.Tracer(TracerName),
		prop: propagation.TraceContext{}}, nil
}

// newExporter builds the OTLP exporter o names.
func newExporter(o TracingOptions) (sdktrace.SpanExporter, error) {
	if o.Endpoint == "" {
		return nil, errors.New("obs: tracing endpoint is required")
	}
	isURL := strings.Contains(o.Endpoint, "://")
	ctx := context.Background()
	protocol, ok := spec.ParseTraceProtocol(cmp.Or(o.Protocol, spec.TraceGRPC.String()))
	if !ok {
		return nil, fmt.Errorf("obs: tracing protocol %q is not grpc or http", o.Protocol)
	}
	switch protocol {
	case spec.TraceGRPC:
		var opts []otlptracegrpc.Option
		if isURL {
			opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
		} else {
			opts = append(opts, otlptracegrpc.WithEndpoint(o.Endpoint))
			if o.Insecure {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		if len(o.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(o.Headers))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("obs: otlp/grpc exporter: %w", err)
		}
		return exp, nil
	case spec.TraceHTTP:
		var opts []otlptracehttp.Option
		if isURL {
			opts = append(opts, otlptracehttp.WithEndpointURL(o.Endpoint))
		} else {
			opts = append(opts, otlptracehttp.WithEndpoint(o.Endpoint))
			if o.Insecure {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
		}
		if len(o.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(o.Headers))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("obs: otlp/http exporter: %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("obs: tracing protocol %q is not grpc or http", o.Protocol)
}

// Tracer is the tracer requests' spans are started from.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Propagator reads and writes W3C trace context (traceparent, tracestate;
// https://www.w3.org/TR/trace-context/).
func (t *Tracing) Propagator() propagation.TextMapPropagator { return t.prop }

// Shutdown ends every span processor, exporting the spans still queued,
// within ctx. Errors: the exporter's, or ctx's when it expires first.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }
