package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
)

// Admins with roles, per organization (issue 34): the org_admins table, the
// roles and their order, and the memberships an admin request is checked
// against. The deployment's operators (the Policy, and admin keys without an
// organization) are apart: they have no row and act on every organization.

// Role is what an organization's admin may do there. Roles are ordered: each
// may do everything the ones before it may.
type Role string

// The roles, least first.
const (
	// RoleViewer reads everything of the organization and changes nothing.
	RoleViewer Role = "viewer"
	// RoleSecurity also revokes connections, ends users' sessions and cuts
	// off clients.
	RoleSecurity Role = "security"
	// RoleAdmin also manages clients (their keys) and webhooks.
	RoleAdmin Role = "admin"
	// RoleOwner also manages the organization's admins.
	RoleOwner Role = "owner"
)

// Roles lists the roles, least first.
func Roles() []Role { return []Role{RoleViewer, RoleSecurity, RoleAdmin, RoleOwner} }

func (r Role) rank() int { return slices.Index(Roles(), r) }

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.rank() >= 0 }

// Allows reports whether r may do what least may.
func (r Role) Allows(least Role) bool { return r.Valid() && least.Valid() && r.rank() >= least.rank() }

// ParseRole reads a role's name, or ErrInvalid.
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.Valid() {
		return r, nil
	}
	return "", problem.Detail(ErrInvalid, "role must be one of owner, admin, security, viewer")
}

// Membership is an identity's role in one organization.
type Membership struct {
	Org  string
	Role Role
}

// Assignment is one row of org_admins.
type Assignment struct {
	Org       string
	Issuer    string // issuer URL the admin signs in at
	Subject   string
	Role      Role
	CreatedAt time.Time
	CreatedBy string
}

const (
	upsertAssignment = `INSERT INTO org_admins (org_id, issuer, subject, role, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (org_id, issuer, subject) DO UPDATE SET role = EXCLUDED.role, created_at = EXCLUDED.created_at,
		created_by = EXCLUDED.created_by
		RETURNING (SELECT role FROM org_admins WHERE org_id = $1 AND issuer = $2 AND subject = $3)`
	deleteAssignment = `DELETE FROM org_admins WHERE org_id = $1 AND issuer = $2 AND subject = $3 RETURNING role`
	listAssignments  = `SELECT org_id, issuer, subject, role, created_at, created_by FROM org_admins
		WHERE ($1 = '' OR org_id = $1) ORDER BY org_id, issuer, subject`
	// selectMemberships is what an admin request is checked against, in one
	// round trip: the identity's memberships, and whether its latest admin
	// sign-in was the Policy's (NULL: no sign-in recorded since this table
	// exists — a session from before, which only the Policy admitted).
	// The roles are the assignments' and those of the claim mappings the
	// latest sign-in met that still exist (a removed mapping takes its role
	// at once; a claim removed at the issuer, at the next sign-in).
	selectMemberships = `SELECT (SELECT operator FROM admin_signins WHERE issuer = $1 AND subject = $2),
		coalesce((SELECT array_agg(org_id || ':' || role ORDER BY org_id) FROM (
			SELECT org_id, role FROM org_admins WHERE issuer = $1 AND subject = $2
			UNION ALL
			SELECT m.org_id, m.role FROM admin_signins s
				CROSS JOIN LATERAL jsonb_to_recordset(s.matched) AS x(org text, claim text, value text)
				JOIN org_admin_claims m ON m.org_id = x.org AND m.issuer = s.issuer AND m.claim = x.claim AND m.value = x.value
				WHERE s.issuer = $1 AND s.subject = $2) r), '{}')`
	upsertSignin = `INSERT INTO admin_signins (issuer, subject, operator, matched, signed_in_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (issuer, subject) DO UPDATE SET operator = EXCLUDED.operator, matched = EXCLUDED.matched,
		signed_in_at = EXCLUDED.signed_in_at`
	selectClaimMappings = `SELECT org_id, issuer, claim, value, role, created_at, created_by FROM org_admin_claims
		WHERE ($1 = '' OR org_id = $1) AND ($2 = '' OR issuer = $2) ORDER BY org_id, issuer, claim, value`
	upsertClaimMapping = `INSERT INTO org_admin_claims (org_id, issuer, claim, value, role, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (org_id, issuer, claim, value) DO UPDATE SET role = EXCLUDED.role, created_at = EXCLUDED.created_at,
		created_by = EXCLUDED.created_by`
	deleteClaimMapping = `DELETE FROM org_admin_claims WHERE org_id = $1 AND issuer = $2 AND claim = $3 AND value = $4 RETURNING role`
	selectOrgExists    = `SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1)`
)

