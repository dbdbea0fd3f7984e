package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/web"
)

// These fuzz targets run their seeds as ordinary tests in make test; fuzz
// them further with, e.g.,
//
//	go test -run '^$' -fuzz FuzzOpenRequestState -fuzztime 1m ./internal/api

// fuzzKeyring is fixed (not random) so that request_states sealed by one fuzz
// worker still open in another: the properties below must then hold for them
// too.
func fuzzKeyring(t testing.TB) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse("1:" + base64.StdEncoding.EncodeToString([]byte("connectd fuzz key, not a secret!")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fuzzElicitation is what every fuzz request_state is sealed for.
var fuzzElicitation = &elicitation.Elicitation{ID: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ClientID: "client-1",
	Issuer: "https://issuer.example", Subject: "alice", RequestDigest: "d1"}

// FuzzOpenRequestState: a request_state opens only if it is, byte for byte,
// one connectd sealed: any change to the string (a flipped bit, an inserted
// newline, different padding bits, truncation, another purpose's ciphertext)
// is refused, and what opens is exactly what was sealed.
func FuzzOpenRequestState(f *testing.F) {
	s := &Server{keys: fuzzKeyring(f), now: time.Now, requestStateTTL: time.Hour}
	orig, err := s.sealRequestState(fuzzElicitation)
	if err != nil {
		f.Fatal(err)
	}
	flip := []byte(orig)
	flip[len(flip)/2] ^= 1
	last := []byte(orig)
	last[len(last)-1] = "AQgw"[strings.IndexByte("AQgw", last[len(last)-1])%4] // may only change padding bits
	// Another purpose's ciphertext: a PKCE verifier as package connect
	// binds it (connect's verifierAAD).
	pkce, _ := s.keys.Seal([]byte("verifier"), keyring.Binding("connectd/pkce_verifier/v1", "state-hash"))
	other, _ := keyring.Parse("1:" + base64.StdEncoding.EncodeToString([]byte("another key, 32 bytes long......")))
	foreign, _ := (&Server{keys: other, now: time.Now, requestStateTTL: time.Hour}).sealRequestState(fuzzElicitation)
	for _, seed := range []string{
		orig, string(flip), string(last), orig[:len(orig)-1], orig + "A", orig + "\n",
		orig[:20] + "\n" + orig[20:], orig[:20] + "\r" + orig[20:], strings.Replace(orig, "rs1.", "rs2.", 1),
		"rs1." + base64.RawURLEncoding.EncodeToString(pkce), foreign, "rs1.", "", "rs1.=", "rs1.AAAA",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		rs, err := s.openRequestState(raw)
		if err != nil {
			if !errors.Is(err, refusal.ErrStateInvalid) {
				t.Fatalf("unexpected error class %v", err)
			}
			return
		}
		// It opened: it must be the canonical spelling of an authentic
		// ciphertext (so exactly the string connectd handed out) ...
		ct, derr := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(raw, requestStatePrefix))
		if derr != nil || requestStatePrefix+base64.RawURLEncoding.EncodeToString(ct) != raw {
			t.Fatalf("a modified spelling opened: %q", raw)
		}
		// ... and say exactly what was sealed.
		e := fuzzElicitation
		if rs.ClientID != e.ClientID || rs.Issuer != e.Issuer || rs.Subject != e.Subject ||
			rs.Elicitation != e.ID || rs.Digest != e.RequestDigest || rs.ID == "" {
			t.Fatalf("opened into something never sealed: %+v", rs)
		}
	})
}

// rfc6749ScopeToken is RFC 6749 §3.3 scope-token, written out independently
// of scope.Valid: printable ASCII except space, '"' and '\'.
var rfc6749ScopeToken = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`)

// FuzzAPIBodies: the /v1 JSON bodies decode strictly (see web.DecodeJSON) and
// what decodes is then held to the API's own limits before any use.
func FuzzAPIBodies(f *testing.F) {
	for _, s := range []string{
		`{"provider":"github","scopes":["repo"],"message":"m","request_digest":"d"}`,
		`{"provider":"github","provider":"evil"}`, `{"Provider":"github"}`, `{"scopes":["a b"]}`,
		`{"request_state":"rs1.x","request_digest":"d"}`, `{"request_state":1}`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m mintRequest
		if err := web.DecodeJSONBytes(raw, &m); err == nil {
			if validScopes(m.Scopes) == nil {
				for _, sc := range dedupe(m.Scopes) {
					if !rfc6749ScopeToken.MatchString(sc) || strings.Contains(sc, ",") || len(sc) > scope.MaxBytes {
						t.Fatalf("scope %q passed", sc)
					}
				}
				if len(m.Scopes) > maxScopes {
					t.Fatalf("%d scopes passed", len(m.Scopes))
				}
			}
			if names.ValidProvider(m.Provider) && strings.ContainsAny(m.Provider, "/\\%") {
				t.Fatalf("provider %q passed", m.Provider)
			}
		} else if e := (*web.Error)(nil); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
			t.Fatalf("mint body refused with %v", err)
		}
		var rr resolveRequest
		if err := web.DecodeJSONBytes(raw, &rr); err == nil {
			s := &Server{keys: fuzzKeyring(t), now: time.Now}
			if _, err := s.openRequestState(rr.RequestState); err == nil && !strings.HasPrefix(rr.RequestState, requestStatePrefix) {
				t.Fatalf("request_state %q opened", rr.RequestState)
			}
		}
	})
}
