package clientauth_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/mcpauth/mcpauthtest"
	"github.com/connectd/connectd/internal/servertest"
)

// dpopPath is the /v1 call the DPoP tests make: it answers 200 once both
// the client and the user are authenticated.
const dpopPath = "/v1/connections"

// proof is a DPoP proof (RFC 9449) by k for method at u bound to the
// Authorization credential cred (ath), issued at now, its public key in
// the header; mod edits header and claims before signing.
func (k *signingKey) proof(t *testing.T, method, u, cred string, now time.Time, mod func(h map[string]any, c jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"htm": method, "htu": u, "iat": now.Unix(), "jti": rand.Text(), "ath": clientauth.AccessTokenHash(cred)}
	tok := jwt.NewWithClaims(k.method, c)
	tok.Header["typ"] = "dpop+jwt"
	jwk, err := jwkset.NewJWKFromKey(k.priv.Public(), jwkset.JWKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok.Header["jwk"] = jwk.Marshal()
	if mod != nil {
		mod(tok.Header, c)
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dpopEnv is a connectd with two clients holding a registered key: one that
// requires DPoP, one that does not.
type dpopEnv struct {
	env             *servertest.Env
	key             *signingKey
	required, plain string // the clients' keys
	requiredUser    string // a user token for their resource
}

func newDPoPEnv(t *testing.T) *dpopEnv {
	t.Helper()
	e := servertest.New(t, servertest.Options{})
	d := &dpopEnv{env: e, key: newKey(t, "", "ES256")}
	ctx := context.Background()
	var req, plain clientauth.Client
	req, d.required = e.NewClient("Required", []string{mcpauthtest.Resource}, []string{"fake"})
	plain, d.plain = e.NewClient("Plain", []string{mcpauthtest.OtherResource}, []string{"fake"})
	for _, id := range []string{req.ID, plain.ID} {
		if err := e.Server.Clients().SetAssertionKeys(ctx, id, clientauth.AssertionKeys{PublicKey: d.key.pem(t)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Server.Clients().SetDPoPRequired(ctx, req.ID, true); err != nil {
		t.Fatal(err)
	}
	tok, err := e.IdPs[0].AccessToken("alice", mcpauthtest.Resource, mcpauthtest.OtherResource)
	if err != nil {
		t.Fatal(err)
	}
	d.requiredUser = tok
	return d
}

// call sends GET dpopPath to base with the Authorization header authz and
// the DPoP headers proofs.
func (d *dpopEnv) call(t *testing.T, base, authz string, proofs ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+dpopPath, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	req.Header.Set(mcpauth.UserTokenHeader, d.requiredUser)
	for _, p := range proofs {
		req.Header.Add(clientauth.DPoPHeader, p)
	}
	resp, err := d.env.Public.Client().Do(req)
	if err != nil {
		t.Error(err) // not Fatal: called from goroutines too
		return 0, nil, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// TestDPoPProofs (issue 33): what a DPoP proof must be on /v1, each attack
// of the security review as a request; the DPoP authorization scheme (what
// a standard DPoP client sends) is the Bearer scheme's equal once a proof
// comes with it; refusals are challenged as RFC 9449 §7.1 says.
func TestDPoPProofs(t *testing.T) {
	t.Parallel()
	d := newDPoPEnv(t)
	u := d.env.URL + dpopPath
	now := d.env.Clock.Now()
	k := d.key
	good := func(cred string) string { return k.proof(t, "GET", u, cred, now, nil) }

	for _, tt := range []struct {
		name   string
		authz  string
		proofs []string
		status int
		code   string
	}{
		{"Bearer with a proof", "Bearer " + d.required, []string{good(d.required)}, 200, ""},
		{"the DPoP scheme with a proof", "DPoP " + d.required, []string{good(d.required)}, 200, ""},
		{"the DPoP scheme, a client that does not require it", "DPoP " + d.plain, []string{good(d.plain)}, 200, ""},
		{"the DPoP scheme without a proof", "DPoP " + d.plain, nil, 401, "invalid_dpop_proof"},
		{"the DPoP scheme, a proof by another key", "DPoP " + d.plain,
			[]string{newKey(t, "", "ES256").proof(t, "GET", u, d.plain, now, nil)}, 401, "invalid_dpop_proof"},
		{"required, no proof", "Bearer " + d.required, nil, 401, "invalid_dpop_proof"},
		{"two DPoP headers", "Bearer " + d.required, []string{good(d.required), good(d.required)}, 401, "invalid_dpop_proof"},
		{"two DPoP headers, the DPoP scheme", "DPoP " + d.plain, []string{good(d.plain), good(d.plain)}, 401, "invalid_dpop_proof"},
		{"no ath", "Bearer " + d.required, []string{k.proof(t, "GET", u, d.required, now,
			func(_ map[string]any, c jwt.MapClaims) { delete(c, "ath") })}, 401, "invalid_dpop_proof"},
		{"ath of another credential", "Bearer " + d.required, []string{good(d.plain)}, 401, "invalid_dpop_proof"},
		{"ath of the user token", "Bearer " + d.required, []string{good(d.requiredUser)}, 401, "invalid_dpop_proof"},
		{"ath not base64url", "Bearer " + d.required, []string{k.proof(t, "GET", u, d.required, now,
			func(_ map[string]any, c jwt.MapClaims) { c["ath"] = "!" })}, 401, "invalid_dpop_proof"},
		{"an unknown crit header", "Bearer " + d.required, []string{k.proof(t, "GET", u, d.required, now,
			func(h map[string]any, _ jwt.MapClaims) { h["crit"] = []string{"exp"}; h["exp"] = now.Unix() })}, 401, "invalid_dpop_proof"},
		{"typ JWT", "Bearer " + d.required, []string{k.proof(t, "GET", u, d.required, now,
			func(h map[string]any, _ jwt.MapClaims) { h["typ"] = "JWT" })}, 401, "invalid_dpop_proof"},
		{"no typ", "Bearer " + d.required, []string{k.proof(t, "GET", u, d.required, now,
			func(h map[string]any, _ jwt.MapClaims) { delete(h, "typ") })}, 401, "invalid_dpop_proof"},
		{"an unknown scheme", "Basic " + d.required, []string{good(d.required)}, 401, "invalid_client"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, h, out := d.call(t, d.env.URL, tt.authz, tt.proofs...)
			if st != tt.status || tt.code != "" && out["error"] != tt.code {
				t.Fatalf("got %d %v, want %d %s", st, out, tt.status, tt.code)
			}
			challenges := h.Values("WWW-Authenticate")
			switch tt.code {
			case "invalid_dpop_proof":
				if len(challenges) != 1 || !strings.HasPrefix(challenges[0], `DPoP realm="connectd", error="invalid_dpop_proof", algs="`) {
					t.Fatalf("challenges %q", challenges)
				}
			case "invalid_client":
				if !slices.ContainsFunc(challenges, func(c string) bool { return strings.HasPrefix(c, "Bearer ") }) ||
					!slices.ContainsFunc(challenges, func(c string) bool { return strings.HasPrefix(c, `DPoP realm="connectd", algs="`) }) {
					t.Fatalf("challenges %q, want Bearer and DPoP", challenges)
				}
			}
		})
	}

	t.Run("replayed", func(t *testing.T) {
		p := good(d.required)
		if st, _, out := d.call(t, d.env.URL, "DPoP "+d.required, p); st != 200 {
			t.Fatalf("%d %v", st, out)
		}
		if st, _, out := d.call(t, d.env.URL, "DPoP "+d.required, p); st != 401 || out["error"] != "invalid_dpop_proof" {
			t.Fatalf("a replayed proof: %d %v", st, out)
		}
	})
}

// TestDPoPReplayAcrossReplicas (issue 33): the same proof sent at once to
// two replicas on one database, round after round, is answered 200 exactly
// once: its jti is spent by one insert before anything is answered.
func TestDPoPReplayAcrossReplicas(t *testing.T) {
	t.Parallel()
	d := newDPoPEnv(t)
	pool, err := pgxpool.New(context.Background(), d.env.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg := d.env.Config
	cfg.Pool, cfg.Logger = pool, slog.New(slog.DiscardHandler)
	_, other := d.env.Replica(cfg)
	bases := []string{d.env.URL, other}
	u := d.env.URL + dpopPath
	for round := range 50 {
		p := d.key.proof(t, "GET", u, d.required, d.env.Clock.Now(), nil)
		n := 2 + round%3 // 2-4 at once, spread over both replicas
		statuses := make([]int, n)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				statuses[i], _, _ = d.call(t, bases[i%2], "Bearer "+d.required, p)
			}()
		}
		start.Done()
		done.Wait()
		if ok := slices.DeleteFunc(slices.Clone(statuses), func(s int) bool { return s != 200 }); len(ok) != 1 ||
			slices.ContainsFunc(statuses, func(s int) bool { return s != 200 && s != 401 }) {
			t.Fatalf("round %d: %v, want one 200 and the rest 401", round, statuses)
		}
	}
}
