package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

const (
	// minKeysLifetime is the least time a JWKS answer is used, whatever its
	// Cache-Control or Expires say: an issuer answering max-age=0 is fetched
	// once a minute, not on every request.
	minKeysLifetime = time.Minute
	// maxBackoff caps the wait between two attempts at a failing JWKS.
	maxBackoff = time.Minute
)

// keySet is one issuer's JWKS: the keys keyfunc reads, and when to fetch them
// again. jwkset's own HTTP storage refreshes on a fixed ticker, ignores cache
// headers, retries a failure only a whole interval later and keeps its fetch
// unexported; so the fetch is here, and jwkset only parses and stores keys.
//
// A fetch is due when the last answer's lifetime ends (RefreshInterval, or
// sooner when its Cache-Control max-age or Expires says so, but never sooner
// than minKeysLifetime) or, after a failure, on a backoff from
// UnknownKIDInterval doubling up to maxBackoff. A token whose kid the set
// lacks may bring a fetch forward, at most once per UnknownKIDInterval after
// the last fetch of any kind, and only if the token could be newer than the
// set: one issued before the last good fetch started names a key the issuer
// had not published, and is refused without a fetch. Its iat is unverified
// then, which is fine: it only chooses between fetching, 503 and 401, never
// acceptance. So a flood of made-up kids costs at most one fetch per
// interval, and a rotated key is found within one interval whatever the flood
// does: that fetch brings it, whoever triggered it.
//
// Fetches run one at a time, in their own goroutine on the Verifier's context
// (one caller giving up does not fail the fetch the others wait for); a
// caller that needs a fetch while one runs waits for that one.
type keySet struct {
	v     *Verifier
	id    string // the issuer's, for logs and errors
	url   string
	store *jwkset.MemoryJWKSet

	mu       sync.Mutex
	fetching chan struct{} // non-nil while a fetch runs; closed when it ends
	tried    time.Time     // when the last fetch started
	fetched  time.Time     // when the last good fetch started
	ok       bool          // the last fetch succeeded
	failures int           // fetches failed in a row
	due      time.Time     // when the next fetch is due
}

// maintain starts a fetch when one is due. It waits for it only when the set
// has never been fetched or its last answer merely expired (a key may have
// been revoked since); while the issuer is failing, the cached keys keep
// verifying and the retry runs in the background, so no request waits for a
// timeout on every backoff.
func (s *keySet) maintain(ctx context.Context) {
	s.mu.Lock()
	done := s.fetching
	if done == nil {
		if s.v.now().Before(s.due) {
			s.mu.Unlock()
			return
		}
		done = s.start()
	}
	wait := s.ok || (s.fetched.IsZero() && s.failures == 0)
	s.mu.Unlock()
	if wait {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
}

// unknownKID is called for a token whose kid is not in the set. It returns nil
// once a fetch has brought the kid, ErrSignature when the issuer does not
// publish it, or an *unavailableError when the set cannot be brought up to
// date now.
func (s *keySet) unknownKID(ctx context.Context, kid string, iat *jwt.NumericDate) error {
	if iat == nil {
		return fmt.Errorf("%w: sub and iat are required", ErrMalformedToken) // refused anyway
	}
	s.mu.Lock()
	// iat has whole seconds: a second on top of the skew.
	if !s.fetched.IsZero() && s.fetched.After(iat.Add(s.v.skew+time.Second)) {
		s.mu.Unlock()
		return ErrSignature
	}
	done := s.fetching
	if done == nil {
		if wait := s.tried.Add(s.v.unknownKIDInterval).Sub(s.v.now()); wait > 0 {
			s.mu.Unlock()
			return unavailable(wait, "issuer %s: unknown kid; its JWKS was fetched less than %s ago", s.id, s.v.unknownKIDInterval)
		}
		done = s.start()
	}
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return unavailable(s.v.unknownKIDInterval, "issuer %s: waiting for its JWKS: %w", s.id, ctx.Err())
	}
	if _, err := s.store.KeyRead(ctx, kid); err == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok {
		return ErrSignature
	}
	return unavailable(s.tried.Add(s.v.unknownKIDInterval).Sub(s.v.now()), "issuer %s: JWKS unreachable", s.id)
}

