package jose_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/connectd/connectd/internal/jose"
)

// hangingJWKS serves a JWK Set of one EC key on its first fetch and hangs
// every later fetch until the test ends (or the fetch is given up): a JWKS
// endpoint that accepts connections and never answers.
type hangingJWKS struct {
	srv     *httptest.Server
	fetches atomic.Int64 // fetches that hung
	release chan struct{}
	serveOK atomic.Bool
}

func newHangingJWKS(t *testing.T, firstAnswers bool) *hangingJWKS {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	doc := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig","alg":"ES256","x":%q,"y":%q}]}`,
		b64(k.X.FillBytes(make([]byte, 32))), b64(k.Y.FillBytes(make([]byte, 32))))
	h := &hangingJWKS{release: make(chan struct{})}
	h.serveOK.Store(firstAnswers)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.serveOK.CompareAndSwap(true, false) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, doc)
			return
		}
		h.fetches.Add(1)
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(h.release); h.srv.Close() })
	return h
}

// TestHangingJWKS: while a JWKS hangs, callers share the one fetch in
// flight and each gets its answer — 503 kind ErrUnavailable with a
// Retry-After — while that fetch still hangs (it can end only when the test
// releases it, or at the cache's fetch timeout of an hour): unknown-kid
// tokens, forged ones included, and a set never fetched alike. Before, each
// waited for the fetch to end (10 s at connectd's default timeout).
func TestHangingJWKS(t *testing.T) {
	t.Parallel()
	const callers = 32
	for _, tc := range []struct {
		name         string
		firstAnswers bool // the set was fetched once; its later fetches hang
		call         func(ctx context.Context, s *jose.Set, iat time.Time) error
	}{
		{"unknown kids after a good fetch", true, func(ctx context.Context, s *jose.Set, iat time.Time) error {
			return s.UnknownKey(ctx, jwt.NewNumericDate(iat), func() bool { return false })
		}},
		{"a set never fetched", false, func(ctx context.Context, s *jose.Set, _ time.Time) error {
			return s.Keys(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHangingJWKS(t, tc.firstAnswers)
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			c := jose.NewCache(jose.CacheConfig{Client: h.srv.Client(), Lifetime: time.Hour,
				UnknownKeyInterval: time.Minute, Skew: time.Minute, Timeout: time.Hour, MaxSets: 10,
				Now: clock, Logger: slog.New(slog.DiscardHandler), What: "issuer"})
			t.Cleanup(c.Close)
			s := c.Set(h.srv.URL)
			if tc.firstAnswers {
				if err := s.Keys(context.Background()); err != nil {
					t.Fatalf("first fetch: %v", err)
				}
				mu.Lock()
				now = now.Add(2 * time.Minute) // an unknown kid may bring a fetch forward
				mu.Unlock()
			}
			iat := clock() // newer than the set: the kid may have been published since
			errs := make(chan error, callers)
			for range callers {
				go func() { errs <- tc.call(context.Background(), s, iat) }()
			}
			for range callers {
				err := <-errs
				if !errors.Is(err, jose.ErrUnavailable) {
					t.Fatalf("answer while the JWKS hangs: %v, want ErrUnavailable", err)
				}
				if d, ok := jose.RetryAfter(err); !ok || d < time.Second {
					t.Fatalf("Retry-After %s (%t), want at least a second", d, ok)
				}
			}
			// Every caller was answered, and the fetch they shared still
			// hangs: nothing released it, and its timeout is an hour.
			select {
			case <-h.release:
				t.Fatal("released before the answers")
			default:
			}
			for h.fetches.Load() == 0 { // the request may reach the server after the answers
				time.Sleep(time.Millisecond)
			}
			if n := h.fetches.Load(); n != 1 {
				t.Fatalf("%d fetches of the hanging JWKS for %d callers, want 1 shared", n, callers)
			}
		})
	}
}
