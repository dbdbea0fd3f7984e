package webhook_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

// TestConnectionEventsStayInTheOrganization: an event about acme's
// connection (issue 34) is decided for acme's clients — its approved
// client is told the scopes and the account name, not the blank answer a
// default-organization decision gives every other organization's client —
// and is never delivered to a client of beta, even one the approvals name
// (an approval written behind consent's back, or a caller that read the
// holders without the organization): the attack is beta's endpoint
// receiving a payload naming acme's connection.
func TestConnectionEventsStayInTheOrganization(t *testing.T) {
	t.Parallel()
	h := newHooks(t)
	ctx := context.Background()
	if _, err := h.pool.Exec(ctx, `INSERT INTO organizations (id, name) VALUES ('acme', 'Acme'), ('beta', 'Beta')`); err != nil {
		t.Fatal(err)
	}
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: h.pool})
	endpoint := map[string]string{} // client id → org
	for _, org := range []string{"acme", "beta"} {
		cl, _, err := clients.CreateIn(ctx, org, org+" files", []string{"https://" + org + ".mcp.example/"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.svc.Create(ctx, cl.ID, "https://"+h.addr+"/hooks", nil); err != nil {
			t.Fatal(err)
		}
		endpoint[cl.ID] = org
	}
	var acme, beta string
	for id, org := range endpoint {
		if org == "acme" {
			acme = id
		} else {
			beta = id
		}
	}
	alice := identity.User{Issuer: "https://idp.example", Subject: "alice"}
	conn := vault.Connection{ID: "cn_" + "acmeacmeacmeacmeacmeacmeac", User: alice, Provider: "github",
		Status: vault.StatusRevoked, Scopes: []string{"repo", "read:org"}, AccountHash: vault.AccountHash("42"),
		DisplayName: "alice-at-acme", Label: "work", Org: "acme"}
	approval := consent.Approval{Scopes: []string{"repo"}, Account: vault.AccountHash("42"), ConnectionID: conn.ID}
	approvals := map[string]consent.Approval{acme: approval, beta: approval, h.client: approval}

	tx, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := h.svc.EmitAll(ctx, tx, webhook.ConnectionEvents(webhook.ConnectionRevoked, conn, approvals, nil,
		map[string]any{"by": "client"})); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	rows, err := h.pool.Query(ctx, `SELECT e.client_id, d.payload FROM webhook_deliveries d
		JOIN webhook_endpoints e ON e.id = d.endpoint_id ORDER BY e.client_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var client string
		var body []byte
		if err := rows.Scan(&client, &body); err != nil {
			t.Fatal(err)
		}
		got = append(got, client)
		if client != acme {
			t.Errorf("a client of another organization (%s) got an event about acme's connection: %s", client, body)
			continue
		}
		var p struct {
			Data struct {
				ConnectionID string   `json:"connection_id"`
				DisplayName  string   `json:"display_name"`
				Label        string   `json:"label"`
				Scopes       []string `json:"scopes"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Data.ConnectionID != conn.ID || p.Data.DisplayName != "alice-at-acme" || p.Data.Label != "work" ||
			!slices.Equal(p.Data.Scopes, []string{"repo"}) {
			t.Errorf("acme's client was told %+v, want its connection with the name and the scopes it may see", p.Data)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{acme}) {
		t.Fatalf("deliveries to %v, want acme's client %s alone", got, acme)
	}
}
