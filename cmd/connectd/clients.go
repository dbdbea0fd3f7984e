package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/egress"
	"github.com/connectd/connectd/internal/names"
)

const clientsUsage = `usage:
  connectd clients create --name NAME --resource URI [--resource URI...] [--provider ID...] [--proxy-only]
                          [--logo-url URL] [--homepage URL] [--jwks-url URL | --public-key FILE] [--org ID]
      --org: the organization it belongs to (default: default; connectd orgs list);
      --logo-url and --homepage: what users see of it on the consent and success pages;
      with --jwks-url or --public-key the MCP server authenticates with private_key_jwt only: no client key is made
  connectd clients update ID [--name NAME] [--resource URI...] [--provider ID...] [--no-providers]
                          [--logo-url URL] [--homepage URL]
      --resource and --provider replace the lists; a provider the catalog lacks is warned about
  connectd clients delete ID --yes
      deletes it with its keys, resource URIs (free again), approvals, webhook endpoints and connect links,
      audited; the users' connections stay. An enabled client that has been used must be disabled first.
  connectd clients list [--org ORG]
      every MCP server, or only organization ORG's
  connectd clients disable ID
  connectd clients enable ID
  connectd clients proxy-only ID [--off]
      proxy-only: the MCP server never receives a credential, only calls providers through /v1/proxy;
      it cannot be turned off while a proxy rule of the client asks the user (clear those rules first)
  connectd clients proxy-rules ID --provider P (--rule "GET /repos/*/issues*"... [--description TEXT] | --clear)
      what it may do through the proxy at P ("*" matches anything, slashes too); the description is shown on the consent page.
      A rule 'POST /repos/*/issues ask:1h "Open issues in your repositories"' asks the user before each matching call
      (the words are shown to them; ask:DURATION, 1m to 24h, lets them allow such calls for that long, plain ask only
      the one call): a client with a rule that asks is proxy-only
  connectd clients rotate-key ID [--overlap DURATION]
  connectd clients jwt-keys ID (--jwks-url URL | --public-key FILE | --clear) [--drop-keys]
      the keys its private_key_jwt client assertions are signed with (a JWKS URL, or a PEM/JWK public key file);
      --drop-keys ends its client keys at once
  connectd clients dpop ID [--off]
      every /v1 call must carry a DPoP proof (RFC 9449) signed by one of its jwt-keys
  connectd clients webhooks add|list|remove|deliveries|delivery|redeliver ...
      an MCP server's webhook endpoints and their deliveries: connectd clients webhooks --help`

