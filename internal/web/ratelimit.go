package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/httprate"

	"github.com/connectd/connectd/internal/clientauth"
)

// Rate is a request budget: at most Requests per Window (a sliding window).
// The zero Rate means no limit.
type Rate struct {
	Requests int
	Window   time.Duration
}

// Off reports whether r imposes no limit.
func (r Rate) Off() bool { return r.Requests <= 0 || r.Window <= 0 }

// String formats r as ParseRate reads it.
func (r Rate) String() string {
	if r.Off() {
		return "off"
	}
	return strconv.Itoa(r.Requests) + "/" + r.Window.String()
}

// ParseRate reads "N/WINDOW" (e.g. "120/1m": 120 requests a minute) or "off".
// N is 1–1000000 and WINDOW a Go duration of 1s–24h.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return Rate{}, nil
	}
	n, w, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, errors.New(`must be N/WINDOW such as 120/1m, or "off"`)
	}
	req, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || req < 1 || req > 1_000_000 {
		return Rate{}, errors.New("the request count must be an integer from 1 to 1000000")
	}
	win, err := time.ParseDuration(strings.TrimSpace(w))
	if err != nil || win < time.Second || win > 24*time.Hour {
		return Rate{}, errors.New("the window must be a duration from 1s to 24h, such as 1m")
	}
	return Rate{Requests: req, Window: win}, nil
}

// Limiter counts requests per key with httprate's sliding-window counter. It
// is per process: with N replicas behind a load balancer a client gets up to
// N times the budget, which is fine for what it is for (bounding abuse and
// brute force), not for billing. A nil *Limiter allows everything.
type Limiter struct {
	rl   *httprate.RateLimiter
	rate Rate
}

// NewLimiter returns a Limiter for r, or nil when r is off.
func NewLimiter(r Rate) *Limiter {
	if r.Off() {
		return nil
	}
	return &Limiter{rate: r, rl: httprate.NewRateLimiter(r.Requests, r.Window,
		// No headers from httprate at all: the remaining budget of a key is
		// nobody else's business, and Retry-After travels on the *Error that
		// Allow returns, which the error adapter adds to the answer. Were
		// httprate to set it on the writer too, the answer would carry it twice.
		httprate.WithResponseHeaders(httprate.ResponseHeaders{}))}
}

// Allow counts one request for key and returns nil, or, once key's budget is
// spent, a 429 "rate_limited" *Error carrying Retry-After (the whole window, as
// httprate would say: a sliding window has no exact reset time). Nothing is
// set on w: writing the *Error adds the header, once. Keys should not be
// secrets: hash them first (KeyOf).
func (l *Limiter) Allow(w http.ResponseWriter, r *http.Request, key string) error {
	if l == nil {
		return nil
	}
	if !l.rl.OnLimit(w, r, key) {
		return nil
	}
	retry := strconv.Itoa(max(1, int(l.rate.Window/time.Second)))
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Description: "Too many requests. Wait " + retry + " seconds and try again.",
		Header:      http.Header{"Retry-After": {retry}},
		Err:         fmt.Errorf("rate limit %s exceeded", l.rate)}
}

// KeyOf turns a secret (a client key) into a rate-limit key that is safe to
// keep in memory and cannot be turned back into the secret.
func KeyOf(secret string) string {
	h := sha256.Sum256([]byte("connectd/ratelimit/" + secret))
	return hex.EncodeToString(h[:12])
}

// ClientIP returns the address r came from, as a rate-limit key: the TCP peer,
// or, when the peer is one of trusted (the load balancers), the right-most
// X-Forwarded-For entry that is not itself trusted. IPv6 addresses are cut to
// their /64 (one host's whole allocation). Only trusted proxies are believed:
// anyone else can write any X-Forwarded-For.
func ClientIP(r *http.Request, trusted []netip.Prefix) string {
	peer := clientAddr(r, trusted)
	if !peer.IsValid() {
		return r.RemoteAddr
	}
	return httprate.CanonicalizeIP(peer.String())
}

// clientAddr is the TCP peer, or, when the peer is one of trusted, the
// right-most X-Forwarded-For entry that is not itself trusted; invalid when
// RemoteAddr is not an address.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := parseAddr(r.RemoteAddr)
	if peer.IsValid() && isTrusted(peer, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a := parseAddr(strings.TrimSpace(hops[i]))
			if !a.IsValid() {
				break // a malformed hop: stop believing what lies further left
			}
			peer = a
			if !isTrusted(a, trusted) {
				break
			}
		}
	}
	return peer
}

func parseAddr(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// RateLimits are the request budgets of the public listener by route class.
// Every limit counts per replica (see Limiter).
type RateLimits struct {
	// API is per client key on /v1/ (requests without a bearer key count
	// per client IP instead).
	API Rate
	// APIPerIP is per client IP on /v1/, on top of API: it bounds a caller
	// who sprays made-up client keys to get a fresh budget for each.
	APIPerIP Rate
	// Browser is per client IP on the browser pages: /c/..., /oauth/callback,
	// /session, /logout, the admin pages and anything else not listed here.
	Browser Rate
	// Login is per client IP on /login and /login/callback.
	Login Rate
	// TrustedProxies are the load balancers whose X-Forwarded-For is
	// believed (see ClientIP).
	TrustedProxies []netip.Prefix
}

// RouteClass names which budget a request draws from.
type RouteClass string

// Route classes of the public listener.
const (
	ClassNone    RouteClass = ""        // probes and static assets: not limited
	ClassAPI     RouteClass = "api"     // the /v1 API: per client key, with a per-IP ceiling
	ClassLogin   RouteClass = "login"   // sign-in routes: per client IP, tightly
	ClassBrowser RouteClass = "browser" // every other page: per client IP
)

// RateLimit enforces c on every request: 429 with Retry-After and the JSON
// envelope (/v1) or the error page (browsers) once a budget is spent. Per-user
// limits that need an authenticated user (minting) are applied by the handler
// with its own Limiter.
func RateLimit(c RateLimits, logger *slog.Logger) func(http.Handler) http.Handler {
	api, apiIP := NewLimiter(c.API), NewLimiter(c.APIPerIP)
	browser, login := NewLimiter(c.Browser), NewLimiter(c.Login)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var err error
			_, class := RouteOf(r)
			switch class {
			case ClassAPI:
				ip := ClientIP(r, c.TrustedProxies)
				ipKey := "ip:" + ip
				err = apiIP.Allow(w, r, ipKey)
				if err == nil {
					key := ipKey
					if cred, ok := clientauth.ClientCredential(r.Header.Get("Authorization")); ok {
						key = "key:" + KeyOf(cred)
						// A client assertion is new on every call: its
						// budget is its (unverified) client's from this
						// address, so fresh assertions get no fresh budget
						// and a forged iss spends only its sender's share.
						if clientauth.LooksLikeAssertion(cred) {
							if iss, ok := clientauth.AssertionIssuer(cred); ok {
								key = "jwt:" + KeyOf(iss+"\x00"+ip)
							}
						}
					}
					err = api.Allow(w, r, key)
				}
			case ClassLogin:
				err = login.Allow(w, r, ClientIP(r, c.TrustedProxies))
			case ClassBrowser:
				err = browser.Allow(w, r, ClientIP(r, c.TrustedProxies))
			}
			if err != nil {
				WriteError(w, r, logger, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
