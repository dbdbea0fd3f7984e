package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestConfigTracing(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"CONNECTD_PUBLIC_URL":   "https://connect.example.com",
		"CONNECTD_DATABASE_URL": "postgres://u:p@db:5432/connectd",
	}
	load := func(set map[string]string) (*Config, error) {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range set {
			m[k] = v
		}
		return loadConfig(envOf(m), needs{db: true, publicURL: true})
	}
	for _, c := range []struct {
		name         string
		set          map[string]string
		enabled      bool
		endpoint     string
		service      string
		sampleRecord bool // what the sampler decides for a new root trace
	}{
		{"off by default", nil, false, "", "", false},
		{"an endpoint alone does not turn it on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false, "", "", false},
		{"otlp with the base endpoint", map[string]string{"CONNECTD_TRACING": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			true, "http://collector:4318/v1/traces", "connectd", true},
		{"the traces endpoint wins, as it is", map[string]string{"CONNECTD_TRACING": "OTLP", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:4318/custom", "OTEL_SERVICE_NAME": "connectd-eu"},
			true, "https://b:4318/custom", "connectd-eu", true},
		{"a ratio of 0", map[string]string{"CONNECTD_TRACING": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, true, "http://c:4318/v1/traces", "connectd", false},
		{"the SDK disabled", map[string]string{"CONNECTD_TRACING": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_SDK_DISABLED": "true"}, false, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(c.set)
			if err != nil {
				t.Fatal(err)
			}
			tc := cfg.Tracing
			if tc.Enabled != c.enabled || tc.Endpoint != c.endpoint || tc.ServiceName != c.service {
				t.Fatalf("tracing config %+v", tc)
			}
			if c.enabled && (tc.Sampler == nil || sampled(tc.Sampler) != c.sampleRecord) {
				t.Fatalf("sampler %v", tc.Sampler)
			}
		})
	}
	for _, c := range []struct {
		name    string
		set     map[string]string
		wantVar string
		wantMsg string
	}{
		{"unknown mode", map[string]string{"CONNECTD_TRACING": "jaeger"}, "CONNECTD_TRACING", "off or otlp"},
		{"no endpoint", map[string]string{"CONNECTD_TRACING": "otlp"}, "CONNECTD_TRACING", "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"endpoint not a URL", map[string]string{"CONNECTD_TRACING": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
			"OTEL_EXPORTER_OTLP_ENDPOINT", "http:// or https://"},
		{"endpoint with a password", map[string]string{"CONNECTD_TRACING": "otlp",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://u:hunter2secret@c/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "user info"},
		{"unknown sampler", map[string]string{"CONNECTD_TRACING": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
		{"ratio out of range", map[string]string{"CONNECTD_TRACING": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
			"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER", "from 0 to 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(c.set)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Var != c.wantVar || !strings.Contains(ce.Problem, c.wantMsg) {
				t.Fatalf("got %v, want %s: …%s…", err, c.wantVar, c.wantMsg)
			}
			if strings.Contains(err.Error(), "hunter2secret") {
				t.Fatal("the error quotes the endpoint's password")
			}
		})
	}
}

// sampled reports whether s records a new root trace (ratio 0 or 1 in
// these cases, so any trace id answers the same).
func sampled(s sdktrace.Sampler) bool {
	r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(),
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Name: "x"})
	return r.Decision == sdktrace.RecordAndSample
}

// TestTracingVariablesDocumented: every variable loadTracing reads is in
// docs/configuration.md.
func TestTracingVariablesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	(&Config{}).loadTracing(&env{getenv: func(k string) string {
		read = append(read, k)
		switch k {
		case "CONNECTD_TRACING":
			return "otlp"
		}
		return ""
	}})
	(&Config{}).loadTracing(&env{getenv: func(k string) string {
		read = append(read, k)
		switch k {
		case "CONNECTD_TRACING":
			return "otlp"
		case "OTEL_EXPORTER_OTLP_ENDPOINT":
			return "http://c:4318"
		}
		return ""
	}})
	if len(read) < 8 {
		t.Fatalf("read only %v", read)
	}
	for _, k := range read {
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("%s is not in docs/configuration.md's tables", k)
		}
	}
}
