package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/vault"
)

// Read-only SQL over other packages' tables (see doc.go). None of it selects
// connections.ciphertext: what the admin side never reads, it cannot show.
const (
	// connectionColumns are the non-secret columns of vault's connections,
	// and how many clients hold consent (package consent's table) to each.
	connectionColumns = `c.id, c.issuer, c.subject, c.provider, c.status, c.scopes, c.key_version,
		c.expires_at, c.created_at, c.updated_at, c.refreshed_at, c.health_checked_at, c.last_error,
		coalesce(c.display_name, ''), c.label,
		(SELECT count(*) FROM consents k WHERE k.connection_id = c.id), c.org_id`
	selectConnections = `SELECT ` + connectionColumns + ` FROM connections c`
	// selectConnection reads one connection of the acting organization ($2;
	// '' for an operator: any).
	selectConnection = selectConnections + ` WHERE c.id = $1 AND ($2 = '' OR c.org_id = $2)`
	// consentedBy narrows a listing to connections a client holds consent to.
	consentedBy = `EXISTS (SELECT 1 FROM consents k WHERE k.connection_id = c.id AND k.client_id = $%d)`
	// selectConsents lists who holds consent to one connection (connect's
	// consents, names from mcpauth's clients).
	selectConsents = `SELECT k.client_id, coalesce(cl.name, ''), k.scopes, k.granted_at, k.updated_at
		FROM consents k LEFT JOIN clients cl ON cl.id = k.client_id
		WHERE k.issuer = $1 AND k.subject = $2 AND k.provider = $3 AND k.connection_id = $4
		ORDER BY k.granted_at, k.client_id`
	eventColumns = `id, occurred_at, kind, actor, issuer, subject, client_id, provider, target, request_id, ip, detail, org_id`
	// selectTrail is a connection's audit trail: everything recorded about
	// this user and provider in the connection's organization, newest first
	// (index audit_events_user_provider_idx).
	selectTrail = `SELECT ` + eventColumns + ` FROM audit_events
		WHERE issuer = $1 AND subject = $2 AND provider = $3 AND org_id = $5 ORDER BY id DESC LIMIT $4`
	selectEvents = `SELECT ` + eventColumns + ` FROM audit_events WHERE occurred_at >= $1`
	// countEvents counts events per kind; sampled rows stand for detail.count
	// occurrences each.
	countEvents = `SELECT kind, count(*),
		sum(CASE WHEN jsonb_typeof(detail->'count') = 'number' THEN (detail->>'count')::bigint ELSE 1 END),
		max(occurred_at)
		FROM audit_events WHERE occurred_at >= $1`
	// selectClientOrg and selectClientOrgs name the organization of a
	// client (mcpauth's clients): what an admin may see of it, and of its
	// webhooks and deliveries, follows from it.
	selectClientOrg  = `SELECT org_id FROM clients WHERE id = $1`
	selectClientOrgs = `SELECT id, org_id FROM clients`
	// selectUserInOrg: whether a user has a connection in an organization
	// (what makes them one of its users, for ending their sessions).
	selectUserInOrg = `SELECT EXISTS (SELECT 1 FROM connections WHERE issuer = $1 AND subject = $2 AND org_id = $3)`
	// securityKinds is spelled out (not a parameter) so that the planner uses
	// the partial index audit_events_security_idx.
	securityKinds = `kind LIKE 'security.%'`
)

// Listing limits.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	// TrailLength is how many audit events a connection's detail shows.
	TrailLength = 100
	// SecurityPrefix starts the kind of every security event (refusals).
	SecurityPrefix = "security."
)

// Connection is what the admin side knows of a linked account: never a
// credential.
type Connection struct {
	ID          string
	User        identity.User
	Provider    string
	Status      string // active, reauthorization_required, revoked
	Scopes      []string
	KeyVersion  int32
	ExpiresAt   time.Time // access-token expiry; zero when unknown
	CreatedAt   time.Time
	UpdatedAt   time.Time
	RefreshedAt time.Time // zero if never refreshed
	// HealthCheckedAt is when a refresh last reached the provider (zero:
	// never), LastError the error class it ended with ("" for success).
	HealthCheckedAt time.Time
	LastError       string
	// DisplayName is what the provider calls the account, Label the
	// user's name for the connection (a user may have several at one
	// provider).
	DisplayName string
	Label       string
	Consents    int64  // clients holding consent
	Org         string // the organization it belongs to
}

