package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/web"
)

const orgsUsage = `usage:
  connectd orgs create ID --name NAME
      ID: 1-40 of a-z 0-9 -, not starting or ending with -
  connectd orgs list
  connectd orgs show ID
      the organization, its provider apps and how many MCP servers (clients) it has
  connectd orgs update ID [--name NAME] [--brand-color #rrggbb] [--logo-url URL] [--deployment-issuers true|false]
      "" removes a brand color or logo; the logo is an https image; --deployment-issuers false: the
      organization's MCP servers accept user tokens of its own issuers only (never for the default one)
  connectd orgs delete ID --yes
      refused while it has MCP servers (clients) or connections; its apps and admin keys go with it
  connectd orgs apps set ORG PROVIDER --client-id ID [--client-secret-file PATH]
      the organization's own OAuth app at PROVIDER; the client secret is read from the file or,
      without it, from stdin (piped, never typed or given as a flag), sealed, and never shown again;
      a new client id is a new app: connections made through the old one must be made again
  connectd orgs apps list ORG
  connectd orgs apps remove ORG PROVIDER
  connectd orgs issuers add ID --org ORG --issuer URL [--jwks-url URL] [--allow-plain-jwt] [--login --client-id ID]
      [--client-secret-file PATH | --client-secret-env VAR] [--scopes a,b]
      the organization's own trusted issuer (its MCP authorization server): its MCP servers accept its
      user tokens and its users may sign in at it; ID and URL unique across the deployment; the login
      client secret is read from the file or the variable (never a flag value), sealed, never shown again
  connectd orgs issuers list --org ORG
  connectd orgs issuers remove ID --org ORG
      its tokens are refused and logins at it fail, on every replica within a second
See docs/organizations.md.`

// orgsSubUsage is each orgs subcommand's arguments, for its -h.
var orgsSubUsage = map[string]string{
	"create": " ID --name NAME",
	"list":   "",
	"show":   " ID",
	"update": " ID [--name NAME] [--brand-color #rrggbb] [--logo-url URL] [--deployment-issuers true|false]",
	"delete": " ID --yes",
}

var orgsAppsSubUsage = map[string]string{
	"set":    " ORG PROVIDER --client-id ID [--client-secret-file PATH]",
	"list":   " ORG",
	"remove": " ORG PROVIDER",
}