// clientsSubUsage is each clients subcommand's arguments, for its -h.
var clientsSubUsage = map[string]string{
	"create":      " --name NAME --resource URI [--resource URI...] [--provider ID...] [--proxy-only] [--logo-url URL] [--homepage URL] [--jwks-url URL | --public-key FILE] [--org ID]",
	"update":      " ID [--name NAME] [--resource URI...] [--provider ID...] [--no-providers] [--logo-url URL] [--homepage URL]",
	"delete":      " ID --yes",
	"jwt-keys":    " ID (--jwks-url URL | --public-key FILE | --clear) [--drop-keys]",
	"dpop":        " ID [--off]",
	"list":        " [--org ORG]",
	"disable":     " ID",
	"enable":      " ID",
	"proxy-only":  " ID [--off]",
	"proxy-rules": " ID --provider P (--rule \"METHOD /pattern [ask[:DURATION] \\\"WORDS\\\"]\"... [--description TEXT] | --clear)",
	"rotate-key":  " ID [--overlap DURATION]",
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// clientsCmd manages MCP-server clients: connectd clients create|list|disable|enable|rotate-key|webhooks.
// It talks to the database directly; keys are printed once and stored hashed.
func clientsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := groupArgs(args, clientsUsage, stdout)
	if err != nil {
		return err
	}
	if sub == "webhooks" {
		return webhooksCmd(ctx, args, getenv, stdout, stderr)
	}
	fset := flag.NewFlagSet("clients "+sub, flag.ContinueOnError)
	var name string
	var resources, providers listFlag
	var overlap time.Duration
	var proxyOnly, off, clearRules, noProviders, yes bool
	nameSet := false
	var rules listFlag
	var ruleProvider, description, logoURL, homepage string
	var logoSet, homepageSet bool
	var jwksURL, publicKeyFile string
	var dropKeys bool
	orgID := names.DefaultOrg
	want := 0 // positional arguments
	switch sub {
	case "create":
		fset.StringVar(&name, "name", "", "display name of the MCP server")
		fset.Var(&resources, "resource", "resource URI its users' tokens are issued for (repeatable)")
		fset.Var(&providers, "provider", "provider id it may request (repeatable)")
		fset.BoolVar(&proxyOnly, "proxy-only", false, "it never receives a credential: it calls providers through connectd's proxy")
		fset.StringVar(&logoURL, "logo-url", "", "https URL of its logo, shown on the users' consent and success pages")
		fset.StringVar(&homepage, "homepage", "", "its homepage, linked from the users' consent and success pages")
		fset.StringVar(&orgID, "org", names.DefaultOrg, "the organization it belongs to (connectd orgs list)")
		assertionFlags(fset, &jwksURL, &publicKeyFile)
	case "update":
		want = 1
		fset.Func("name", "new display name of the MCP server", func(v string) error { name, nameSet = v, true; return nil })
		fset.Var(&resources, "resource", "resource URI its users' tokens are issued for (repeatable; replaces the list)")
		fset.Var(&providers, "provider", "provider id it may request (repeatable; replaces the list)")
		fset.BoolVar(&noProviders, "no-providers", false, "it may request no provider")
		fset.Func("logo-url", `https URL of its logo ("" removes it)`, func(v string) error { logoURL, logoSet = v, true; return nil })
		fset.Func("homepage", `its homepage ("" removes it)`, func(v string) error { homepage, homepageSet = v, true; return nil })
	case "delete":
		want = 1
		fset.BoolVar(&yes, "yes", false, "really delete (without it, nothing happens)")
	case "jwt-keys":
		want = 1
		assertionFlags(fset, &jwksURL, &publicKeyFile)
		fset.BoolVar(&clearRules, "clear", false, "remove its keys: it authenticates with client keys only")
		fset.BoolVar(&dropKeys, "drop-keys", false, "end its client keys (cks_…) now")
	case "proxy-only":
		want = 1
		fset.BoolVar(&off, "off", false, "let it read tokens again")
	case "dpop":
		want = 1
		fset.BoolVar(&off, "off", false, "no longer require DPoP proofs")
	case "proxy-rules":
		want = 1
		fset.StringVar(&ruleProvider, "provider", "", "the provider the rules are for (required)")
		fset.Var(&rules, "rule", `a call it may make, "METHOD /path/pattern", or one the user approves first, `+
			`'METHOD /path/pattern ask[:DURATION] "words for the user"' (repeatable)`)
		fset.StringVar(&description, "description", "", "what the rules allow, in words for the user's consent page")
		fset.BoolVar(&clearRules, "clear", false, "remove its rules at the provider")
	case "list":
		fset.StringVar(&orgID, "org", "", "list only this organization's (default: every organization's)")
	case "disable", "enable":
		want = 1
	case "rotate-key":
		want = 1
		fset.DurationVar(&overlap, "overlap", -1, "how long the old key keeps working (default CONNECTD_CLIENT_KEY_OVERLAP)")
	default:
		return &usageError{fmt.Sprintf("unknown clients command %q\n%s", sub, clientsUsage)}
	}
	pos, err := parseFlags(fset, "usage: connectd clients "+sub+clientsSubUsage[sub], args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != want {
		return &usageError{clientsUsage}
	}
	switch {
	case sub == "update" && noProviders && len(providers) > 0:
		return &usageError{"clients update: --provider and --no-providers do not go together"}
	case sub == "update" && !nameSet && len(resources) == 0 && len(providers) == 0 && !noProviders && !logoSet && !homepageSet:
		return &usageError{"clients update: nothing to change (give --name, --resource, --provider, --no-providers, " +
			"--logo-url or --homepage)\n" + clientsUsage}
	case sub == "create" && !names.ValidOrg(orgID):
		return &usageError{"--org: an organization id is 1-40 of a-z 0-9 -, not starting or ending with - (connectd orgs list)"}
	case sub == "delete" && !yes:
		return &usageError{"clients delete removes the client, its keys, resource URIs, approvals and webhook endpoints " +
			"(the users' connections stay); it cannot be undone: add --yes"}
	}

	keys, err := readAssertionKeys(jwksURL, publicKeyFile)
	if err != nil {
		return err
	}
	if sub == "jwt-keys" && clearRules == (keys.JWKSURL != "" || len(keys.PublicKey) > 0) {
		return &usageError{"jwt-keys needs one of --jwks-url, --public-key or --clear\n" + clientsUsage}
	}

	cfg, err := loadConfig(getenv, needs{db: true})
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	// The egress rules serve's: a JWKS URL is refused here for what its
	// guard can tell without resolving (an address in a private range).
	outbound, err := egress.New(egress.Config{AllowHosts: cfg.Egress.AllowHosts, Proxies: cfg.Egress.Proxies})
	if err != nil {
		return err
	}
	store := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: cfg.Dev, HTTPClient: outbound})

	switch sub {
	case "create":
		// Checked first, so that a bad URL registers nothing.
		if err := clientauth.CheckDisplay(logoURL, homepage, cfg.Dev); err != nil {
			return &usageError{err.Error()}
		}
		warnUnknownProviders(cfg, providers, stderr)
		c, key, err := store.CreateIn(ctx, orgID, name, resources, providers)
		if errors.Is(err, clientauth.ErrInvalidClient) {
			return &usageError{err.Error()}
		}
		if errors.Is(err, clientauth.ErrResourceTaken) {
			// The error names the resource and the client holding it.
			return &usageError{err.Error() + "\nA resource URI belongs to one client only, disabled ones included " +
				"(a client accepts user tokens issued for its resources); see docs/identity.md."}
		}
		if err != nil {
			return err
		}
		if proxyOnly {
			if err := store.SetProxyOnly(ctx, c.ID, true); err != nil {
				return err
			}
		}
		if logoURL != "" || homepage != "" {
			if err := store.SetDisplay(ctx, c.ID, logoURL, homepage); err != nil {
				return err
			}
		}
		if keys.JWKSURL != "" || len(keys.PublicKey) > 0 {
			keys.DropSecrets = true // its key never leaves it: no shared secret either
			if err := store.SetAssertionKeys(ctx, c.ID, keys); err != nil {
				// The client exists without usable credentials; say so.
				return fmt.Errorf("client %s was created, but its keys were refused (fix them with "+
					"connectd clients jwt-keys %s): %w", c.ID, c.ID, err)
			}
			fmt.Fprintf(stdout, "id: %s\nauth: private_key_jwt\n", c.ID)
			fmt.Fprintf(stderr, "Client assertions: iss = sub = %s, aud = <public URL>/oauth/token (token endpoint) or <public URL>/v1 (API).\n", c.ID)
			return nil
		}
		fmt.Fprintf(stdout, "id: %s\nkey: %s\n", c.ID, key)
		if c.Org != names.DefaultOrg {
			fmt.Fprintf(stdout, "org: %s\n", c.Org)
		}
		fmt.Fprintln(stderr, "The key is shown only now: connectd keeps only its hash. Give it to the MCP server as a secret.")
		return nil
	case "list":
		var list []clientauth.Client
		switch {
		case orgID == "":
			list, err = store.List(ctx)
		case !names.ValidOrg(orgID):
			return &usageError{fmt.Sprintf("--org %q is not an organization id (connectd orgs list)", orgID)}
		default:
			list, err = store.ListIn(ctx, orgID)
		}
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tORG\tSTATUS\tRESOURCES\tPROVIDERS\tCREATED\tLAST USED")
		for _, c := range list {
			status, last := "active", "-"
			if c.Disabled {
				status = "disabled"
			} else if c.ProxyOnly {
				status = "active, proxy-only"
			}
			if !c.LastUsedAt.IsZero() {
				last = c.LastUsedAt.UTC().Format("2006-01-02 15:04Z")
			}
			prov := strings.Join(c.Providers, ",")
			if prov == "" {
				prov = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Name, c.Org, status, strings.Join(c.Resources, ","), prov,
				c.CreatedAt.UTC().Format("2006-01-02 15:04Z"), last)
		}
		return tw.Flush()
	case "update":
		var u clientauth.ClientUpdate
		if nameSet {
			u.Name = &name
		}
		if len(resources) > 0 {
			u.Resources = resources
		}
		if len(providers) > 0 {
			u.Providers = providers
		} else if noProviders {
			u.Providers = []string{}
		}
		warnUnknownProviders(cfg, providers, stderr)
		if logoSet || homepageSet {
			// Checked first, so that a bad URL changes nothing; the one not
			// given keeps its value.
			cur, err := store.Get(ctx, pos[0])
			if err != nil {
				return clientErr(err)
			}
			if !logoSet {
				logoURL = cur.LogoURL
			}
			if !homepageSet {
				homepage = cur.Homepage
			}
			if err := clientauth.CheckDisplay(logoURL, homepage, cfg.Dev); err != nil {
				return &usageError{err.Error()}
			}
		}
		c, err := store.Update(ctx, pos[0], u, cliActor(getenv).Name)
		if errors.Is(err, clientauth.ErrResourceTaken) {
			return &usageError{err.Error() + "\nA resource URI belongs to one client only, disabled ones included; " +
				"delete the other client (connectd clients delete) or take the URI off it (connectd clients update) first."}
		}
		if err != nil {
			return clientErr(err)
		}
		if logoSet || homepageSet {
			if err := store.SetDisplay(ctx, c.ID, logoURL, homepage); err != nil {
				return clientErr(err)
			}
		}
		prov := strings.Join(c.Providers, ",")
		if prov == "" {
			prov = "-"
		}
		fmt.Fprintf(stdout, "updated %s\nname: %s\nresources: %s\nproviders: %s\n", c.ID, c.Name, strings.Join(c.Resources, ","), prov)
		return nil
	case "delete":
		d, err := store.Delete(ctx, pos[0], cliActor(getenv).Name)
		if errors.Is(err, clientauth.ErrClientInUse) {
			return &usageError{err.Error() + "\nDisabling stops its MCP server's calls at once on every replica; " +
				"then delete it. (connectd admin clients cut-off also shows what it held.)"}
		}
		if err != nil {
			return clientErr(err)
		}
		fmt.Fprintf(stdout, "deleted %s (%s): %s withdrawn, %s, %s; its resource URIs %s are free\n",
			d.Client.ID, d.Client.Name, plural(d.Approvals, "approval", "approvals"),
			plural(d.WebhookEndpoints, "webhook endpoint", "webhook endpoints"), plural(d.Elicitations, "connect link", "connect links"),
			strings.Join(d.Client.Resources, ","))
		fmt.Fprintln(stderr, "The users' connections stay (they are the users'; /account lists them, and they may be in use by other MCP servers).")
		return nil
	case "disable", "enable":
		if err := store.SetDisabled(ctx, pos[0], sub == "disable"); err != nil {
			return clientErr(err)
		}
		fmt.Fprintf(stdout, "%sd %s\n", sub, pos[0])
		return nil
	case "proxy-rules":
		if ruleProvider == "" || (clearRules == (len(rules) > 0)) {
			return &usageError{"proxy-rules needs --provider and either --rule... or --clear\n" + clientsUsage}
		}
		var set *clientauth.ProxyRules
		if !clearRules {
			set = &clientauth.ProxyRules{Rules: rules, Description: description}
		}
		if err := store.SetProxyRules(ctx, pos[0], ruleProvider, set); err != nil {
			if errors.Is(err, clientauth.ErrInvalidClient) {
				return &usageError{err.Error()}
			}
			return clientErr(err)
		}
		if clearRules {
			fmt.Fprintf(stdout, "%s has no proxy rules at %s\n", pos[0], ruleProvider)
		} else {
			fmt.Fprintf(stdout, "%s may make %d kind(s) of call at %s through the proxy\n", pos[0], len(rules), ruleProvider)
			printRules(stdout, rules)
		}
		c, err := store.Get(ctx, pos[0])
		if err != nil {
			return clientErr(err)
		}
		switch {
		case len(askingRules(c)) > 0:
			fmt.Fprintf(stdout, "%s is proxy-only: its rules ask the user, so it never receives a credential "+
				"(its token reads answer token_release_disabled)\n", pos[0])
		case clearRules && c.ProxyOnly:
			fmt.Fprintf(stdout, "%s stays proxy-only; no rule of it asks the user any more, so connectd clients proxy-only %s --off "+
				"would let it read tokens again\n", pos[0], pos[0])
		}
		return nil
	case "jwt-keys":
		keys.DropSecrets = dropKeys
		if err := store.SetAssertionKeys(ctx, pos[0], keys); err != nil {
			if errors.Is(err, clientauth.ErrInvalidClient) {
				return &usageError{err.Error()}
			}
			return clientErr(err)
		}
		switch {
		case clearRules:
			fmt.Fprintf(stdout, "%s has no keys for private_key_jwt\n", pos[0])
		default:
			fmt.Fprintf(stdout, "%s authenticates with private_key_jwt\n", pos[0])
		}
		if dropKeys {
			fmt.Fprintf(stdout, "%s's client keys no longer work\n", pos[0])
		}
		return nil
	case "dpop":
		if err := store.SetDPoPRequired(ctx, pos[0], !off); err != nil {
			if errors.Is(err, clientauth.ErrInvalidClient) {
				return &usageError{err.Error()}
			}
			return clientErr(err)
		}
		if off {
			fmt.Fprintf(stdout, "%s no longer needs DPoP proofs\n", pos[0])
		} else {
			fmt.Fprintf(stdout, "%s must prove every /v1 call with DPoP (and use private_key_jwt at the token endpoint)\n", pos[0])
		}
		return nil
	case "proxy-only":
		if err := store.SetProxyOnly(ctx, pos[0], !off); err != nil {
			if errors.Is(err, clientauth.ErrAsksUser) {
				return asksRefusal(ctx, store, pos[0])
			}
			return clientErr(err)
		}
		if off {
			fmt.Fprintf(stdout, "%s may read tokens again\n", pos[0])
		} else {
			fmt.Fprintf(stdout, "%s is proxy-only: its token reads answer token_release_disabled\n", pos[0])
		}
		return nil
	default: // rotate-key
		if overlap < 0 {
			overlap = cfg.Identity.ClientKeyOverlap
		}
		key, err := store.RotateKey(ctx, pos[0], overlap)
		if err != nil {
			return clientErr(err)
		}
		fmt.Fprintf(stdout, "id: %s\nkey: %s\n", pos[0], key)
		fmt.Fprintf(stderr, "The key is shown only now. The previous key keeps working until %s.\n",
			time.Now().Add(overlap).UTC().Format(time.RFC3339))
		return nil
	}
}