// healthy reports whether the last fetch succeeded, which tells "unknown
// key" (401) from "keys unreachable" (503).
func (s *keySet) healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok
}

// retryIn is how long until the next fetch is due.
func (s *keySet) retryIn() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.due.Sub(s.v.now())
}

// start begins a fetch and returns the channel closed when it ends; s.mu is
// held.
func (s *keySet) start() chan struct{} {
	done := make(chan struct{})
	started := s.v.now()
	s.fetching, s.tried = done, started
	go func() {
		h, err := s.fetch()
		s.mu.Lock()
		defer s.mu.Unlock()
		defer close(done)
		s.fetching = nil
		now := s.v.now()
		if err != nil {
			s.ok = false
			s.failures++
			s.due = now.Add(s.backoff())
			if s.v.ctx.Err() == nil { // not merely Close
				s.v.logger.WarnContext(s.v.ctx, "JWKS fetch failed", slog.String("issuer", s.id),
					slog.Int("failures", s.failures), slog.Any("error", err))
			}
			return
		}
		s.ok, s.failures, s.fetched = true, 0, started
		s.due = now.Add(s.v.lifetime(h, now))
	}()
	return done
}

// backoff is the wait after s.failures failed fetches in a row: the
// unknown-kid interval, doubled per further failure, at most maxBackoff (or
// RefreshInterval when that is shorter); s.mu is held.
func (s *keySet) backoff() time.Duration {
	d := s.v.unknownKIDInterval
	for i := 1; i < s.failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff, s.v.refreshInterval)
}

// fetch GETs the JWKS through the guarded client and replaces the stored keys
// with its keys. It returns the answer's headers, which say how long it may be
// used.
func (s *keySet) fetch() (http.Header, error) {
	ctx, cancel := context.WithTimeout(s.v.ctx, s.v.httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.v.client.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET %s: HTTP %d", s.url, resp.StatusCode)
	}
	var doc jwkset.JWKSMarshal
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	keys := make([]jwkset.JWK, 0, len(doc.Keys))
	for _, m := range doc.Keys {
		// As jwkset's HTTP storage does: a key of a type it does not support
		// is skipped, any other bad key fails the whole answer.
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue
		case err != nil:
			return nil, fmt.Errorf("GET %s: %w", s.url, err)
		}
		keys = append(keys, k)
	}
	if err := s.store.KeyReplaceAll(ctx, keys); err != nil {
		return nil, err
	}
	return resp.Header, nil
}

// lifetime is how long a JWKS answer received at now may be used:
// RefreshInterval, or less when its Cache-Control max-age (minus its Age) or,
// without max-age, its Expires says so (RFC 9111 §4.2.1), but never less than
// minKeysLifetime. no-cache and no-store count as max-age=0.
func (v *Verifier) lifetime(h http.Header, now time.Time) time.Duration {
	fresh, ok := freshness(h, now)
	if !ok {
		return v.refreshInterval
	}
	return min(v.refreshInterval, max(fresh, minKeysLifetime))
}

// freshness is what is left of the answer's freshness lifetime, if its
// headers give one.
func freshness(h http.Header, now time.Time) (time.Duration, bool) {
	maxAge, haveMaxAge := int64(0), false
	for _, cc := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(cc, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-cache", "no-store":
				return 0, true
			case "max-age":
				if secs, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 32); err == nil {
					maxAge, haveMaxAge = secs, true
				}
			}
		}
	}
	if haveMaxAge {
		age, _ := strconv.ParseInt(h.Get("Age"), 10, 32)
		return time.Duration(maxAge-max(age, 0)) * time.Second, true
	}
	e := h.Get("Expires")
	if e == "" {
		return 0, false
	}
	expires, err := http.ParseTime(e)
	if err != nil {
		return 0, true // an invalid Expires means already expired
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date // the issuer's clock on both sides
	}
	return expires.Sub(now), true
}
