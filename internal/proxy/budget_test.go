package proxy

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestSpentUntil: the provider's own answers, in each shape connectd reads.
func TestSpentUntil(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		status    int
		h         http.Header
		remaining int
		until     time.Duration // from now; 0: nothing held
	}{
		{"429 Retry-After seconds", 429, http.Header{"Retry-After": {"30"}}, 0, 30 * time.Second},
		{"503 Retry-After date", 503, http.Header{"Retry-After": {now.Add(2 * time.Minute).Format(http.TimeFormat)}}, 0, 2 * time.Minute},
		{"Retry-After on a 200 is not a hold", 200, http.Header{"Retry-After": {"30"}}, -1, 0},
		{"Retry-After capped at an hour", 429, http.Header{"Retry-After": {"86400"}}, 0, time.Hour},
		{"GitHub remaining 0", 200, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {reset(now.Add(30 * time.Minute))}}, 0, 30 * time.Minute},
		{"GitHub 403 remaining 0", 403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {reset(now.Add(30 * time.Minute))}}, 0, 30 * time.Minute},
		{"GitHub remaining 12", 200, http.Header{"X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {reset(now.Add(30 * time.Minute))}}, 12, 0},
		{"reset as seconds from now", 200, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"45"}}, 0, 45 * time.Second},
		{"reset in the past", 200, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1700000000"}}, 0, 0},
		{"draft -03 headers", 200, http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"20"}}, 0, 20 * time.Second},
		{"draft -07 field", 200, http.Header{"Ratelimit": {"limit=100, remaining=0, reset=50"}}, 0, 50 * time.Second},
		{"draft -08 field", 200, http.Header{"Ratelimit": {`"default";r=0;t=10`}, "Ratelimit-Policy": {`"default";q=100;w=60`}}, 0, 10 * time.Second},
		{"draft -08 field, some left", 200, http.Header{"Ratelimit": {`"default";r=7;t=10`}}, 7, 0},
		{"429 with nothing else: a second", 429, http.Header{}, 0, time.Second},
		{"garbage", 200, http.Header{"X-Ratelimit-Remaining": {"zero"}, "Ratelimit": {"x"}}, -1, 0},
		{"nothing", 200, http.Header{}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remaining, until, ok := SpentUntil(tc.status, tc.h, now)
			if remaining != tc.remaining || ok != (tc.until != 0) || (ok && !until.Equal(now.Add(tc.until))) {
				t.Fatalf("SpentUntil = %d, %v, %v; want %d, +%v", remaining, until, ok, tc.remaining, tc.until)
			}
		})
	}
}

func reset(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
