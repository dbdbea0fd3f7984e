package clientauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/names"
)

// ClientUpdate is a change to a registration; a nil field stays as it is.
type ClientUpdate struct {
	Name      *string
	Resources []string // replaces the list; its URIs must not be another client's
	Providers []string // replaces the list (empty, not nil: none)
	// By says more of who asked, for the client.updated row (the admin
	// pages: request id, address, role): its RequestID, IP and Detail
	// (merged under the changes) are written; the rest is Update's own.
	By audit.Event
}

// ErrClientInUse means a client that is enabled and has been used cannot be
// deleted: disable it first (its MCP server's calls stop at once), so nothing
// in use vanishes in one step.
var ErrClientInUse = errors.New("clientauth: client is enabled and in use")

// checkRegistration validates a name, resources and providers as Create and
// Update accept them.
func (c *Clients) checkRegistration(name string, resources, providers []string) error {
	if name == "" || len(name) > 200 {
		return fmt.Errorf("%w: a name of 1-200 characters is required", ErrInvalidClient)
	}
	if len(resources) == 0 {
		return fmt.Errorf("%w: at least one resource URI is required", ErrInvalidClient)
	}
	seen := make(map[string]string, len(resources))
	for _, r := range resources {
		if err := ValidateResource(r, c.allowHTTP); err != nil {
			return err
		}
		if prev, dup := seen[resourceKey(r)]; dup {
			return fmt.Errorf("%w: resource %q is listed twice (as %q too)", ErrInvalidClient, r, prev)
		}
		seen[resourceKey(r)] = r
	}
	for _, p := range providers {
		if !names.ValidProvider(p) {
			return fmt.Errorf("%w: provider id %q must be lower-case letters, digits, '-' or '_'", ErrInvalidClient, p)
		}
	}
	return nil
}

const (
	lockClientSQL   = `SELECT ` + clientColumns + ` FROM clients c WHERE c.id = $1 FOR UPDATE`
	updateClientSQL = `UPDATE clients SET name = $2, resources = $3, providers = $4 WHERE id = $1`
	notifyClientSQL = `SELECT pg_notify('` + InvalidationChannel + `', $1)`
)

// Update changes a client's name, resources or providers, audited
// (client.updated, by actor, naming what changed) in the same transaction.
// A resource another client holds is refused with ErrResourceTaken; an
// unknown id with ErrClientNotFound. Approvals already given stay: a
// provider taken off the list is simply refused at the next elicitation.
// Every replica's key cache learns of it by notification.
func (c *Clients) Update(ctx context.Context, id string, u ClientUpdate, actor string) (Client, error) {
	var out Client
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		cl, err := scanClient(tx.QueryRow(ctx, lockClientSQL, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrClientNotFound, id)
		}
		if err != nil {
			return err
		}
		next := cl
		if u.Name != nil {
			next.Name = strings.TrimSpace(*u.Name)
		}
		if u.Resources != nil {
			next.Resources = u.Resources
		}
		if u.Providers != nil {
			next.Providers = u.Providers
		}
		if err := c.checkRegistration(next.Name, next.Resources, next.Providers); err != nil {
			return err
		}
		changed := map[string]any{}
		if next.Name != cl.Name {
			changed["name"] = map[string]any{"from": cl.Name, "to": next.Name}
		}
		if !slices.Equal(next.Resources, cl.Resources) {
			changed["resources"] = map[string]any{"from": cl.Resources, "to": next.Resources}
		}
		if !slices.Equal(next.Providers, cl.Providers) {
			changed["providers"] = map[string]any{"from": cl.Providers, "to": next.Providers}
		}
		out = next
		if len(changed) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, updateClientSQL, id, next.Name, next.Resources, next.Providers); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "client_resources_pkey" {
				return errResourceConflict
			}
			return err
		}
		if _, err := tx.Exec(ctx, notifyClientSQL, id); err != nil {
			return err
		}
		for k, v := range u.By.Detail {
			if _, ok := changed[k]; !ok {
				changed[k] = v
			}
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "client.updated", Actor: actor, ClientID: id, Target: id,
			RequestID: u.By.RequestID, IP: u.By.IP, Detail: changed, OrgID: cl.Org})
	})
	if errors.Is(err, errResourceConflict) {
		return Client{}, c.resourceTakenBy(ctx, u.Resources, id)
	}
	if err != nil {
		if errors.Is(err, ErrClientNotFound) || errors.Is(err, ErrInvalidClient) {
			return Client{}, err
		}
		return Client{}, fmt.Errorf("clientauth: update client: %w", err)
	}
	c.forget(id)
	return out, nil
}