// orgsCmd manages organizations and their provider apps: connectd orgs
// create|list|show|update|delete|apps. It talks to the database directly;
// changes are audited as by cli:$USER. stdin is where apps set reads a
// client secret given no file.
func orgsCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	sub, args, err := groupArgs(args, orgsUsage, stdout)
	if err != nil {
		return err
	}
	switch sub {
	case "apps":
		return orgsAppsCmd(ctx, args, getenv, stdin, stdout, stderr)
	case "issuers":
		return orgsIssuersCmd(ctx, args, getenv, stdout, stderr)
	}
	help, ok := orgsSubUsage[sub]
	if !ok {
		return &usageError{fmt.Sprintf("unknown orgs command %q\n%s", sub, orgsUsage)}
	}
	fset := flag.NewFlagSet("orgs "+sub, flag.ContinueOnError)
	var name, color, logo string
	var nameSet, colorSet, logoSet, yes bool
	var deployment *bool
	want := 1
	switch sub {
	case "create":
		fset.StringVar(&name, "name", "", "the organization's display name (required)")
	case "list":
		want = 0
	case "update":
		fset.Func("name", "new display name", func(v string) error { name, nameSet = v, true; return nil })
		fset.Func("brand-color", `brand color, #rrggbb ("" removes it)`, func(v string) error { color, colorSet = v, true; return nil })
		fset.Func("logo-url", `https URL of its logo ("" removes it)`, func(v string) error { logo, logoSet = v, true; return nil })
		fset.Func("deployment-issuers", "true|false: whether its MCP servers accept the deployment's issuers (CONNECTD_ISSUERS) besides its own",
			func(v string) error {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return errors.New("must be true or false")
				}
				deployment = &b
				return nil
			})
	case "delete":
		fset.BoolVar(&yes, "yes", false, "really delete (without it, nothing happens)")
	}
	text := "usage: connectd orgs " + sub + help
	pos, err := parseFlags(fset, text, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != want {
		return &usageError{text}
	}
	switch {
	case sub == "create" && strings.TrimSpace(name) == "":
		return &usageError{"--name is required\n" + text}
	case sub == "update" && !nameSet && !colorSet && !logoSet && deployment == nil:
		return &usageError{"orgs update: nothing to change (give --name, --brand-color, --logo-url or --deployment-issuers)\n" + text}
	case sub == "delete" && !yes:
		return &usageError{"orgs delete removes the organization with its provider apps and admin keys; it cannot be undone: add --yes"}
	}
	// Checked before the database is opened: the flag is named.
	if colorSet {
		color = strings.ToLower(color)
		if err := org.CheckBrandColor(color); err != nil {
			return flagErr("--brand-color", err)
		}
	}
	if logoSet {
		if err := org.CheckLogoURL(logo); err != nil {
			return flagErr("--logo-url", err)
		}
	}
	if nameSet || sub == "create" {
		name = strings.TrimSpace(name)
		if err := org.CheckName(name); err != nil {
			return flagErr("--name", err)
		}
	}

	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{})
	if err != nil {
		return err
	}
	defer pool.Close()
	store := org.New(org.Config{Pool: pool, Logger: logger, CacheTTL: -1})
	by := cliActor(getenv).Name

	switch sub {
	case "create":
		o, err := store.Create(ctx, pos[0], name, by)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "id: %s\nname: %s\n", o.ID, o.Name)
		fmt.Fprintf(stderr, "Register its MCP servers with: connectd clients create --org %s ...; "+
			"its own OAuth apps with: connectd orgs apps set %s PROVIDER --client-id ID\n", o.ID, o.ID)
		return nil
	case "list":
		list, err := store.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tBRAND COLOR\tLOGO\tCREATED")
		for _, o := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.ID, o.Name, dash(o.BrandColor), dash(o.LogoURL),
				o.CreatedAt.UTC().Format("2006-01-02 15:04Z"))
		}
		return tw.Flush()
	case "show":
		o, err := store.Get(ctx, pos[0])
		if err != nil {
			return orgErr(err)
		}
		apps, err := store.Apps(ctx, o.ID)
		if err != nil {
			return err
		}
		clients, err := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool}).List(ctx)
		if err != nil {
			return err
		}
		var n int64
		for _, c := range clients {
			if c.Org == o.ID {
				n++
			}
		}
		fmt.Fprintf(stdout, "id: %s\nname: %s\nbrand color: %s\nlogo: %s\ncreated: %s\nclients: %d\ndeployment issuers: %t\n",
			o.ID, o.Name, dash(o.BrandColor), dash(o.LogoURL), o.CreatedAt.UTC().Format("2006-01-02 15:04Z"), n, o.DeploymentIssuers)
		issuers, err := store.Issuers(ctx, o.ID)
		if err != nil {
			return err
		}
		if err := printIssuers(stdout, issuers); err != nil {
			return err
		}
		return printApps(stdout, apps, cfg)
	case "update":
		var u org.Update
		if nameSet {
			u.Name = &name
		}
		if colorSet {
			u.BrandColor = &color
		}
		if logoSet {
			u.LogoURL = &logo
		}
		u.DeploymentIssuers = deployment
		o, err := store.Update(ctx, pos[0], u, by)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "updated %s\nname: %s\nbrand color: %s\nlogo: %s\ndeployment issuers: %t\n", o.ID, o.Name,
			dash(o.BrandColor), dash(o.LogoURL), o.DeploymentIssuers)
		return nil
	case "delete":
		if err := store.Delete(ctx, pos[0], by); err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "deleted %s\n", pos[0])
		return nil
	}
	return nil
}

