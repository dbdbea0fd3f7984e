package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestProxyTargets: the 1 KB GET through the proxy is judged against the
// direct GET at the same level, the 256 KB GET by connectd's peak RSS, and
// the direct GET (the fake API's own RSS) is no connectd figure.
func TestProxyTargets(t *testing.T) {
	r := &results{MemLimit: "46MiB", Results: []result{
		{Scenario: scenarioDirect, Concurrency: 64, RPS: 30000, P50ms: 1.5, PeakRSSMB: 90},
		{Scenario: scenarioProxy, Concurrency: 64, RPS: 16000, P50ms: 2.3, PeakRSSMB: 60, CPUPer1k: 0.25},
		{Scenario: scenarioProxyLarge, Concurrency: 64, RPS: 2000, P50ms: 30, PeakRSSMB: 61},
		{Scenario: scenarioDirect, Concurrency: 16, RPS: 30000, P50ms: 0.4},
		{Scenario: scenarioProxy, Concurrency: 16, RPS: 9000, P50ms: 1.6},
		{Scenario: scenarioBare, Concurrency: 64, RPS: 20000, P50ms: 2.0, CPUPer1k: 0.10, PeakRSSMB: 95},
		{Scenario: scenarioBare, Concurrency: 16, RPS: 12000, P50ms: 0.5, CPUPer1k: 0.09},
		{Scenario: scenarioToken, Concurrency: 64, RPS: 15000, P50ms: 2.0, CPUPer1k: 0.05},
	}}
	r.ratios()
	px, _ := r.find(scenarioProxy, 64)
	if px.VsDirect < 0.533 || px.VsDirect > 0.534 || px.P50AddedMs == nil || *px.P50AddedMs < 0.79 || *px.P50AddedMs > 0.81 {
		t.Fatalf("proxy at 64: vs direct %v, p50 added %v", px.VsDirect, px.P50AddedMs)
	}
	if d, _ := r.find(scenarioDirect, 64); d.VsDirect != 0 || d.P50AddedMs != nil || d.VsTrivial != 0 {
		t.Fatalf("the direct GET got ratios: %+v", d)
	}
	met := map[string]bool{}
	for _, tg := range r.targets() {
		met[tg.What] = tg.Met
		if strings.Contains(tg.What, "every scenario") && !strings.HasPrefix(tg.Got, "61 MB") {
			t.Errorf("RSS in every scenario: %q (the direct GET's 90 MB is the fake API's)", tg.Got)
		}
	}
	for what, want := range map[string]bool{
		"provider GET 1 KB through the proxy ≥ 60 % of the bare reverse proxy's req/s at 64 callers":                  true,
		"provider GET 1 KB through the proxy adds ≤ 1 ms to the bare reverse proxy's p50 at 16 callers":               false,
		"connectd's CPU per proxied 1 KB GET ≤ the token lookup's + the bare reverse proxy's + 0.05 ms at 64 callers": false,
		"provider GET 256 KB through the proxy at 64 callers: connectd RSS ≤ 64 MB (streamed, not buffered)":          true,
	} {
		if got, ok := met[what]; !ok || got != want {
			t.Errorf("%s: met %v (present %v), want %v", what, got, ok, want)
		}
	}
	var b strings.Builder
	r.proxyTable(&b)
	if !strings.Contains(b.String(), "| 64 | 30000 | 20000 | 16000 | 53.3 % | 80.0 % | 1.50 | 2.00 | 2.30 | +0.30 | 0.100 / 0.250 | 2000 | 524 | 61 |") ||
		!strings.Contains(b.String(), "| 16 | 30000 | 12000 | 9000 | 30.0 % | 75.0 % | 0.40 | 0.50 | 1.60 | +1.10 | 0.090 / — | — | — | — |") {
		t.Errorf("proxy table:\n%s", b.String())
	}
}

// TestUpstream: the fake provider API answers its two sizes, with their
// Content-Length, to a seeded access token only.
func TestUpstream(t *testing.T) {
	h := upstreamHandler()
	for _, c := range []apiCall{apiSmall, apiLarge} {
		req := httptest.NewRequest(http.MethodGet, "/"+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+benchAccessToken(7))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || int64(w.Body.Len()) != c.size || w.Header().Get("Content-Length") != strconv.FormatInt(c.size, 10) ||
			!json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: %d, %d bytes, Content-Length %q", c.path, w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
		}
		req.Header.Set("Authorization", "Bearer someone-else")
		w = httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s with another token: %d", c.path, w.Code)
		}
	}
}
