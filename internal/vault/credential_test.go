package vault

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCredentialEncoding(t *testing.T) {
	t.Parallel()
	tests := []Credential{
		{},
		{AccessToken: "a"},
		{AccessToken: "gho_x", RefreshToken: "ghr_y", TokenType: "bearer", Expiry: time.UnixMicro(1767225600123456).UTC(),
			Scopes: []string{"repo", "read:org"}, AccountID: "12345", AccountLabel: "octocat"},
		{AccessToken: strings.Repeat("é", 600), Scopes: []string{}},
	}
	for i, c := range tests {
		b := c.encode()
		got, err := decodeCredential(b)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if len(c.Scopes) == 0 {
			c.Scopes = nil
		}
		if !reflect.DeepEqual(*got, c) {
			t.Fatalf("%d: round trip\n got %+v\nwant %+v", i, got.String(), c.String())
		}
	}
}

func TestCredentialDecodingRefusesGarbage(t *testing.T) {
	t.Parallel()
	good := (&Credential{AccessToken: "tok", Scopes: []string{"a"}}).encode()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		b := bytes.Clone(good)
		switch i % 3 {
		case 0:
			b = b[:r.IntN(len(b))]
		case 1:
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		case 2:
			b = append(b, byte(r.IntN(256)))
		}
		if _, err := decodeCredential(b); err != nil && !errors.Is(err, errCorrupt) {
			t.Fatalf("unexpected error %v", err)
		}
	}
	if _, err := decodeCredential(append(bytes.Clone(good), 0)); !errors.Is(err, errCorrupt) {
		t.Fatal("trailing bytes accepted")
	}
}

func TestCredentialDoesNotFormat(t *testing.T) {
	t.Parallel()
	cred := Credential{AccessToken: "at-SECRET", RefreshToken: "rt-SECRET", TokenType: "Bearer", Scopes: []string{"repo"}}
	out := fmt.Sprintf("%v %+v %#v %s %q", cred, cred, &cred, cred, cred)
	if strings.Contains(out, "SECRET") {
		t.Fatalf("a secret was formatted: %s", out)
	}
	if !strings.Contains(out, "repo") {
		t.Fatalf("non-secret fields should show: %s", out)
	}
}