func scanConnection(r pgx.Row) (*Connection, error) {
	var c Connection
	var expires, refreshed, checked *time.Time
	if err := r.Scan(&c.ID, &c.User.Issuer, &c.User.Subject, &c.Provider, &c.Status, &c.Scopes, &c.KeyVersion,
		&expires, &c.CreatedAt, &c.UpdatedAt, &refreshed, &checked, &c.LastError, &c.DisplayName, &c.Label, &c.Consents, &c.Org); err != nil {
		return nil, err
	}
	if checked != nil {
		c.HealthCheckedAt = *checked
	}
	if expires != nil {
		c.ExpiresAt = *expires
	}
	if refreshed != nil {
		c.RefreshedAt = *refreshed
	}
	return &c, nil
}

// Filter narrows the listing of connections; empty fields match everything.
type Filter struct {
	Issuer   string // the user's issuer URL
	Subject  string // the user's subject
	Provider string
	Status   string
	Client   string // only connections this client holds consent to
	// Org is the organization listed: an organization's admin's own (the
	// admin handlers set it from the request's principal, whatever the
	// query says); "" lists every organization, for operators only.
	Org string
}

var (
	connectionIDPattern = regexp.MustCompile(`^cn_[a-z0-9]{1,64}$`)
	kindPattern         = regexp.MustCompile(`^[a-z0-9_.]{1,64}$`)
	statuses            = []string{string(vault.StatusActive), string(vault.StatusReauthorizationRequired), string(vault.StatusRevoked)}
)

// Validate checks every field's shape; errors wrap ErrInvalid and name the field.
// The user and issuer follow the rule every identity connectd stores was
// admitted by (mcpauth.CheckSubject, mcpauth.CheckIssuer): a value outside it
// cannot match, and bytes Postgres refuses (NUL, invalid UTF-8) never reach it.
// A value inside it is matched byte for byte, spaces included: whoever fills
// a Filter must not trim or otherwise clean up the user or issuer, or "alice "
// would select alice.
func (f Filter) Validate() error {
	switch {
	case f.Issuer != "" && mcpauth.CheckIssuer(f.Issuer) != nil:
		return problem.Detail(ErrInvalid, "issuer must be an issuer URL of 1-%d bytes of UTF-8 text without control characters", mcpauth.MaxIssuerBytes)
	case f.Subject != "" && mcpauth.CheckSubject(f.Subject) != nil:
		return problem.Detail(ErrInvalid, "user must be a subject of 1-%d bytes of UTF-8 text without control characters", mcpauth.MaxSubjectBytes)
	case f.Provider != "" && !names.ValidProvider(f.Provider):
		return problem.Detail(ErrInvalid, "provider must be a provider id such as github")
	case f.Status != "" && !contains(statuses, f.Status):
		return problem.Detail(ErrInvalid, "status must be one of %s", strings.Join(statuses, ", "))
	case f.Client != "" && !names.ValidClientID(f.Client):
		return problem.Detail(ErrInvalid, "client must be a client id such as cli_k3j5")
	case f.Org != "" && !names.ValidOrg(f.Org):
		return problem.Detail(ErrInvalid, "org must be an organization id such as acme")
	}
	return nil
}

