package jose

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

const (
	// minKeysLifetime is the least time a JWKS answer is used, whatever its
	// Cache-Control or Expires say: an issuer answering max-age=0 is fetched
	// once a minute, not on every request.
	minKeysLifetime = time.Minute
	// maxBackoff caps the wait between two attempts at a failing JWKS.
	maxBackoff = time.Minute
	// maxStaleKeys is how long past the end of its answer's lifetime a
	// JWK Set keeps verifying while its URL fails (RFC 5861's
	// stale-if-error): a key taken off the JWKS — a leaked one — must stop
	// verifying even while someone keeps the URL failing. The same bound for
	// issuers and clients.
	maxStaleKeys = time.Hour
	// maxFetchWait is how long after a fetch started its callers wait for
	// it (their own, or another's they share). A JWKS that hangs is
	// fetched until the cache's Timeout in the background, once, while
	// each caller gets its answer within this: the keys it has, a 503 kind
	// ErrUnavailable with Retry-After, or an unknown key refused.
	maxFetchWait = 750 * time.Millisecond // and the request's own work within a second
)

// ErrUnknownKey means the key a JWT names (its kid, or a DPoP proof's jwk)
// is not in a JWK Set that is up to date for it; each caller answers it
// with its own sentinel (ErrSignature, ErrInvalidAssertion, ErrInvalidDPoP).
var ErrUnknownKey = errors.New("mcpauth: no such key in the JWK Set")

// CacheConfig configures a Cache.
type CacheConfig struct {
	Client *http.Client // bounded (egress.Bound), guarded by the caller's transport
	// Lifetime is the longest a JWKS answer is used before it is fetched
	// again; its Cache-Control max-age or Expires may make it shorter, down
	// to minKeysLifetime.
	Lifetime time.Duration
	// UnknownKeyInterval is the least time between a fetch and one brought
	// forward by an unknown key; also the first retry after a failure,
	// doubling up to maxBackoff.
	UnknownKeyInterval time.Duration
	Skew               time.Duration // tolerated on a JWT's iat
	Timeout            time.Duration // of one fetch
	MaxSets            int           // URLs remembered at most
	Now                func() time.Time
	Logger             *slog.Logger
	What               string // "issuer" or "client", for logs and errors
}

// Cache is the one JWKS cache, by URL: the keys of trusted issuers (user
// tokens) and of the JWKS URLs clients register (private_key_jwt
// assertions, DPoP proofs), under one policy (Set). It holds public keys
// only: an answer with a private or symmetric key is refused whole. Its
// fetches run on its own context, which close ends.
type Cache struct {
	CacheConfig
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	sets map[string]*Set
}