// orgsAppsCmd is connectd orgs apps set|list|remove.
func orgsAppsCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	appsUsage := "usage:\n  connectd orgs apps set" + orgsAppsSubUsage["set"] + "\n  connectd orgs apps list" +
		orgsAppsSubUsage["list"] + "\n  connectd orgs apps remove" + orgsAppsSubUsage["remove"]
	sub, args, err := groupArgs(args, appsUsage, stdout)
	if err != nil {
		return err
	}
	help, ok := orgsAppsSubUsage[sub]
	if !ok {
		return &usageError{fmt.Sprintf("unknown orgs apps command %q\n%s", sub, appsUsage)}
	}
	fset := flag.NewFlagSet("orgs apps "+sub, flag.ContinueOnError)
	var clientID, secretFile string
	want := 2
	switch sub {
	case "set":
		fset.StringVar(&clientID, "client-id", "", "the client id the provider issued for the organization's app (required)")
		fset.StringVar(&secretFile, "client-secret-file", "", "a file holding its client secret (default: read it from stdin)")
	case "list":
		want = 1
	}
	text := "usage: connectd orgs apps " + sub + help
	if err := refuseSecretFlag(args, "pipe it on stdin or give --client-secret-file"); err != nil {
		return err
	}
	pos, err := parseFlags(fset, text, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != want {
		return &usageError{text}
	}
	var secret provider.Secret
	if sub == "set" {
		if clientID = strings.TrimSpace(clientID); clientID == "" {
			return &usageError{"--client-id is required\n" + text}
		}
		if secret, err = readClientSecret(stdin, secretFile); err != nil {
			return err
		}
	}

	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{providers: sub == "set"}) // set checks the app at the provider
	if err != nil {
		return err
	}
	defer pool.Close()
	oc := org.Config{Pool: pool, Logger: logger, CacheTTL: -1}
	if sub == "set" {
		if cfg.Vault.Keyring == nil {
			return &ConfigError{Var: "CONNECTD_VAULT_KEYS",
				Problem: "is required for orgs apps set: app secrets are sealed with it (or CONNECTD_VAULT_KEYS_FILE)"}
		}
		cat, err := server.NewCatalog(ctx, cfg.server(pool, web.NewLogger(io.Discard, cfg.LogLevel, cfg.LogFormat)))
		if err != nil {
			return err
		}
		oc.Keyring, oc.Catalog = cfg.Vault.Keyring, cat
	}
	store := org.New(oc)
	by := cliActor(getenv).Name

	switch sub {
	case "set":
		a, replaced, err := store.SetApp(ctx, pos[0], pos[1], clientID, secret, by)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "app: %s\norg: %s\nprovider: %s\nclient id: %s\nredirect URI: %s\n",
			a.ID, a.Org, a.Provider, a.ClientID, redirectURI(cfg))
		fmt.Fprintln(stderr, "Register the redirect URI above at the provider for this app. The secret is sealed and never shown again.")
		if replaced != "" {
			fmt.Fprintf(stderr, "The client id changed, so this is a new app replacing %s: connections made through it "+
				"cannot be refreshed with the new one; their users connect again.\n", replaced)
		}
		return nil
	case "list":
		apps, err := store.Apps(ctx, pos[0])
		if err != nil {
			return orgErr(err)
		}
		if _, err := store.Get(ctx, pos[0]); err != nil {
			return orgErr(err)
		}
		return printApps(stdout, apps, cfg)
	case "remove":
		a, err := store.RemoveApp(ctx, pos[0], pos[1], by)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "removed %s (%s at %s, client id %s)\n", a.ID, a.Org, a.Provider, a.ClientID)
		fmt.Fprintln(stderr, "Connections made through it can no longer be refreshed; new ones use the deployment's app "+
			"only where the provider's shared_app allows.")
		return nil
	}
	return nil
}

