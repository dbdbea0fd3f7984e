package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
	"github.com/connectd/connectd/internal/webhook"
)

const adminUsage = `usage:
  connectd admin connections list [--user SUBJECT] [--issuer URL] [--provider ID] [--status STATUS]
                                  [--client CLIENT_ID] [--org ORG] [--limit N] [--after CURSOR]
  connectd admin connections show ID
  connectd admin connections revoke ID --yes
  connectd admin sessions end --user SUBJECT --issuer URL
  connectd admin clients cut-off ID --since TIME [--revoke] --yes
  connectd admin events [--window 1h|24h|7d|30d|90d] [--kind KIND | --all] [--org ORG] [--limit N]
  connectd admin keys create --name NAME [--expires DURATION] [--org ORG --role ROLE]
  connectd admin keys list
  connectd admin keys revoke ID
  connectd admin roles grant ORG --issuer URL --subject SUBJECT --role owner|admin|security|viewer
  connectd admin roles list [ORG]
  connectd admin roles revoke ORG --issuer URL --subject SUBJECT
  connectd admin roles map ORG --issuer URL --claim NAME=VALUE --role owner|admin|security|viewer
  connectd admin roles unmap ORG --issuer URL --claim NAME=VALUE
See docs/admin.md.`

// adminSubUsage is the lines of adminUsage for one admin subcommand.
func adminSubUsage(group, sub string) string {
	prefix := strings.TrimSpace("connectd admin " + group + " " + sub)
	var b strings.Builder
	b.WriteString("usage:\n")
	in := false
	for _, l := range strings.Split(adminUsage, "\n")[1:] {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, prefix+" ") || t == prefix:
			in = true
		case strings.HasPrefix(t, "connectd "), strings.HasPrefix(t, "See "):
			in = false
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("See docs/admin.md.")
	return b.String()
}