func NewCache(cfg CacheConfig) *Cache {
	c := &Cache{CacheConfig: cfg, sets: map[string]*Set{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Close ends the fetches under way.
func (c *Cache) Close() { c.cancel() }

// Set is u's keys, created (unfetched) on first use.
func (c *Cache) Set(u string) *Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sets[u]
	if s == nil {
		if len(c.sets) >= c.MaxSets {
			for k := range c.sets { // any one: a bound, not a policy
				delete(c.sets, k)
				break
			}
		}
		s = &Set{c: c, url: u, store: jwkset.NewMemoryStorage()}
		// Keys marked for encryption never verify signatures.
		kf, err := keyfunc.New(keyfunc.Options{Ctx: c.ctx, Storage: s.store,
			UseWhitelist: []jwkset.USE{jwkset.UseSig, jwkset.USE("")}})
		if err != nil { // only for a nil storage
			panic(err)
		}
		s.kf = kf
		c.sets[u] = s
	}
	return s
}

// Set is one JWKS URL's keys: what keyfunc reads, and when to fetch them
// again. jwkset's own HTTP storage refreshes on a fixed ticker, ignores cache
// headers, retries a failure only a whole interval later and keeps its fetch
// unexported; so the fetch is here, and jwkset only parses and stores keys.
//
// A fetch is due when the last answer's lifetime ends (the cache's lifetime,
// or sooner when its Cache-Control max-age or Expires says so, but never
// sooner than minKeysLifetime) or, after a failure, on a backoff from
// unknownKeyInterval doubling up to maxBackoff. While the URL fails, the
// last keys keep verifying for maxStaleKeys past that lifetime at most;
// after that, or before any good fetch, a JWT is neither accepted nor
// refused (503). A JWT whose key the set lacks may bring a fetch forward,
// at most once per unknownKeyInterval after the last fetch of any kind, and
// only if the JWT could be newer than the set: one issued before the last
// good fetch started names a key that was not published, and is refused
// without a fetch. Its iat is unverified then, which is fine: it only
// chooses between fetching, 503 and 401, never acceptance. So a flood of
// made-up kids costs at most one fetch per interval, and a rotated key is
// found within one interval whatever the flood does: that fetch brings it,
// whoever triggered it.
//
// Fetches run one at a time, in their own goroutine on the cache's context
// (one caller giving up does not fail the fetch the others wait for); a
// caller that needs a fetch while one runs waits for that one, until
// maxFetchWait after it started: a JWKS that hangs costs each caller at
// most 750 ms (an answer within a second), not the fetch's timeout, whoever triggered the fetch
// (forged kids included), and a fetch an unknown key brought forward is
// not waited for by callers whose keys the set has.
type Set struct {
	c     *Cache
	url   string
	store *jwkset.MemoryJWKSet
	kf    keyfunc.Keyfunc // over store

	mu         sync.Mutex
	fetching   chan struct{} // non-nil while a fetch runs; closed when it ends
	tried      time.Time     // when the last fetch started
	fetched    time.Time     // when the last good fetch started
	freshUntil time.Time     // when the last good answer's lifetime ends
	ok         bool          // the last fetch succeeded
	failures   int           // fetches failed in a row
	due        time.Time     // when the next fetch is due
	waitUntil  time.Time     // the fetch under way is waited for until then (real time: maxFetchWait after it started)
}

// Keys makes the set as current as it must be for a JWT to be verified
// now, and says whether its keys may verify: nil, or an *unavailableError
// (never fetched, or failing past maxStaleKeys).
func (s *Set) Keys(ctx context.Context) error {
	s.maintain(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usable(s.c.Now()) {
		return nil
	}
	return Unavailable(max(s.due.Sub(s.c.Now()), time.Second), "%s JWKS %s: unreachable", s.c.What, s.url)
}

// usable reports whether the keys may verify at now: fetched, and within
// maxStaleKeys of their answer's lifetime; s.mu is held.
func (s *Set) usable(now time.Time) bool {
	return !s.fetched.IsZero() && !now.After(s.freshUntil.Add(maxStaleKeys))
}

// maintain starts a fetch when one is due — or, when no key may verify,
// once per unknownKeyInterval whatever the backoff (as an unknown key
// would). It waits for it when the set has never been fetched, its last
// answer merely expired (a key may have been revoked since), or its keys
// may no longer verify; while the URL is failing and the cached keys still
// may, the retry runs in the background, so no request waits for a timeout
// on every backoff.
func (s *Set) maintain(ctx context.Context) {
	s.mu.Lock()
	now := s.c.Now()
	done := s.fetching
	if done == nil {
		if now.Before(s.due) && (s.usable(now) || now.Before(s.tried.Add(s.c.UnknownKeyInterval))) {
			s.mu.Unlock()
			return
		}
		done = s.start()
	}
	// A fetch an unknown key brought forward, before the answer's lifetime
	// ends, is not waited for: the keys the set has are current.
	wait := (s.ok && !now.Before(s.due)) || !s.usable(now)
	until := s.waitUntil
	s.mu.Unlock()
	if wait {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-done:
		case <-ctx.Done():
		case <-t.C: // Keys decides on the keys as they are
		}
	}
}

// Keyfunc is the jwt.Keyfunc over the set: a kid not in it is UnknownKey's
// to decide on — fetched now, at most once per interval; refused
// (ErrUnknownKey) when the set is newer than the JWT; or 503 until a fetch
// is allowed. That verdict is left in *verdict, to be returned as it is.
func (s *Set) Keyfunc(ctx context.Context, verdict *error) jwt.Keyfunc {
	inner := s.kf.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		if kid, ok := t.Header["kid"].(string); ok {
			if _, err := s.store.KeyRead(ctx, kid); err != nil {
				iat, _ := t.Claims.GetIssuedAt()
				if err := s.UnknownKey(ctx, iat, func() bool { _, err := s.store.KeyRead(ctx, kid); return err == nil }); err != nil {
					*verdict = err
					return nil, err
				}
			}
		}
		return inner(t)
	}
}

// Verifying lists the set's keys that may verify signatures (not marked
// for encryption).
func (s *Set) Verifying(ctx context.Context) ([]jwkset.JWK, error) {
	all, err := s.store.KeyReadAll(ctx)
	return slices.DeleteFunc(all, func(k jwkset.JWK) bool { u := k.Marshal().USE; return u != jwkset.UseSig && u != "" }), err
}

// UnknownKey is called for a JWT issued at iat whose key is not in the set.
// It returns nil once a fetch has brought a key that has says is the one,
// ErrUnknownKey when the set is up to date and lacks it, or an
// *unavailableError when the set cannot be brought up to date now.
func (s *Set) UnknownKey(ctx context.Context, iat *jwt.NumericDate, has func() bool) error {
	if iat == nil {
		return fmt.Errorf("%w: the JWT has no iat", ErrUnknownKey) // refused anyway
	}
	s.mu.Lock()
	// iat has whole seconds: a second on top of the skew.
	if !s.fetched.IsZero() && s.fetched.After(iat.Add(s.c.Skew+time.Second)) {
		s.mu.Unlock()
		return ErrUnknownKey
	}
	done := s.fetching
	if done == nil {
		if wait := s.tried.Add(s.c.UnknownKeyInterval).Sub(s.c.Now()); wait > 0 {
			s.mu.Unlock()
			return Unavailable(wait, "%s JWKS %s: unknown key; fetched less than %s ago", s.c.What, s.url, s.c.UnknownKeyInterval)
		}
		done = s.start()
	}
	until := s.waitUntil
	s.mu.Unlock()
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return Unavailable(s.c.UnknownKeyInterval, "%s JWKS %s: waiting for it: %w", s.c.What, s.url, ctx.Err())
	case <-t.C:
		// The fetch hangs: answer now; it goes on in the background, and
		// its end is when trying again can help.
		s.mu.Lock()
		retry := max(s.tried.Add(s.c.Timeout).Sub(s.c.Now()), time.Second)
		s.mu.Unlock()
		return Unavailable(retry, "%s JWKS %s: unknown key; the fetch under way has not answered within %s", s.c.What, s.url, maxFetchWait)
	}
	if has() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok {
		return ErrUnknownKey
	}
	return Unavailable(s.tried.Add(s.c.UnknownKeyInterval).Sub(s.c.Now()), "%s JWKS %s: unreachable", s.c.What, s.url)
}