// checkAssignment checks an assignment's organization, issuer and subject
// (byte for byte, as every identity: docs/identity.md).
func checkAssignment(org, issuer, subject string) error {
	switch {
	case !names.ValidOrg(org):
		return problem.Detail(ErrInvalid, "org must be an organization id such as acme")
	case mcpauth.CheckIssuer(issuer) != nil:
		return problem.Detail(ErrInvalid, "issuer must be an issuer URL of 1-%d bytes of UTF-8 text without control characters", mcpauth.MaxIssuerBytes)
	case mcpauth.CheckSubject(subject) != nil:
		return problem.Detail(ErrInvalid, "subject must be 1-%d bytes of UTF-8 text without control characters", mcpauth.MaxSubjectBytes)
	}
	return nil
}

// errNoOrg answers an organization that does not exist (or that the actor
// does not act for: the same answer).
func errNoOrg(org string) error {
	return fmt.Errorf("organization %s: %w", org, problem.Detail(ErrNotFound, "no such organization"))
}

// issuerOrg is the organization that owns issuer ("" for a deployment
// issuer, or one connectd does not trust).
func (st *Store) issuerOrg(ctx context.Context, issuer string) (string, error) {
	if st.issuers == nil {
		return "", nil
	}
	_, org, _, err := st.issuers.LookupIn(ctx, issuer)
	if err != nil {
		return "", fmt.Errorf("admin: whose issuer %s is: %w", issuer, err)
	}
	return org, nil
}

// checkIssuerFor refuses a role in org at an issuer another organization
// owns: that organization runs it and can mint any subject there, so it
// could never vouch for org's admins (and members would not count it).
func (st *Store) checkIssuerFor(ctx context.Context, org, issuer string) error {
	owner, err := st.issuerOrg(ctx, issuer)
	if err != nil {
		return err
	}
	if owner != "" && owner != org {
		return problem.Detail(ErrInvalid, "issuer is another organization's own issuer: it can only sign in that organization's admins")
	}
	return nil
}

// Grant gives (issuer, subject) role in org, replacing the role it had
// there; audited as admin.role_granted in the same transaction. by must act
// for org (or be an operator). ErrNotFound when org does not exist.
func (st *Store) Grant(ctx context.Context, a Assignment, by Actor) (Assignment, error) {
	if err := checkAssignment(a.Org, a.Issuer, a.Subject); err != nil {
		return Assignment{}, err
	}
	if !a.Role.Valid() {
		return Assignment{}, problem.Detail(ErrInvalid, "role must be one of owner, admin, security, viewer")
	}
	if !by.actsFor(a.Org) {
		return Assignment{}, errNoOrg(a.Org)
	}
	if err := st.checkIssuerFor(ctx, a.Org, a.Issuer); err != nil {
		return Assignment{}, err
	}
	a.CreatedAt, a.CreatedBy = st.now().UTC().Truncate(time.Microsecond), by.Name
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var before *string
		err := tx.QueryRow(ctx, upsertAssignment, a.Org, a.Issuer, a.Subject, string(a.Role), a.CreatedAt, a.CreatedBy).Scan(&before)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation: no such organization
			return errNoOrg(a.Org)
		}
		if err != nil {
			return err
		}
		detail := map[string]any{"issuer": a.Issuer, "subject": a.Subject, "granted_role": string(a.Role)}
		if before != nil {
			detail["previous_role"] = *before
		}
		return writeAudit(ctx, tx, Event{Kind: "admin.role_granted", Org: a.Org, Issuer: a.Issuer, Subject: a.Subject,
			Target: a.Org, Detail: detail}, by)
	})
	if errors.Is(err, ErrNotFound) {
		return Assignment{}, err
	}
	if err != nil {
		return Assignment{}, fmt.Errorf("admin: grant role: %w", err)
	}
	st.logger.InfoContext(ctx, "admin role granted", slog.String("org", a.Org), slog.String("issuer", a.Issuer),
		slog.String("subject", a.Subject), slog.String("role", string(a.Role)), slog.String("actor", by.Name))
	return a, nil
}

