package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/org"
)

var orgsIssuersSubUsage = map[string]string{
	"add": " ID --org ORG --issuer URL [--jwks-url URL] [--allow-plain-jwt] [--login --client-id ID]" +
		" [--client-secret-file PATH | --client-secret-env VAR] [--scopes a,b]",
	"list":   " --org ORG",
	"remove": " ID --org ORG",
}

// orgsIssuersCmd is connectd orgs issuers add|list|remove: an
// organization's own trusted issuers (docs/organizations.md, "Trusted
// issuers").
func orgsIssuersCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	usage := "usage:\n  connectd orgs issuers add" + orgsIssuersSubUsage["add"] + "\n  connectd orgs issuers list" +
		orgsIssuersSubUsage["list"] + "\n  connectd orgs issuers remove" + orgsIssuersSubUsage["remove"]
	sub, args, err := groupArgs(args, usage, stdout)
	if err != nil {
		return err
	}
	help, ok := orgsIssuersSubUsage[sub]
	if !ok {
		return &usageError{fmt.Sprintf("unknown orgs issuers command %q\n%s", sub, usage)}
	}
	fset := flag.NewFlagSet("orgs issuers "+sub, flag.ContinueOnError)
	var orgID, issuerURL, jwksURL, clientID, secretFile, secretEnv, scopes string
	var plainJWT, login bool
	fset.StringVar(&orgID, "org", "", "the organization (required)")
	want := 1
	switch sub {
	case "add":
		fset.StringVar(&issuerURL, "issuer", "", "the issuer URL, exactly as its tokens' iss (required)")
		fset.StringVar(&jwksURL, "jwks-url", "", "its JWKS URL (default: jwks_uri from its discovery document)")
		fset.BoolVar(&plainJWT, "allow-plain-jwt", false, "accept access tokens whose typ is JWT or absent, not at+jwt")
		fset.BoolVar(&login, "login", false, "browsers may sign in at it (needs --client-id; redirect URI <public URL>/login/callback)")
		fset.StringVar(&clientID, "client-id", "", "connectd's client id at the issuer, for login")
		fset.StringVar(&secretFile, "client-secret-file", "", "a file holding connectd's client secret at the issuer (none: a public client, PKCE only)")
		fset.StringVar(&secretEnv, "client-secret-env", "", "the name of an environment variable holding that client secret")
		fset.StringVar(&scopes, "scopes", "", "comma-separated scopes asked for at login besides openid")
	case "list":
		want = 0
	}
	text := "usage: connectd orgs issuers " + sub + help
	if err := refuseSecretFlag(args, "give --client-secret-file or --client-secret-env"); err != nil {
		return err
	}
	pos, err := parseFlags(fset, text, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != want {
		return &usageError{text}
	}
	switch {
	case orgID == "":
		return &usageError{"--org is required\n" + text}
	case !names.ValidOrg(orgID):
		return &usageError{"--org: an organization id is 1-40 of a-z 0-9 -, not starting or ending with -"}
	}
	var is mcpauth.Issuer
	if sub == "add" {
		is = mcpauth.Issuer{ID: pos[0], URL: strings.TrimSpace(issuerURL), JWKSURL: strings.TrimSpace(jwksURL),
			AllowPlainJWT: plainJWT, Login: login, ClientID: strings.TrimSpace(clientID)}
		for _, s := range strings.Split(scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				is.Scopes = append(is.Scopes, s)
			}
		}
		switch {
		case is.URL == "":
			return &usageError{"--issuer is required\n" + text}
		case is.Login && is.ClientID == "":
			return &usageError{"--login needs --client-id"}
		case !is.Login && (is.ClientID != "" || secretFile != "" || secretEnv != ""):
			return &usageError{"--client-id and a client secret are for login: add --login"}
		case secretFile != "" && secretEnv != "":
			return &usageError{"give --client-secret-file or --client-secret-env, not both"}
		case secretFile != "":
			b, err := os.ReadFile(secretFile)
			if err != nil {
				return &usageError{"--client-secret-file cannot be read (" + describeFileError(err) + ")"}
			}
			is.ClientSecret = strings.TrimSpace(string(b))
			clear(b)
			if is.ClientSecret == "" {
				return &usageError{"--client-secret-file is empty"}
			}
		case secretEnv != "":
			if is.ClientSecret = strings.TrimSpace(getenv(secretEnv)); is.ClientSecret == "" {
				return &usageError{"--client-secret-env names " + secretEnv + ", which is empty or unset"}
			}
		}
	}

	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{})
	if err != nil {
		return err
	}
	defer pool.Close()
	oc := org.Config{Pool: pool, Logger: logger, CacheTTL: -1, DeploymentIssuers: cfg.Identity.Issuers, AllowHTTP: cfg.Dev}
	if is.ClientSecret != "" {
		if cfg.Vault.Keyring == nil {
			return &ConfigError{Var: "CONNECTD_VAULT_KEYS",
				Problem: "is required for orgs issuers add with a client secret: it is sealed with it (or CONNECTD_VAULT_KEYS_FILE)"}
		}
		oc.Keyring = cfg.Vault.Keyring
	}
	store := org.New(oc)
	by := cliActor(getenv).Name

	switch sub {
	case "add":
		added, err := store.AddIssuer(ctx, orgID, is, by)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "issuer: %s\norg: %s\nurl: %s\nlogin: %t\n", added.ID, added.Org, added.URL, added.Login)
		if added.Login {
			fmt.Fprintf(stdout, "client id: %s\nredirect URI: %s\n", added.ClientID, loginRedirectURI(cfg))
			fmt.Fprintln(stderr, "Register the redirect URI above at the issuer for connectd's client.")
		}
		if added.HasSecret {
			fmt.Fprintln(stderr, "The client secret is sealed and never shown again.")
		}
		return nil
	case "list":
		list, err := store.Issuers(ctx, orgID)
		if err != nil {
			return orgErr(err)
		}
		o, err := store.Get(ctx, orgID)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "deployment issuers: %t\n", o.DeploymentIssuers)
		return printIssuers(stdout, list)
	case "remove":
		removed, err := store.RemoveIssuer(ctx, orgID, pos[0], by)
		if err != nil {
			return orgErr(err)
		}
		fmt.Fprintf(stdout, "removed issuer %s (%s) of %s\n", removed.ID, removed.URL, removed.Org)
		fmt.Fprintln(stderr, "Its user tokens are refused and sign-ins at it fail on every replica; "+
			"sessions already started at it last until they end.")
		return nil
	}
	return nil
}

// loginRedirectURI is the redirect URI to register at an issuer for login.
func loginRedirectURI(cfg *Config) string {
	if cfg.PublicURL == nil {
		return "<CONNECTD_PUBLIC_URL>/login/callback (CONNECTD_PUBLIC_URL is not set here)"
	}
	return strings.TrimRight(cfg.PublicURL.String(), "/") + "/login/callback"
}

func printIssuers(stdout io.Writer, list []org.OrgIssuer) error {
	if len(list) == 0 {
		fmt.Fprintln(stdout, "issuers: none of its own")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tURL\tLOGIN\tCLIENT ID\tSECRET\tUPDATED")
	for _, is := range list {
		secret := "none"
		if is.HasSecret {
			secret = "set"
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\n", is.ID, is.URL, is.Login, dash(is.ClientID), secret,
			is.UpdatedAt.UTC().Format("2006-01-02 15:04Z"))
	}
	return tw.Flush()
}
