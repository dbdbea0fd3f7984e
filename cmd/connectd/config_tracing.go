package main

import (
	"net/url"
	"strings"

	"github.com/connectd/connectd/internal/tracing"
)

// loadTracing reads CONNECTD_TRACING and the standard OpenTelemetry
// variables it needs to validate before anything starts: the OTLP traces
// endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces", as the specification says),
// the sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and
// OTEL_SERVICE_NAME. The exporter reads the rest of OTEL_EXPORTER_OTLP_*
// (headers, timeout, compression, certificates) from the environment
// itself. Tracing is off unless CONNECTD_TRACING=otlp: an endpoint set for
// other programs of the same environment does not turn it on, and
// OTEL_SDK_DISABLED=true turns it off.
func (c *Config) loadTracing(e *env) {
	const name = "CONNECTD_TRACING"
	switch mode := strings.ToLower(e.str(name, "off")); mode {
	case "off":
		return
	case "otlp":
	default:
		e.fail(name, "must be off or otlp")
		return
	}
	if strings.EqualFold(e.str("OTEL_SDK_DISABLED", ""), "true") {
		return
	}
	endpoint, from := e.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if endpoint == "" {
		if base := e.str("OTEL_EXPORTER_OTLP_ENDPOINT", ""); base != "" {
			endpoint, from = strings.TrimSuffix(base, "/")+"/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT"
		}
	}
	if endpoint == "" {
		e.fail(name, "otlp needs OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the collector's OTLP/HTTP address, e.g. http://otel-collector:4318)")
		return
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		// Never the value: it may carry credentials.
		e.fail(from, "must be an http:// or https:// URL without user info")
		return
	}
	sampler, err := tracing.ParseSampler(e.str("OTEL_TRACES_SAMPLER", ""), e.str("OTEL_TRACES_SAMPLER_ARG", ""))
	if err != nil {
		e.fail("OTEL_TRACES_SAMPLER", "%s", err)
		return
	}
	c.Tracing = tracing.Config{Enabled: true, Endpoint: endpoint, Sampler: sampler,
		ServiceName: e.str("OTEL_SERVICE_NAME", "connectd"), ServiceVersion: buildVersion()}
}