// adminCmd is the operators' CLI over the database: inspect and revoke
// linked accounts, end a user's browser sessions, read the audit trail,
// manage admin API keys. It never
// prints a credential: the admin Store does not read them.
func adminCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	group, args, err := groupArgs(args, adminUsage, stdout)
	if err != nil {
		return err
	}
	var sub string
	if group != "events" {
		if sub, args, err = groupArgs(args, adminUsage, stdout); err != nil {
			return err
		}
	}
	if group == "roles" {
		return adminRolesCmd(ctx, sub, args, getenv, stdout, stderr) // admin_roles.go
	}
	fset := flag.NewFlagSet("admin "+group+" "+sub, flag.ContinueOnError)
	var (
		f                admin.Filter
		after, kind      string
		name, window     string
		limit            int
		yes, all         bool
		expires          string
		want             int
		needsVaultRevoke bool
		since            string
		revoke           bool
		keyOrg, keyRole  string
	)
	switch group + " " + sub {
	case "connections list":
		fset.StringVar(&f.Subject, "user", "", "only this user (subject)")
		fset.StringVar(&f.Issuer, "issuer", "", "only users of this issuer (URL)")
		fset.StringVar(&f.Provider, "provider", "", "only this provider")
		fset.StringVar(&f.Status, "status", "", "only this status: "+strings.Join(admin.Statuses(), ", "))
		fset.StringVar(&f.Client, "client", "", "only connections this MCP server (client id) holds consent to")
		fset.StringVar(&f.Org, "org", "", "only connections of this organization")
		fset.IntVar(&limit, "limit", admin.DefaultPageSize, "rows per page (1-"+strconv.Itoa(admin.MaxPageSize)+")")
		fset.StringVar(&after, "after", "", "continue after this cursor (printed at the end of a page)")
	case "connections show":
		want = 1
	case "connections revoke":
		want, needsVaultRevoke = 1, true
		fset.BoolVar(&yes, "yes", false, "confirm: delete the credentials, revoke them at the provider, withdraw every consent")
	case "clients cut-off":
		want, needsVaultRevoke = 1, true
		fset.StringVar(&since, "since", "", "list (and revoke) the connections whose credential it read since then (RFC 3339, or a duration back such as 72h or 7d)")
		fset.BoolVar(&revoke, "revoke", false, "revoke those connections at the provider too")
		fset.BoolVar(&yes, "yes", false, "confirm: disable the client now")
	case "sessions end":
		fset.StringVar(&f.Subject, "user", "", "the user (subject) whose browser sessions end (required)")
		fset.StringVar(&f.Issuer, "issuer", "", "the issuer (URL) the user signs in at (required)")
	case "events ":
		fset.StringVar(&window, "window", "24h", "how far back: 1h, 24h, 7d, 30d or 90d")
		fset.StringVar(&kind, "kind", "", "only events of this kind (default: security events)")
		fset.BoolVar(&all, "all", false, "every kind of event, not only security events")
		fset.StringVar(&f.Org, "org", "", "only this organization's audit trail (default: every organization's)")
		fset.IntVar(&limit, "limit", admin.DefaultPageSize, "events to list (1-"+strconv.Itoa(admin.MaxPageSize)+")")
	case "keys create":
		fset.StringVar(&name, "name", "", "what the key is for (shown in keys list)")
		fset.StringVar(&expires, "expires", "", "lifetime, e.g. 90d or 720h (default: until revoked)")
		fset.StringVar(&keyOrg, "org", "", "the organization the key acts for, alone (default: an operator key, every organization)")
		fset.StringVar(&keyRole, "role", "", "the key's role in --org: owner, admin, security or viewer")
	case "keys list":
	case "keys revoke":
		want = 1
	default:
		return &usageError{fmt.Sprintf("unknown admin command %q\n%s", strings.TrimSpace(group+" "+sub), adminUsage)}
	}
	pos, err := parseFlags(fset, adminSubUsage(group, sub), args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != want || limit < 0 || limit > admin.MaxPageSize {
		return &usageError{adminUsage}
	}
	if group+" "+sub == "clients cut-off" && (!yes || since == "") {
		return &usageError{"clients cut-off disables the client at once (its key stops working on every replica); " +
			"give --since and add --yes to confirm\n" + adminSubUsage(group, sub)}
	}
	if group+" "+sub == "connections revoke" && !yes {
		return &usageError{"connections revoke deletes the credentials, revokes them at the provider and withdraws " +
			"every consent; it cannot be undone. Add --yes to confirm."}
	}
	// --user and --issuer are taken byte for byte (docs/identity.md), never
	// trimmed: "alice " is another user than alice. What no identity can be
	// is refused by the admin Store (admin.ErrInvalid: exit 2).
	if group+" "+sub == "sessions end" && (f.Subject == "" || f.Issuer == "") {
		return &usageError{"sessions end needs --user SUBJECT and --issuer URL: a subject is unique only within its issuer\n" +
			adminSubUsage(group, sub)}
	}
	if kind != "" && all {
		return &usageError{"--kind and --all exclude each other"}
	}
	if (keyOrg == "") != (keyRole == "") {
		return &usageError{"--org and --role go together: a key of an organization has a role there; " +
			"without both the key is an operator's\n" + adminSubUsage(group, sub)}
	}
	var ttl time.Duration
	if expires != "" {
		if ttl, err = parseDays(expires); err != nil || ttl < time.Minute {
			return &usageError{"--expires must be a duration such as 90d or 720h"}
		}
	}

	// Revoking calls the provider: only then are the providers' secrets needed.
	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{providers: needsVaultRevoke && (group != "clients" || revoke)})
	if err != nil {
		return err
	}
	defer pool.Close()
	by := cliActor(getenv)

	if group == "keys" {
		return adminKeys(ctx, admin.NewKeys(pool, nil, logger), sub, pos, name, ttl, keyOrg, keyRole, by, stdout, stderr)
	}
	st, err := adminStore(ctx, cfg, pool, needsVaultRevoke)
	if err != nil {
		return err
	}
	switch group + " " + sub {
	case "clients cut-off":
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			d, derr := parseDays(since)
			if derr != nil || d <= 0 {
				return &usageError{"--since must be an RFC 3339 time or a duration back such as 72h or 7d"}
			}
			t = time.Now().Add(-d)
		}
		clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: cfg.Dev})
		c, err := st.CutOffClient(ctx, clients, pos[0], t, revoke, by)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "disabled %s\nconnections whose credential it read since %s: %d\n", pos[0],
			t.UTC().Format(time.RFC3339), len(c.Exposed))
		for _, x := range c.Exposed {
			fmt.Fprintf(stdout, "  %s  %s at %s, %s, last read %s\n", x.ConnectionID, visible(x.User.Subject),
				visible(x.User.Issuer), x.Provider, cliTime(x.LastRead))
		}
		if revoke {
			fmt.Fprintf(stdout, "revoked: %d, failed: %s\n", len(c.Revoked), orDash(strings.Join(c.Failed, " ")))
		} else if len(c.Exposed) > 0 {
			fmt.Fprintln(stdout, "not revoked: run again with --revoke, or revoke them one by one (admin connections revoke ID --yes)")
		}
		return nil
	case "connections list":
		return adminList(ctx, st, f, after, limit, stdout)
	case "connections show":
		return adminShow(ctx, st, pos[0], stdout)
	case "sessions end":
		user := identity.User{Issuer: f.Issuer, Subject: f.Subject}
		n, err := st.EndSessions(ctx, user, by)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "ended %d browser session(s) of %s at %s\n", n, visible(user.Subject), visible(user.Issuer))
		return nil
	case "connections revoke":
		rev, err := st.Revoke(ctx, pos[0], by)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "revoked %s (%s, %s at %s)\nat the provider: %s\nconsents withdrawn: %s\n", pos[0],
			rev.Connection.Provider, rev.Connection.User.Subject, rev.Connection.User.Issuer, rev.AtProvider,
			orDash(strings.Join(rev.Withdrawn, " ")))
		return nil
	default: // events
		return adminEvents(ctx, st, window, kind, f.Org, all, limit, stdout)
	}
}

