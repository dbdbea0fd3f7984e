package mcpauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/pgtest"
)

// TestLoginRefusesIssuerWithoutS256: an issuer whose metadata offers PKCE
// only as "plain" is not used for browser login (no downgrade of the
// challenge); with S256 on offer the authorize URL carries an S256 challenge.
func TestLoginRefusesIssuerWithoutS256(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, methods := range [][]string{{"plain"}, {"S256"}} {
		mux := http.NewServeMux()
		srv := httptest.NewTLSServer(mux)
		t.Cleanup(srv.Close)
		p, err := devidp.New(devidp.Config{Issuer: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		h := p.Handler()
		mux.Handle("/", h)
		mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var doc map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &doc)
			doc["code_challenge_methods_supported"] = methods
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
		})
		v := mcpauthtest.NewVerifier(t, mcpauth.VerifierConfig{Issuers: []mcpauth.Issuer{{ID: "a", URL: srv.URL, Login: true,
			ClientID: "connectd", ClientSecret: "s"}}})
		l, err := mcpauth.NewLogin(mcpauth.LoginConfig{Pool: pool, Verifier: v, RedirectURL: "https://connect.example.com/login/callback"})
		if err != nil {
			t.Fatal(err)
		}
		binding := make([]byte, 32)
		u, err := l.Start(context.Background(), "a", "/", binding, false)
		switch methods[0] {
		case "plain":
			if !errors.Is(err, mcpauth.ErrIssuerUnavailable) {
				t.Fatalf("issuer without S256: %v %s", err, u)
			}
		default:
			if err != nil {
				t.Fatal(err)
			}
			if q := mustQuery(t, u); q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
				t.Fatalf("authorize URL %s", u)
			}
		}
	}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}