// printRules lists rules as the proxy reads them (clientauth.ParseRule),
// saying of each one that asks the user what it shows them and for how
// long they may allow such calls.
func printRules(w io.Writer, rules []string) {
	for _, text := range rules {
		r, err := clientauth.ParseRule(text)
		switch {
		case err != nil:
			fmt.Fprintf(w, "  %s\n", text)
		case !r.Ask:
			fmt.Fprintf(w, "  %s\n", r.Key())
		case r.Standing > 0:
			fmt.Fprintf(w, "  %s  asks the user first: %q (they may allow such calls for up to %s)\n", r.Key(), r.Words,
				shortDuration(r.Standing))
		default:
			fmt.Fprintf(w, "  %s  asks the user first: %q (each call)\n", r.Key(), r.Words)
		}
	}
}

// shortDuration is d as a rule writes it: 1h, 90m, 1h30m.
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// askingRules are c's rules that ask the user, as "provider: rule".
func askingRules(c clientauth.Client) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(c.ProxyRules)) {
		for _, text := range c.ProxyRules[p].Rules {
			if r, err := clientauth.ParseRule(text); err == nil && r.Ask {
				out = append(out, p+": "+text)
			}
		}
	}
	return out
}

// asksRefusal is the answer to proxy-only --off for client id whose rules
// ask the user (clientauth.ErrAsksUser): which rules, and how to clear them.
func asksRefusal(ctx context.Context, store *clientauth.Clients, id string) error {
	msg := fmt.Sprintf("%s must stay proxy-only: its proxy rules ask the user before some calls, and a client that "+
		"reads the token could call the provider without asking. Nothing changed.", id)
	c, err := store.Get(ctx, id)
	if err != nil {
		return &usageError{msg}
	}
	asking := askingRules(c)
	msg += "\nRules that ask:\n  " + strings.Join(asking, "\n  ")
	var cmds []string
	for _, p := range slices.Sorted(maps.Keys(c.ProxyRules)) {
		if c.ProxyRules[p].Asks() {
			cmds = append(cmds, "connectd clients proxy-rules "+id+" --provider "+p+" --clear")
		}
	}
	msg += "\nClear them first (or set rules without ask): " + strings.Join(cmds, "; ")
	return &usageError{msg}
}