// adminStore opens the admin Store. Reading needs no vault keys (account
// labels are shown when they are configured); revoking needs them and the
// provider catalog, to revoke at the provider.
func adminStore(ctx context.Context, cfg *Config, pool *pgxpool.Pool, revoke bool) (*admin.Store, error) {
	var vs *vault.Store
	var wh *webhook.Service // a revocation's connection.revoked events
	var err error
	switch {
	case revoke && cfg.Vault.Keyring == nil:
		return nil, &ConfigError{Var: "CONNECTD_VAULT_KEYS", Problem: "is required to revoke (or CONNECTD_VAULT_KEYS_FILE)"}
	case revoke:
		logger := web.NewLogger(io.Discard, cfg.LogLevel, cfg.LogFormat)
		sc := cfg.server(pool, logger)
		cat, err := server.NewCatalog(ctx, sc)
		if err != nil {
			return nil, err
		}
		if wh, err = server.NewWebhooks(sc, pool, cfg.Vault.Keyring); err != nil {
			return nil, err
		}
		if vs, err = server.NewVaultStore(sc, pool, cfg.Vault.Keyring, cat, wh); err != nil {
			return nil, err
		}
	case cfg.Vault.Keyring != nil:
		if vs, err = vault.New(vault.Config{Pool: pool, Keyring: cfg.Vault.Keyring}); err != nil {
			return nil, err
		}
	}
	return admin.NewStore(admin.StoreConfig{Pool: pool, Vault: vs, Webhooks: wh})
}

// adminErr turns what the operator got wrong into a usage error (exit 2).
func adminErr(err error) error {
	if errors.Is(err, admin.ErrNotFound) || errors.Is(err, admin.ErrInvalid) {
		return &usageError{err.Error()}
	}
	return err
}

func cliTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04Z")
}