// RevokeRole takes (issuer, subject)'s role in org away: their next admin
// request in org is refused. Audited as admin.role_revoked in the same
// transaction; ErrNotFound when they had none.
func (st *Store) RevokeRole(ctx context.Context, org, issuer, subject string, by Actor) error {
	if err := checkAssignment(org, issuer, subject); err != nil {
		return err
	}
	if !by.actsFor(org) {
		return errNoOrg(org)
	}
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var role string
		err := tx.QueryRow(ctx, deleteAssignment, org, issuer, subject).Scan(&role)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrNotFound, "no such admin of the organization")
		}
		if err != nil {
			return err
		}
		return writeAudit(ctx, tx, Event{Kind: "admin.role_revoked", Org: org, Issuer: issuer, Subject: subject,
			Target: org, Detail: map[string]any{"issuer": issuer, "subject": subject, "revoked_role": role}}, by)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("admin: revoke role: %w", err)
	}
	return err
}

// Assignments lists the admins of org ("" with an operator: of every
// organization), by organization, issuer and subject.
func (st *Store) Assignments(ctx context.Context, org string, by Actor) ([]Assignment, error) {
	if org != "" && !names.ValidOrg(org) {
		return nil, errNoOrg(org)
	}
	if org == "" {
		org = by.Org
	}
	if !by.actsFor(org) {
		return nil, errNoOrg(org)
	}
	rows, err := st.pool.Query(ctx, listAssignments, org)
	if err != nil {
		return nil, fmt.Errorf("admin: list roles: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Assignment, error) {
		var a Assignment
		err := r.Scan(&a.Org, &a.Issuer, &a.Subject, &a.Role, &a.CreatedAt, &a.CreatedBy)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin: list roles: %w", err)
	}
	return out, nil
}

// memberships reads what an admin request of (issuer, subject) is checked
// against: its memberships, ordered by organization, and whether its latest
// admin sign-in was the Policy's (nil: none recorded).
func (st *Store) memberships(ctx context.Context, issuer, subject string) ([]Membership, *bool, error) {
	var (
		operator *bool
		pairs    []string
	)
	if err := st.pool.QueryRow(ctx, selectMemberships, issuer, subject).Scan(&operator, &pairs); err != nil {
		return nil, nil, fmt.Errorf("admin: read memberships: %w", err)
	}
	out := make([]Membership, 0, len(pairs))
	for _, p := range pairs {
		// org ids hold no ':' (names.ValidOrg), so the first one splits.
		org, role, _ := strings.Cut(p, ":")
		m := Membership{Org: org, Role: Role(role)}
		// Sorted by organization: an assignment and a mapping (or two
		// mappings) in one organization give the higher of their roles.
		if n := len(out); n > 0 && out[n-1].Org == m.Org {
			if m.Role.rank() > out[n-1].Role.rank() {
				out[n-1] = m
			}
			continue
		}
		out = append(out, m)
	}
	return out, operator, nil
}

// matchedClaim is a claim mapping a sign-in's ID token met, as
// admin_signins.matched holds it.
type matchedClaim struct {
	Org   string `json:"org"`
	Claim string `json:"claim"`
	Value string `json:"value"`
}

// recordSignin records, for the per-request re-check (migration 00030),
// whether (issuer, subject)'s admin sign-in now was the Policy's, and which
// of issuer's claim mappings its ID token's claims met.
func (st *Store) recordSignin(ctx context.Context, issuer, subject string, operator bool, claims map[string]any) error {
	maps, err := st.ClaimMappings(ctx, "", issuer, Actor{})
	if err != nil {
		return err
	}
	matched := []matchedClaim{}
	for _, m := range maps {
		if claimHolds(claims, m.Claim, m.Value) {
			matched = append(matched, matchedClaim{Org: m.Org, Claim: m.Claim, Value: m.Value})
		}
	}
	if _, err := st.pool.Exec(ctx, upsertSignin, issuer, subject, operator, matched, st.now().UTC()); err != nil {
		return fmt.Errorf("admin: record sign-in: %w", err)
	}
	return nil
}

// ClaimMapping gives Role in Org to whoever signs in at Issuer with an ID
// token whose Claim (dotted for nested objects, as the Policy's) holds Value
// (or, for a list, contains it).
type ClaimMapping struct {
	Org, Issuer, Claim, Value string
	Role                      Role
	CreatedAt                 time.Time
	CreatedBy                 string
}

func checkMapping(m ClaimMapping) error {
	if err := checkAssignment(m.Org, m.Issuer, "x"); err != nil {
		return err
	}
	for _, v := range []string{m.Claim, m.Value} {
		if v == "" || len(v) > 200 || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return problem.Detail(ErrInvalid, "a claim NAME=VALUE of 1-200 characters each is required")
		}
	}
	return nil
}