// readClientSecret reads a client secret from file, or from stdin when
// file is "" — never from a terminal, where it would be echoed. One line,
// trimmed; the secret is never repeated in an error.
func readClientSecret(stdin io.Reader, file string) (provider.Secret, error) {
	var b []byte
	var err error
	if file != "" {
		if b, err = os.ReadFile(file); err != nil {
			return "", &usageError{"--client-secret-file cannot be read (" + describeFileError(err) + ")"}
		}
	} else {
		if f, ok := stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				return "", &usageError{"orgs apps set reads the client secret from stdin, which is a terminal here " +
					"(it would be echoed): pipe it in (e.g. connectd orgs apps set ... < secret.txt) or give --client-secret-file"}
			}
		}
		if stdin == nil {
			return "", &usageError{"no client secret: pipe it on stdin or give --client-secret-file"}
		}
		if b, err = io.ReadAll(io.LimitReader(stdin, org.MaxSecret+2)); err != nil {
			return "", fmt.Errorf("read the client secret from stdin: %w", err)
		}
	}
	defer clear(b)
	v := strings.TrimSpace(string(b))
	switch {
	case v == "":
		return "", &usageError{"the client secret is empty (stdin or --client-secret-file must hold it)"}
	case len(v) > org.MaxSecret || strings.ContainsAny(v, "\r\n"):
		return "", &usageError{fmt.Sprintf("the client secret must be one line of at most %d bytes", org.MaxSecret)}
	}
	return provider.Secret(v), nil
}

// redirectURI is the redirect URI to register at a provider for an app.
func redirectURI(cfg *Config) string {
	if cfg.PublicURL == nil {
		return "<CONNECTD_PUBLIC_URL>" + provider.CallbackPath + " (CONNECTD_PUBLIC_URL is not set here)"
	}
	return strings.TrimRight(cfg.PublicURL.String(), "/") + provider.CallbackPath
}

func printApps(stdout io.Writer, apps []org.App, cfg *Config) error {
	if len(apps) == 0 {
		fmt.Fprintln(stdout, "apps: none (the deployment's apps, where each provider's shared_app allows)")
		return nil
	}
	fmt.Fprintf(stdout, "redirect URI (register it at each provider): %s\n", redirectURI(cfg))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APP\tPROVIDER\tCLIENT ID\tSECRET\tUPDATED")
	for _, a := range apps {
		secret := "none"
		if a.HasSecret {
			secret = "set"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.Provider, a.ClientID, secret, a.UpdatedAt.UTC().Format("2006-01-02 15:04Z"))
	}
	return tw.Flush()
}

// orgErr makes the store's refusals of what was typed usage errors (exit
// 2), with their description.
func orgErr(err error) error {
	for _, kind := range []error{problem.ErrInvalid, problem.ErrNotFound, problem.ErrConflict} {
		if errors.Is(err, kind) {
			if d, ok := problem.Description(err); ok {
				return &usageError{d}
			}
			return &usageError{err.Error()}
		}
	}
	return err
}

// flagErr is a refusal of one flag's value, naming it.
func flagErr(flagName string, err error) error {
	d, ok := problem.Description(err)
	if !ok {
		d = err.Error()
	}
	return &usageError{flagName + ": " + d}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// refuseSecretFlag refuses --client-secret before the flags are parsed,
// whose errors would quote the value: a secret in a flag ends up in shell
// history and ps. instead says what to give.
func refuseSecretFlag(args []string, instead string) error {
	for _, a := range args {
		if n := strings.TrimLeft(a, "-"); a != n && (n == "client-secret" || strings.HasPrefix(n, "client-secret=")) {
			return &usageError{"--client-secret: a client secret is never given as a flag value (shell history, ps); " + instead}
		}
	}
	return nil
}
