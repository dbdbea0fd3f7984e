package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// RateLimit is one of a provider's documented request limits that connectd
// keeps for the caller (package ratebudget): at most Requests calls Per
// window, counted per user (each connection, i.e. each user's token at one
// provider app) or per app (every call made with one provider app's
// credentials: an organization's own app has its own). Path, when set,
// limits the rule to calls whose path below the API base starts with it
// (Slack's method tiers: "search."); every matching rule applies.
type RateLimit struct {
	Scope    RateLimitScope
	Requests int
	Per      time.Duration
	Path     string
	// PerMethod counts each API method apart: the path's first segment
	// (Slack's "chat.postMessage"), so that the limit is per method.
	PerMethod bool
	// Source is the provider's page that documents the limit (operators'
	// facts, docs/providers.md).
	Source string
}

// RateLimitScope is what a RateLimit counts calls of.
type RateLimitScope string

// The scopes.
const (
	PerUser RateLimitScope = "user" // each connection apart (the provider's per-user-token limit)
	PerApp  RateLimitScope = "app"  // every call with one provider app's credentials
)

// fileRateLimit is one rate_limits entry of the providers file.
type fileRateLimit struct {
	Scope    string `json:"scope"`    // "user" or "app"
	Requests int    `json:"requests"` // > 0
	Per      string `json:"per"`      // a Go duration, "1h", 1s to 24h
	Path     string `json:"path"`     // optional path prefix below the API base, no leading "/"
	// PerMethod: each method (the path's first segment) counted apart.
	PerMethod bool   `json:"per_method"`
	Source    string `json:"source"` // optional
}

// maxRateLimits bounds a provider's rules (each call checks every one).
const maxRateLimits = 16

// parseRateLimits checks a providers-file rate_limits list; an empty list
// removes the template's.
func parseRateLimits(in []fileRateLimit) ([]RateLimit, error) {
	out := make([]RateLimit, 0, len(in))
	for i, f := range in {
		per, err := time.ParseDuration(f.Per)
		if err != nil {
			return nil, fmt.Errorf("[%d].per: %q is not a Go duration (e.g. \"1h\")", i, f.Per)
		}
		l := RateLimit{Scope: RateLimitScope(f.Scope), Requests: f.Requests, Per: per, Path: f.Path, PerMethod: f.PerMethod, Source: f.Source}
		if err := checkRateLimit(l); err != nil {
			return nil, fmt.Errorf("[%d].%w", i, err)
		}
		out = append(out, l)
	}
	if len(out) > maxRateLimits {
		return nil, fmt.Errorf("at most %d rules", maxRateLimits)
	}
	return out, nil
}

// checkRateLimit is the one rule a limit obeys, a template's or the file's.
func checkRateLimit(l RateLimit) error {
	switch {
	case l.Scope != PerUser && l.Scope != PerApp:
		return errors.New(`scope: must be "user" or "app"`)
	case l.Requests <= 0 || l.Requests > 1_000_000_000:
		return errors.New("requests: must be 1 to 1000000000")
	case l.Per < time.Second || l.Per > 24*time.Hour || l.Per%time.Second != 0:
		return errors.New("per: must be whole seconds from 1s to 24h")
	case strings.HasPrefix(l.Path, "/") || strings.ContainsAny(l.Path, "?#\x00"):
		return errors.New(`path: a path prefix below the API base, without a leading "/", query or fragment`)
	}
	return nil
}

// Matches reports whether l counts a call to path (below the API base,
// without a leading "/").
func (l RateLimit) Matches(path string) bool { return strings.HasPrefix(path, l.Path) }

// Method is what a PerMethod limit counts path under: its first segment
// ("" for another limit).
func (l RateLimit) Method(path string) string {
	if !l.PerMethod {
		return ""
	}
	m, _, _ := strings.Cut(path, "/")
	return m
}