// warnUnknownProviders warns (on stderr, without failing: the catalog may
// be configured elsewhere, or the provider added later) about provider ids
// the configured catalog lacks.
func warnUnknownProviders(cfg *Config, providers []string, stderr io.Writer) {
	if len(providers) == 0 {
		return
	}
	var known []string
	if cfg.Vault.Providers != nil {
		for _, p := range cfg.Vault.Providers.Providers {
			known = append(known, p.Name)
		}
	}
	if len(known) == 0 {
		fmt.Fprintln(stderr, "warning: no provider catalog here (CONNECTD_PROVIDERS_FILE unset), so the provider ids are not checked")
		return
	}
	for _, p := range providers {
		if !slices.Contains(known, p) {
			fmt.Fprintf(stderr, "warning: provider %q is not in the catalog (CONNECTD_PROVIDERS_FILE has %s); "+
				"its elicitations fail until it is added (fix a typo with: connectd clients update ID --provider ...)\n",
				p, strings.Join(known, ", "))
		}
	}
}

func clientErr(err error) error {
	if errors.Is(err, clientauth.ErrClientNotFound) || errors.Is(err, clientauth.ErrInvalidClient) {
		return &usageError{err.Error()}
	}
	return err
}

// assertionFlags are the flags that register private_key_jwt keys.
func assertionFlags(fset *flag.FlagSet, jwksURL, publicKeyFile *string) {
	fset.StringVar(jwksURL, "jwks-url", "", "https URL of the JWK Set its client assertions are signed with")
	fset.StringVar(publicKeyFile, "public-key", "", "file with the public key (PEM, JWK or JWK Set) its client assertions are signed with")
}

// readAssertionKeys reads the --jwks-url and --public-key flags.
func readAssertionKeys(jwksURL, publicKeyFile string) (clientauth.AssertionKeys, error) {
	if jwksURL != "" && publicKeyFile != "" {
		return clientauth.AssertionKeys{}, &usageError{"give --jwks-url or --public-key, not both"}
	}
	k := clientauth.AssertionKeys{JWKSURL: jwksURL}
	if publicKeyFile != "" {
		raw, err := os.ReadFile(publicKeyFile)
		if err != nil {
			return clientauth.AssertionKeys{}, &usageError{fmt.Sprintf("--public-key: %v", err)}
		}
		k.PublicKey = raw
	}
	return k, nil
}
