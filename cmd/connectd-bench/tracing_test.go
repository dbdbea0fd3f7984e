package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTracingRatios: each traced row is judged against the mean of the
// tracing-off rows at its level, and the table shows each variant's mean
// over its rounds.
func TestTracingRatios(t *testing.T) {
	r := &results{Results: []result{
		{Scenario: scenarioToken, Concurrency: 64, RPS: 20000},
		{Scenario: scenarioTraceOff, Concurrency: 64, RPS: 9000, P99ms: 10, CPUPer1k: 0.05},
		{Scenario: scenarioTrace1, Concurrency: 64, RPS: 9500, P99ms: 11, CPUPer1k: 0.05},
		{Scenario: scenarioTrace100, Concurrency: 64, RPS: 6000, P99ms: 20, CPUPer1k: 0.1},
		{Scenario: scenarioTrace100, Concurrency: 64, RPS: 8000, P99ms: 20, CPUPer1k: 0.1},
		{Scenario: scenarioTrace1, Concurrency: 64, RPS: 10500, P99ms: 11, CPUPer1k: 0.05},
		{Scenario: scenarioTraceOff, Concurrency: 64, RPS: 11000, P99ms: 10, CPUPer1k: 0.05},
	}}
	r.tracingRatios()
	if x := r.Results[0]; x.VsTracingOff != 0 {
		t.Fatalf("the token scenario got a tracing ratio: %v", x.VsTracingOff)
	}
	if x := r.Results[3]; x.VsTracingOff != 0.6 {
		t.Fatalf("100 %% vs off: %v, want 0.6 (of the mean 10000)", x.VsTracingOff)
	}
	var b strings.Builder
	r.tracingTable(&b)
	if !strings.Contains(b.String(), "| 64 | 10000 | 10000 | 100.0 % | 7000 | 70.0 % | 10.00 / 11.00 / 20.00 | 0.050 / 0.050 / 0.100 | 1.00 | 2.00 |") {
		t.Errorf("tracing table:\n%s", b.String())
	}
}

// TestSink: the OTLP sink takes POST /v1/traces and answers 200 with an
// empty protobuf body, as a collector's receiver does.
func TestSink(t *testing.T) {
	s, err := startSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	resp, err := http.Post(s.url, "application/x-protobuf", strings.NewReader("\x0a\x00"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 || s.exports.Load() != 1 || s.bytes.Load() != 2 {
		t.Fatalf("sink: %d %q, %d exports, %d bytes", resp.StatusCode, body, s.exports.Load(), s.bytes.Load())
	}
}

// TestTracingBaselineColumn: with a baseline binary measured, tracing off
// is shown against it.
func TestTracingBaselineColumn(t *testing.T) {
	r := &results{Results: []result{
		{Scenario: scenarioTraceBase, Concurrency: 64, RPS: 10000, CPUPer1k: 0.05},
		{Scenario: scenarioTraceOff, Concurrency: 64, RPS: 9900, CPUPer1k: 0.05},
		{Scenario: scenarioTrace1, Concurrency: 64, RPS: 9800, CPUPer1k: 0.05},
		{Scenario: scenarioTrace100, Concurrency: 64, RPS: 5000, CPUPer1k: 0.1},
	}}
	r.tracingRatios()
	var b strings.Builder
	r.tracingTable(&b)
	if !strings.Contains(b.String(), "off / baseline") || !strings.Contains(b.String(), "| 10000 | 99.0 % | 1.00 |\n") {
		t.Errorf("tracing table:\n%s", b.String())
	}
}