// MapClaim adds (or changes the role of) a claim mapping; audited as
// admin.claim_mapped. ErrNotFound when the organization does not exist.
func (st *Store) MapClaim(ctx context.Context, m ClaimMapping, by Actor) (ClaimMapping, error) {
	if err := checkMapping(m); err != nil {
		return ClaimMapping{}, err
	}
	if !m.Role.Valid() {
		return ClaimMapping{}, problem.Detail(ErrInvalid, "role must be one of owner, admin, security, viewer")
	}
	if !by.actsFor(m.Org) {
		return ClaimMapping{}, errNoOrg(m.Org)
	}
	if err := st.checkIssuerFor(ctx, m.Org, m.Issuer); err != nil {
		return ClaimMapping{}, err
	}
	m.CreatedAt, m.CreatedBy = st.now().UTC().Truncate(time.Microsecond), by.Name
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, upsertClaimMapping, m.Org, m.Issuer, m.Claim, m.Value, string(m.Role), m.CreatedAt, m.CreatedBy)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" {
			return errNoOrg(m.Org)
		}
		if err != nil {
			return err
		}
		return writeAudit(ctx, tx, Event{Kind: "admin.claim_mapped", Org: m.Org, Target: m.Org, Detail: map[string]any{
			"issuer": m.Issuer, "claim": m.Claim, "value": m.Value, "granted_role": string(m.Role)}}, by)
	})
	if errors.Is(err, ErrNotFound) {
		return ClaimMapping{}, err
	}
	if err != nil {
		return ClaimMapping{}, fmt.Errorf("admin: map claim: %w", err)
	}
	return m, nil
}

// UnmapClaim removes a claim mapping: the admins it gave a role lose it on
// their next request. Audited as admin.claim_unmapped; ErrNotFound when
// there was none.
func (st *Store) UnmapClaim(ctx context.Context, m ClaimMapping, by Actor) error {
	if err := checkMapping(m); err != nil {
		return err
	}
	if !by.actsFor(m.Org) {
		return errNoOrg(m.Org)
	}
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var role string
		err := tx.QueryRow(ctx, deleteClaimMapping, m.Org, m.Issuer, m.Claim, m.Value).Scan(&role)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.Detail(ErrNotFound, "no such claim mapping of the organization")
		}
		if err != nil {
			return err
		}
		return writeAudit(ctx, tx, Event{Kind: "admin.claim_unmapped", Org: m.Org, Target: m.Org, Detail: map[string]any{
			"issuer": m.Issuer, "claim": m.Claim, "value": m.Value, "revoked_role": role}}, by)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("admin: unmap claim: %w", err)
	}
	return err
}

// ClaimMappings lists the claim mappings of org ("" with an operator: every
// organization's) at issuer ("": every issuer).
func (st *Store) ClaimMappings(ctx context.Context, org, issuer string, by Actor) ([]ClaimMapping, error) {
	if org != "" && !names.ValidOrg(org) {
		return nil, errNoOrg(org)
	}
	if org == "" {
		org = by.Org
	}
	if !by.actsFor(org) {
		return nil, errNoOrg(org)
	}
	rows, err := st.pool.Query(ctx, selectClaimMappings, org, issuer)
	if err != nil {
		return nil, fmt.Errorf("admin: list claim mappings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClaimMapping, error) {
		var m ClaimMapping
		err := r.Scan(&m.Org, &m.Issuer, &m.Claim, &m.Value, &m.Role, &m.CreatedAt, &m.CreatedBy)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("admin: list claim mappings: %w", err)
	}
	return out, nil
}

// OrgExists reports whether the organization id exists.
func (st *Store) OrgExists(ctx context.Context, id string) (bool, error) {
	if !names.ValidOrg(id) {
		return false, nil
	}
	var ok bool
	if err := st.pool.QueryRow(ctx, selectOrgExists, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("admin: read organization: %w", err)
	}
	return ok, nil
}