// visible quotes a value whose edges are white space, so that the operator
// sees which one it is ("alice " is not alice), or that holds anything not
// printable (a provider's display name is the provider's text: a newline
// or an escape sequence must not forge lines or reach the terminal).
func visible(s string) string {
	if strings.TrimSpace(s) != s || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return strconv.Quote(s)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func adminList(ctx context.Context, st *admin.Store, f admin.Filter, after string, limit int, stdout io.Writer) error {
	var cur *admin.Cursor
	if after != "" {
		c, err := admin.ParseCursor(after)
		if err != nil {
			return adminErr(err)
		}
		cur = &c
	}
	p, err := st.Connections(ctx, f, cur, limit)
	if err != nil {
		return adminErr(err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tORG\tUSER\tISSUER\tPROVIDER\tACCOUNT\tSTATUS\tSCOPES\tCONSENTS\tCREATED\tREFRESHED\tEXPIRES")
	for _, c := range p.Connections {
		account := c.DisplayName
		if c.Label != "" {
			account = strings.TrimSpace(account + " (" + c.Label + ")")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", c.ID, c.Org, c.User.Subject, c.User.Issuer, c.Provider,
			orDash(visible(account)), c.Status, orDash(strings.Join(c.Scopes, ",")), c.Consents, cliTime(c.CreatedAt), cliTime(c.RefreshedAt),
			cliTime(c.ExpiresAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Next != nil {
		fmt.Fprintf(stdout, "\nmore: --after %s\n", p.Next)
	}
	return nil
}

func adminShow(ctx context.Context, st *admin.Store, id string, stdout io.Writer) error {
	d, err := st.Detail(ctx, "", id)
	if err != nil {
		return adminErr(err)
	}
	account := d.Account.Label
	if account == "" {
		account = d.Account.ID
	}
	if d.Label != "" {
		account += " (" + d.Label + ")"
	}
	if account == "" && d.AccountProblem != "" {
		account = "unknown: " + d.AccountProblem
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", d.ID}, {"user", d.User.Subject}, {"issuer", d.User.Issuer}, {"provider", d.Provider},
		{"account", orDash(visible(account))}, {"status", d.Status}, {"scopes", orDash(strings.Join(d.Scopes, " "))},
		{"created", cliTime(d.CreatedAt)}, {"updated", cliTime(d.UpdatedAt)}, {"refreshed", cliTime(d.RefreshedAt)},
		{"expires", cliTime(d.ExpiresAt)}, {"key version", strconv.Itoa(int(d.KeyVersion))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nconsented MCP servers:")
	if len(d.Consents) == 0 {
		fmt.Fprintln(stdout, "  none")
	}
	for _, k := range d.Consents {
		fmt.Fprintf(stdout, "  %s  %s  scopes: %s  since %s\n", k.ClientID, k.ClientName, orDash(strings.Join(k.Scopes, " ")),
			cliTime(k.GrantedAt))
	}
	fmt.Fprintln(stdout, "\naudit trail (newest first):")
	return printEvents(stdout, d.Events)
}

func printEvents(stdout io.Writer, evs []admin.Event) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tKIND\tACTOR\tUSER\tCLIENT\tPROVIDER\tTARGET\tREQUEST\tIP\tDETAIL")
	for _, e := range evs {
		detail := "-"
		if len(e.Detail) > 0 {
			b, _ := json.Marshal(e.Detail)
			detail = string(b)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Kind,
			orDash(e.Actor), orDash(e.Subject), orDash(e.ClientID), orDash(e.Provider), orDash(e.Target),
			orDash(e.RequestID), orDash(e.IP), detail)
	}
	return tw.Flush()
}

func adminEvents(ctx context.Context, st *admin.Store, window, kind, org string, all bool, limit int, stdout io.Writer) error {
	spans := map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour,
		"30d": 30 * 24 * time.Hour, "90d": 90 * 24 * time.Hour}
	span, ok := spans[window]
	if !ok {
		return &usageError{"--window must be 1h, 24h, 7d, 30d or 90d"}
	}
	since := time.Now().Add(-span)
	if org != "" && !names.ValidOrg(org) {
		return &usageError{"--org must be an organization id (see connectd orgs list)"}
	}
	counts, err := st.EventCounts(ctx, org, admin.SecurityPrefix, since)
	if err != nil {
		return adminErr(err)
	}
	if org != "" {
		fmt.Fprintf(stdout, "organization: %s\n", org)
	}
	fmt.Fprintf(stdout, "security events in the last %s:\n", window)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KIND\tREFUSALS\tAUDIT ROWS\tLATEST")
	for _, c := range counts {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", c.Kind, c.Occurrences, c.Events, cliTime(c.Last))
	}
	if len(counts) == 0 {
		fmt.Fprintln(tw, "  none\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	q := admin.EventQuery{Prefix: admin.SecurityPrefix, Kind: kind, Since: since, Limit: limit, Org: org}
	if kind != "" || all {
		q.Prefix = ""
	}
	evs, _, err := st.Events(ctx, q)
	if err != nil {
		return adminErr(err)
	}
	fmt.Fprintln(stdout, "\nlatest events (newest first):")
	return printEvents(stdout, evs)
}

func adminKeys(ctx context.Context, ks *admin.Keys, sub string, pos []string, name string, ttl time.Duration,
	org, role string, by admin.Actor, stdout, stderr io.Writer) error {
	switch sub {
	case "create":
		var r admin.Role
		if role != "" {
			var err error
			if r, err = admin.ParseRole(role); err != nil {
				return adminErr(err)
			}
		}
		k, secret, err := ks.CreateInOrg(ctx, name, ttl, org, r, by)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "id: %s\nkey: %s\n", k.ID, secret)
		if k.Org != "" {
			fmt.Fprintf(stdout, "org: %s\nrole: %s\n", k.Org, k.Role)
		}
		fmt.Fprintln(stderr, "The key is shown only now: connectd keeps only its hash. "+
			"Use it as Authorization: Bearer <key> on /admin/api/...; revoke it with `connectd admin keys revoke "+k.ID+"`.")
		return nil
	case "list":
		list, err := ks.List(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tORG\tROLE\tCREATED BY\tCREATED\tEXPIRES\tLAST USED")
		for _, k := range list {
			status := "active"
			switch {
			case !k.RevokedAt.IsZero():
				status = "revoked " + cliTime(k.RevokedAt)
			case !k.Active(now):
				status = "expired"
			}
			org, role := "(operator)", "-"
			if k.Org != "" {
				org, role = k.Org, string(k.Role)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, status, org, role, orDash(k.CreatedBy), cliTime(k.CreatedAt),
				cliTime(k.ExpiresAt), cliTime(k.LastUsedAt))
		}
		return tw.Flush()
	default: // revoke
		if err := ks.Revoke(ctx, pos[0], by); err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "revoked %s\n", pos[0])
		return nil
	}
}
