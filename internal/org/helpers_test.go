package org_test

import (
	"context"
	"crypto/rand"
	"testing"

	"golang.org/x/oauth2"

	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/provider/providertest"
)

// connectWith runs an authorization at the fake with p and exchanges the
// code: it succeeds only if p is the app the fake knows.
func connectWith(t *testing.T, srv *providertest.Server, p provider.OAuth) *provider.Token {
	t.Helper()
	const redirect = "https://connect.example.test/oauth/callback"
	verifier := oauth2.GenerateVerifier()
	back, err := srv.Approve(p.AuthCodeURL(rand.Text(), oauth2.S256ChallengeFromVerifier(verifier), redirect, nil))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.Exchange(context.Background(), back.Query().Get("code"), verifier, redirect)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	return tok
}