// errResourceConflict carries a unique violation out of the transaction,
// which must end before the holder is looked up.
var errResourceConflict = errors.New("resource conflict")

// resourceTakenBy is resourceTaken for an update of client self: the
// holder named is another client.
func (c *Clients) resourceTakenBy(ctx context.Context, resources []string, self string) error {
	var want, held, owner string
	err := c.pool.QueryRow(ctx, takenResourceOtherSQL, resources, self).Scan(&want, &held, &owner)
	switch {
	case err != nil:
		return fmt.Errorf("%w: one of %q belongs to another client", ErrResourceTaken, resources)
	case want != held:
		return fmt.Errorf("%w: resource %q is registered to client %s as %q", ErrResourceTaken, want, owner, held)
	default:
		return fmt.Errorf("%w: resource %q is registered to client %s", ErrResourceTaken, want, owner)
	}
}

const takenResourceOtherSQL = `SELECT q.r, cr.resource, cr.client_id
	FROM unnest($1::text[]) WITH ORDINALITY AS q (r, n)
	JOIN client_resources cr ON cr.resource_key = client_resource_key(q.r) AND cr.client_id <> $2
	ORDER BY q.n LIMIT 1`

// Deleted is what deleting a client removed.
type Deleted struct {
	Client           Client
	Approvals        int64 // consents: the users' approvals of this client, withdrawn
	WebhookEndpoints int64
	Elicitations     int64 // its connect links, pending or settled
}

const (
	countClientRowsSQL = `SELECT
		(SELECT count(*) FROM consents WHERE client_id = $1),
		(SELECT count(*) FROM webhook_endpoints WHERE client_id = $1),
		(SELECT count(*) FROM elicitations WHERE client_id = $1)`
	deleteClientSQL = `DELETE FROM clients WHERE id = $1`
)

// Delete removes a client with everything that is its own: keys, resource
// URIs (free for another client from then on), approvals (users' consents
// to it: withdrawn), webhook endpoints and their deliveries, connect links
// and proxy rules (the schema's ON DELETE CASCADE). The users' connections
// stay: they belong to the users, who may have approved other MCP servers
// for them, and see them on their account page. Audited (client.deleted, by
// actor, with what went) in the same transaction; every replica forgets its
// keys by notification.
//
// Other replicas' approval caches may list its approvals until their TTL:
// harmless, as nothing can authenticate as the client any more, and the
// account page reads approvals from the database.
//
// A client that is enabled and has been used is refused with
// ErrClientInUse: disable it first. One never used (a registration with a
// typo) may go at once. An unknown id is ErrClientNotFound.
func (c *Clients) Delete(ctx context.Context, id, actor string) (Deleted, error) {
	var d Deleted
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		cl, err := scanClient(tx.QueryRow(ctx, lockClientSQL, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrClientNotFound, id)
		}
		if err != nil {
			return err
		}
		if !cl.Disabled && !cl.LastUsedAt.IsZero() {
			return fmt.Errorf("%w: %s was last used %s; disable it first (connectd clients disable %s)",
				ErrClientInUse, id, cl.LastUsedAt.UTC().Format("2006-01-02 15:04Z"), id)
		}
		d.Client = cl
		if err := tx.QueryRow(ctx, countClientRowsSQL, id).Scan(&d.Approvals, &d.WebhookEndpoints, &d.Elicitations); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, deleteClientSQL, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, notifyClientSQL, id); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Event{Kind: "client.deleted", Actor: actor, ClientID: id, Target: id,
			Detail: map[string]any{"name": cl.Name, "resources": cl.Resources, "providers": cl.Providers,
				"approvals_withdrawn": d.Approvals, "webhook_endpoints": d.WebhookEndpoints, "elicitations": d.Elicitations}})
	})
	if err != nil {
		if errors.Is(err, ErrClientNotFound) || errors.Is(err, ErrClientInUse) {
			return Deleted{}, err
		}
		return Deleted{}, fmt.Errorf("clientauth: delete client: %w", err)
	}
	c.forget(id)
	return d, nil
}