// Healthy reports whether the last fetch succeeded, which tells "unknown
// key" (401) from "keys unreachable" (503).
func (s *Set) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok
}

// RetryIn is how long until the next fetch is due.
func (s *Set) RetryIn() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.due.Sub(s.c.Now())
}

// start begins a fetch and returns the channel closed when it ends; s.mu is
// held.
func (s *Set) start() chan struct{} {
	done := make(chan struct{})
	started := s.c.Now()
	s.fetching, s.tried = done, started
	// Every caller waits for this fetch until maxFetchWait after it
	// started, whenever it came: a caller never waits more than that in
	// all (Keys, then UnknownKey), and once the fetch has hung that long
	// the next ones are answered at once.
	s.waitUntil = time.Now().Add(maxFetchWait)
	go func() {
		h, err := s.fetch()
		s.mu.Lock()
		defer s.mu.Unlock()
		defer close(done)
		s.fetching = nil
		now := s.c.Now()
		if err != nil {
			s.ok = false
			s.failures++
			s.due = now.Add(s.backoff())
			if s.c.ctx.Err() == nil { // not merely close
				s.c.Logger.WarnContext(s.c.ctx, "JWKS fetch failed", slog.String("of", s.c.What),
					slog.Int("failures", s.failures), slog.Any("error", err))
			}
			return
		}
		s.ok, s.failures, s.fetched = true, 0, started
		s.due = now.Add(s.c.answerLifetime(h, now))
		s.freshUntil = s.due
	}()
	return done
}

// backoff is the wait after s.failures failed fetches in a row: the
// unknown-key interval, doubled per further failure, at most maxBackoff (or
// the lifetime when that is shorter); s.mu is held.
func (s *Set) backoff() time.Duration {
	d := s.c.UnknownKeyInterval
	for i := 1; i < s.failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff, s.c.Lifetime)
}

// fetch GETs the JWKS through the bounded client and replaces the stored
// keys with its public keys (publicKeys: a private or symmetric key fails the
// whole answer). It returns the answer's headers, which say how long it may
// be used.
func (s *Set) fetch() (http.Header, error) {
	ctx, cancel := context.WithTimeout(s.c.ctx, s.c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.c.Client.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET %s: HTTP %d", s.url, resp.StatusCode)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	keys, err := PublicKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	if err := s.store.KeyReplaceAll(ctx, keys); err != nil {
		return nil, err
	}
	return resp.Header, nil
}

// publicKeys parses a JWK Set — a client's registered one, or any answer
// of the key cache — keeping the public keys of the kinds the allow-list
// can verify with; a symmetric or private key, or none, is an error.
func PublicKeys(raw []byte) ([]jwkset.JWK, error) {
	var doc jwkset.JWKSMarshal
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	var out []jwkset.JWK
	for _, m := range doc.Keys {
		if m.D != "" || m.K != "" {
			return nil, errors.New("a JWK Set here holds public keys only (no private or symmetric key)")
		}
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue
		case err != nil:
			return nil, fmt.Errorf("a key of the JWK Set: %w", err)
		}
		if err := CheckPublic(k.Key()); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, errors.New("the JWK Set has no usable public key")
	}
	return out, nil
}

// checkPublic accepts the public keys the allow-list verifies with: RSA of
// at least 2048 bits, EC, Ed25519.
func CheckPublic(key any) error {
	switch pk := key.(type) {
	case *rsa.PublicKey:
		if pk.N.BitLen() < 2048 {
			return errors.New("an RSA key must have at least 2048 bits")
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return fmt.Errorf("a %T is not a public key connectd verifies assertions with (RSA, EC or Ed25519)", key)
	}
	return nil
}

// answerLifetime is how long a JWKS answer received at now may be used:
// the cache's lifetime, or less when its Cache-Control max-age (minus its
// Age) or, without max-age, its Expires says so (RFC 9111 §4.2.1), but
// never less than minKeysLifetime. no-cache and no-store count as
// max-age=0.
func (c *Cache) answerLifetime(h http.Header, now time.Time) time.Duration {
	fresh, ok := freshness(h, now)
	if !ok {
		return c.Lifetime
	}
	return min(c.Lifetime, max(fresh, minKeysLifetime))
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