// Statuses lists the connection states a listing can find: a revoked
// connection is deleted with its credentials (its end is in the audit
// trail, connection.revoked), so "revoked", which a Filter still accepts,
// is not offered (issue 38 item 8: it offered a filter that never found a
// row).
func Statuses() []string {
	return slices.DeleteFunc(append([]string(nil), statuses...), func(s string) bool { return s == string(vault.StatusRevoked) })
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ValidConnectionID reports whether id has the shape of a connection id.
func ValidConnectionID(id string) bool { return connectionIDPattern.MatchString(id) }

// Cursor is a keyset position in the listing, which is ordered newest first by
// (created_at, id): the next page holds the rows strictly after it. Rows
// inserted while paging sort before every cursor, so no existing row is ever
// skipped or repeated, however long the listing takes.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// String encodes the cursor as an opaque URL-safe token.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID))
}

// ParseCursor decodes a token made by Cursor.String.
func ParseCursor(s string) (Cursor, error) {
	bad := problem.Detail(ErrInvalid, "after is not a cursor this listing returned")
	if len(s) > 200 {
		return Cursor{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	ts, id, ok := strings.Cut(string(b), ".")
	micros, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || !connectionIDPattern.MatchString(id) {
		return Cursor{}, bad
	}
	return Cursor{CreatedAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}

// Page is one page of the listing.
type Page struct {
	Connections []Connection
	Next        *Cursor // nil on the last page
}

// Connections lists connections matching f, newest first, limit per page
// (DefaultPageSize when ≤ 0, at most MaxPageSize), after the cursor if given.
func (st *Store) Connections(ctx context.Context, f Filter, after *Cursor, limit int) (Page, error) {
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	switch {
	case limit <= 0:
		limit = DefaultPageSize
	case limit > MaxPageSize:
		limit = MaxPageSize
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Issuer != "" {
		add("c.issuer = $%d", f.Issuer)
	}
	if f.Subject != "" {
		add("c.subject = $%d", f.Subject)
	}
	if f.Provider != "" {
		add("c.provider = $%d", f.Provider)
	}
	if f.Status != "" {
		add("c.status = $%d", f.Status)
		if f.Status != string(vault.StatusActive) {
			// Spelled out so the planner can use the partial index whatever the parameter.
			where = append(where, "c.status <> 'active'")
		}
	}
	if f.Client != "" {
		add(consentedBy, f.Client)
	}
	if f.Org != "" {
		add("c.org_id = $%d", f.Org)
	}
	if after != nil {
		args = append(args, after.CreatedAt, after.ID)
		where = append(where, fmt.Sprintf("(c.created_at, c.id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	q := selectConnections
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	q += fmt.Sprintf(" ORDER BY c.created_at DESC, c.id DESC LIMIT $%d", len(args))

	rows, err := st.pool.Query(ctx, q, args...)
	if err != nil {
		return Page{}, fmt.Errorf("admin: list connections: %w", err)
	}
	defer rows.Close()
	var p Page
	for rows.Next() {
		c, err := scanConnection(rows)
		if err != nil {
			return Page{}, fmt.Errorf("admin: list connections: %w", err)
		}
		p.Connections = append(p.Connections, *c)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("admin: list connections: %w", err)
	}
	if len(p.Connections) > limit {
		p.Connections = p.Connections[:limit]
		last := p.Connections[limit-1]
		p.Next = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return p, nil
}

// connection reads one connection of org ("": any), or ErrNotFound — for
// another organization's connection too, as for one that does not exist.
func (st *Store) connection(ctx context.Context, org, id string) (*Connection, error) {
	if !ValidConnectionID(id) {
		return nil, fmt.Errorf("connection %s: %w", id, problem.Detail(ErrNotFound, "no such connection"))
	}
	c, err := scanConnection(st.pool.QueryRow(ctx, selectConnection, id, org))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("connection %s: %w", id, problem.Detail(ErrNotFound, "no such connection"))
	}
	if err != nil {
		return nil, fmt.Errorf("admin: read connection: %w", err)
	}
	return c, nil
}

// Consent is one client's consent to a connection.
type Consent struct {
	ClientID   string
	ClientName string
	Scopes     []string
	GrantedAt  time.Time
	UpdatedAt  time.Time
}

// Event is one row of the audit trail.
type Event struct {
	ID        int64
	At        time.Time
	Kind      string
	Actor     string
	Issuer    string // the user concerned, if any
	Subject   string
	ClientID  string
	Provider  string
	Target    string // connection, elicitation or key id
	RequestID string
	IP        string
	Detail    map[string]any
	// Org is the organization the event belongs to; writing, "" is the
	// acting admin's (Actor.Org), or the default organization for an
	// operator.
	Org string
}

func scanEvents(rows pgx.Rows) ([]Event, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.At, &e.Kind, &e.Actor, &e.Issuer, &e.Subject, &e.ClientID, &e.Provider, &e.Target,
			&e.RequestID, &e.IP, &e.Detail, &e.Org)
		return e, err
	})
}

// Detail is everything the detail page shows about a connection.
type Detail struct {
	Connection
	// Account names the provider account (opened from the sealed credential;
	// nothing else of it leaves the vault). Empty when unknown.
	Account vault.Account
	// AccountProblem says why the account could not be named, if it could not.
	AccountProblem string
	Consents       []Consent
	Events         []Event // newest first, at most TrailLength
}

// Detail describes the connection id of org ("": any, for operators), or
// returns ErrNotFound.
func (st *Store) Detail(ctx context.Context, org, id string) (*Detail, error) {
	c, err := st.connection(ctx, org, id)
	if err != nil {
		return nil, err
	}
	d := &Detail{Connection: *c}
	switch {
	case st.vault == nil:
		d.AccountProblem = "vault keys not configured"
	default:
		acct, err := st.vault.In(c.Org).Account(ctx, c.User, c.Provider, c.ID)
		switch {
		case err == nil:
			d.Account = acct
		case errors.Is(err, keyring.ErrDecrypt):
			d.AccountProblem = "the credential cannot be opened with the configured keys"
		case errors.Is(err, vault.ErrNotConnected):
			return nil, fmt.Errorf("connection %s: %w", id, problem.Detail(ErrNotFound, "no such connection"))
		default:
			return nil, err
		}
	}
	rows, err := st.pool.Query(ctx, selectConsents, c.User.Issuer, c.User.Subject, c.Provider, c.ID)
	if err != nil {
		return nil, fmt.Errorf("admin: list consents: %w", err)
	}
	d.Consents, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Consent, error) {
		var k Consent
		err := r.Scan(&k.ClientID, &k.ClientName, &k.Scopes, &k.GrantedAt, &k.UpdatedAt)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin: list consents: %w", err)
	}
	rows, err = st.pool.Query(ctx, selectTrail, c.User.Issuer, c.User.Subject, c.Provider, TrailLength, c.Org)
	if err != nil {
		return nil, fmt.Errorf("admin: read audit trail: %w", err)
	}
	if d.Events, err = scanEvents(rows); err != nil {
		return nil, fmt.Errorf("admin: read audit trail: %w", err)
	}
	return d, nil
}

// EventQuery selects audit events, newest first.
type EventQuery struct {
	Prefix string    // only kinds starting with it (SecurityPrefix: security events); "" for all
	Kind   string    // only this kind; "" for all
	Since  time.Time // only events at or after it
	Before int64     // keyset: only ids below it; 0 starts at the newest
	Limit  int       // DefaultPageSize when ≤ 0, at most MaxPageSize
	// Org is the organization whose trail is read; "" every organization's
	// (operators only, as Filter.Org).
	Org string
}

// Events returns the events q selects and the Before of the next page (0 on
// the last page).
func (st *Store) Events(ctx context.Context, q EventQuery) ([]Event, int64, error) {
	if q.Kind != "" && !kindPattern.MatchString(q.Kind) {
		return nil, 0, problem.Detail(ErrInvalid, "kind must be an event kind such as security.identity_mismatch")
	}
	if q.Prefix != "" && !kindPattern.MatchString(q.Prefix) || q.Before < 0 || q.Org != "" && !names.ValidOrg(q.Org) {
		return nil, 0, problem.Detail(ErrInvalid, "bad event query")
	}
	switch {
	case q.Limit <= 0:
		q.Limit = DefaultPageSize
	case q.Limit > MaxPageSize:
		q.Limit = MaxPageSize
	}
	query, args := selectEvents, []any{q.Since}
	add := func(cond string, v any) {
		args = append(args, v)
		query += fmt.Sprintf(" AND "+cond, len(args))
	}
	switch q.Prefix {
	case "":
	case SecurityPrefix:
		query += " AND " + securityKinds
	default:
		add("starts_with(kind, $%d::text)", q.Prefix)
	}
	if q.Kind != "" {
		add("kind = $%d", q.Kind)
	}
	if q.Before > 0 {
		add("id < $%d", q.Before)
	}
	if q.Org != "" {
		add("org_id = $%d", q.Org)
	}
	args = append(args, q.Limit+1)
	query += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	rows, err := st.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("admin: list events: %w", err)
	}
	evs, err := scanEvents(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("admin: list events: %w", err)
	}
	var next int64
	if len(evs) > q.Limit {
		evs = evs[:q.Limit]
		next = evs[q.Limit-1].ID
	}
	return evs, next, nil
}

// KindCount summarises one kind of event over a window.
type KindCount struct {
	Kind        string
	Events      int64     // rows in the audit trail
	Occurrences int64     // what they stand for: sampled rows count several each
	Last        time.Time // the latest row
}

// EventCounts counts the events of org ("": every organization's, for
// operators) whose kind starts with prefix since the given time, per kind.
func (st *Store) EventCounts(ctx context.Context, org, prefix string, since time.Time) ([]KindCount, error) {
	if prefix != "" && !kindPattern.MatchString(prefix) || org != "" && !names.ValidOrg(org) {
		return nil, problem.Detail(ErrInvalid, "bad event kind prefix")
	}
	query, args := countEvents, []any{since}
	switch prefix {
	case "":
	case SecurityPrefix:
		query += " AND " + securityKinds
	default:
		args = append(args, prefix)
		query += fmt.Sprintf(" AND starts_with(kind, $%d::text)", len(args))
	}
	if org != "" {
		args = append(args, org)
		query += fmt.Sprintf(" AND org_id = $%d", len(args))
	}
	rows, err := st.pool.Query(ctx, query+" GROUP BY kind ORDER BY kind", args...)
	if err != nil {
		return nil, fmt.Errorf("admin: count events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KindCount, error) {
		var k KindCount
		err := r.Scan(&k.Kind, &k.Events, &k.Occurrences, &k.Last)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin: count events: %w", err)
	}
	return out, nil
}

// clientOrg returns the organization of client id, or ErrNotFound.
func (st *Store) clientOrg(ctx context.Context, id string) (string, error) {
	if !names.ValidClientID(id) {
		return "", problem.Detail(ErrNotFound, "no such client")
	}
	var org string
	err := st.pool.QueryRow(ctx, selectClientOrg, id).Scan(&org)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", problem.Detail(ErrNotFound, "no such client")
	}
	if err != nil {
		return "", fmt.Errorf("admin: read client: %w", err)
	}
	return org, nil
}

// clientOrgs maps every client id to its organization.
func (st *Store) clientOrgs(ctx context.Context) (map[string]string, error) {
	rows, err := st.pool.Query(ctx, selectClientOrgs)
	if err != nil {
		return nil, fmt.Errorf("admin: read clients: %w", err)
	}
	out := map[string]string{}
	var id, org string
	if _, err := pgx.ForEachRow(rows, []any{&id, &org}, func() error { out[id] = org; return nil }); err != nil {
		return nil, fmt.Errorf("admin: read clients: %w", err)
	}
	return out, nil
}

// clientIn checks that client id exists and that by acts for its
// organization, and returns the organization; ErrNotFound otherwise, the
// same answer for another organization's client as for none.
func (st *Store) clientIn(ctx context.Context, id string, by Actor) (string, error) {
	org, err := st.clientOrg(ctx, id)
	if err != nil {
		return "", err
	}
	if !by.actsFor(org) {
		return "", problem.Detail(ErrNotFound, "no such client")
	}
	return org, nil
}
