package admin_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"
)

// TestJWTKeysAPI: the admin API registers, changes and clears a client's
// keys for private_key_jwt, refusing bad keys with one described 400, and
// audits each change.
func TestJWTKeysAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.newMCPServer("keyed", "fake")
	_, key := e.newAdminKey("ops")
	path := "/admin/api/clients/" + m.client.ID + "/jwt-keys"
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))

	if st, out := e.adminAPI(key, http.MethodPut, path, map[string]any{"public_key": pub, "drop_client_keys": true}); st != http.StatusOK ||
		out["auth"] != "private_key_jwt" {
		t.Fatalf("register: %d %v", st, out)
	}
	c, err := e.clients.Get(context.Background(), m.client.ID)
	if err != nil || len(c.JWKS) == 0 {
		t.Fatalf("after register: %+v %v", c, err)
	}
	if st, _ := m.call(http.MethodGet, "/v1/connections", "alice", nil); st != http.StatusUnauthorized {
		t.Fatalf("the dropped client key still works: %d", st)
	}
	for _, body := range []map[string]any{
		// (A JWKS URL at a private address is refused by the egress
		// client's guard, which this harness's test client has not:
		// TestAssertionKeyRegistration and TestClientsJWTKeys cover it.)
		{"jwks_url": "javascript:alert(1)"},
		{"public_key": "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n"},
		{"jwks_url": "https://keys.example/jwks", "public_key": pub},
	} {
		if st, out := e.adminAPI(key, http.MethodPut, path, body); st != http.StatusBadRequest || out["error"] != "invalid_request" {
			t.Errorf("%v: %d %v", body, st, out)
		}
	}
	if st, _ := e.adminAPI(key, http.MethodPut, "/admin/api/clients/cli_nope/jwt-keys", map[string]any{"public_key": pub}); st != http.StatusNotFound {
		t.Fatalf("an unknown client: %d", st)
	}
	if st, _ := e.adminAPI("nokey", http.MethodPut, path, map[string]any{}); st != http.StatusUnauthorized && st != http.StatusForbidden {
		t.Fatalf("without an admin key: %d", st)
	}
	if st, out := e.adminAPI(key, http.MethodPut, path, map[string]any{}); st != http.StatusOK || out["auth"] != "client_key" {
		t.Fatalf("clear: %d %v", st, out)
	}
	if c, _ := e.clients.Get(context.Background(), m.client.ID); len(c.JWKS) != 0 || c.JWKSURL != "" {
		t.Fatalf("after clear: %+v", c)
	}
	if n := e.auditCount("client.jwt_keys_changed"); n != 2 {
		t.Fatalf("%d audit events, want 2", n)
	}
}
