// Package tracing owns connectd's OpenTelemetry tracer provider: whether
// there is one (off by default), where its spans go (OTLP/HTTP), how traces
// are sampled and what resource names the process. The spans themselves are
// made where the work happens — package web (a server span per request),
// package db (a client span per statement), package egress (a client span
// per outbound call) and River's middleware (a span per job) — and below the
// HTTP layer only as children of a recording span, from that span's own
// provider, so those packages need no configuration and cost nothing when
// tracing is off.
//
// Off means no provider at all (Provider returns nil): the callers then
// install no middleware, so a request costs exactly what it did before
// tracing existed.
//
// It must never record a secret: the attributes connectd's spans carry are
// listed in docs/operations.md ("Tracing"), and no span anywhere carries a
// query string, header, cookie, body or SQL parameter.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Config says whether and where to export spans. cmd/connectd fills it from
// CONNECTD_TRACING and the standard OTEL_* variables.
type Config struct {
	// Enabled (CONNECTD_TRACING=otlp) exports spans over OTLP/HTTP. False:
	// New returns a Tracing without a provider.
	Enabled bool
	// Endpoint is the full URL spans are POSTed to (…/v1/traces). The other
	// OTEL_EXPORTER_OTLP_* settings (headers, timeout, compression,
	// certificates) are read by the exporter from the process environment.
	Endpoint string
	// Sampler decides which new traces are recorded (default: parent-based,
	// always on, as OTEL_TRACES_SAMPLER's default).
	Sampler sdktrace.Sampler
	// ServiceName (OTEL_SERVICE_NAME, default "connectd") and
	// ServiceVersion name the process in every span's resource;
	// OTEL_RESOURCE_ATTRIBUTES adds to them.
	ServiceName, ServiceVersion string
}

// Tracing is the process's tracer provider, or none.
type Tracing struct {
	tp *sdktrace.TracerProvider
}

// New builds the provider cfg asks for; with tracing off it returns a
// Tracing whose Provider is nil. Shutdown flushes and stops it.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	if !cfg.Enabled {
		return &Tracing{}, nil
	}
	if cfg.Endpoint == "" {
		return nil, errors.New("tracing: no OTLP endpoint")
	}
	exp, err := newExporter(cfg.Endpoint, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "connectd"
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// (WithFromEnv) over the defaults, as the specification says.
	kv := []attribute.KeyValue{semconv.ServiceName(name)}
	if cfg.ServiceVersion != "" {
		kv = append(kv, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(kv...), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	sampler := cfg.Sampler
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler))
	return &Tracing{tp: tp}, nil
}

// Provider is the tracer provider, nil when tracing is off (callers install
// nothing then).
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp
}

// ForceFlush exports every span ended so far (tests; shutdown does it too).
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown exports what is queued and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Propagator is the one trace-context format connectd reads: W3C
// traceparent/tracestate. No baggage: nothing a caller sends is copied into
// a span.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// ParseSampler reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the
// OpenTelemetry specification defines them (always_on, always_off,
// traceidratio, parentbased_always_on, parentbased_always_off,
// parentbased_traceidratio; the ratio's argument in [0, 1], default 1). An
// empty name is the specification's default, parentbased_always_on.
func ParseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, errors.New("OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1")
		}
		return r, nil
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.TraceIDRatioBased(r), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, errors.New("OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
}
