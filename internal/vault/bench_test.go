package vault

import (
	"strings"
	"testing"
	"time"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
)

// benchCredential encodes to about 1 KB, the size of a large real credential
// set (a JWT access token, a refresh token, a few scopes).
func benchCredential() *Credential {
	return &Credential{
		AccessToken:  strings.Repeat("a", 800),
		RefreshToken: strings.Repeat("r", 120),
		TokenType:    "Bearer",
		Expiry:       time.Now().Add(time.Hour),
		Scopes:       []string{"repo", "read:org", "workflow", "gist"},
		AccountID:    "1234567",
		AccountLabel: "octocat",
	}
}

func benchStore(b *testing.B) *Store {
	k, err := keyring.Parse("1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		b.Fatal(err)
	}
	return &Store{shared: &shared{keys: k}, org: DefaultOrg}
}

var benchUser = identity.User{Issuer: "https://idp.example", Subject: "alice"}

func BenchmarkSealCredential1KB(b *testing.B) {
	s, c := benchStore(b), benchCredential()
	b.SetBytes(int64(len(c.encode())))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.seal("cn_bench", benchUser, "github", c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenCredential1KB(b *testing.B) {
	s, c := benchStore(b), benchCredential()
	ct, err := s.seal("cn_bench", benchUser, "github", c)
	if err != nil {
		b.Fatal(err)
	}
	r := &row{Connection: Connection{ID: "cn_bench", User: benchUser, Provider: "github"}, ciphertext: ct}
	b.SetBytes(int64(len(c.encode())))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.open(r); err != nil {
			b.Fatal(err)
		}
	}
}
