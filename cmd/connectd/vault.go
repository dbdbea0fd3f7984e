package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

const vaultUsage = `usage: connectd vault gen-key [-version N]   print a new random key line VERSION:BASE64KEY
       connectd vault status                  connections and webhook secrets per key version, and what to do
       connectd vault rewrap [-batch N]       re-encrypt every connection and webhook secret under the primary key
See docs/vault.md for the rotation procedure.`

// vaultCmd manages credential encryption keys: connectd vault gen-key|status|rewrap.
func vaultCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := groupArgs(args, vaultUsage, stdout)
	if err != nil {
		return err
	}
	switch sub {
	case "gen-key":
		return vaultGenKey(args, getenv, stdout, stderr)
	case "status":
		return vaultStatus(ctx, args, getenv, stdout, stderr)
	case "rewrap":
		return vaultRewrap(ctx, args, getenv, stdout, stderr)
	default:
		return &usageError{fmt.Sprintf("unknown vault command %q\n%s", sub, vaultUsage)}
	}
}

func vaultGenKey(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("vault gen-key", flag.ContinueOnError)
	version := fset.Uint("version", 0, "key version (default: one above the highest configured, else 1)")
	pos, err := parseFlags(fset, "usage: connectd vault gen-key [-version N]\nPrints a new random key line VERSION:BASE64KEY.", args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{vaultUsage}
	}
	v := uint32(*version)
	if *version > keyring.MaxKeyVersion {
		return &usageError{fmt.Sprintf("-version must be 1-%d", keyring.MaxKeyVersion)}
	}
	if v == 0 {
		v = 1
		cfg, err := loadConfig(getenv, needs{})
		if err != nil {
			return err
		}
		if k := cfg.Vault.Keyring; k != nil {
			v = slices.Max(k.Versions()) + 1
		}
	}
	line, err := keyring.GenerateKey(v)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, line)
	fmt.Fprintf(stderr, "Add it to CONNECTD_VAULT_KEYS (comma-separated); mark the primary key with a leading \"*\". "+
		"Keep it secret: anyone with it and the database reads every stored credential. See docs/vault.md.\n")
	return nil
}

// openVault loads the configuration a database vault command needs and opens
// a store (no provider calls).
func openVault(ctx context.Context, getenv func(string) string, stderr io.Writer) (*vault.Store, *pgxpool.Pool, func(), error) {
	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{})
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg.Vault.Keyring == nil {
		pool.Close()
		return nil, nil, nil, &ConfigError{Var: "CONNECTD_VAULT_KEYS", Problem: "is required (or CONNECTD_VAULT_KEYS_FILE)"}
	}
	s, err := vault.New(vault.Config{Pool: pool, Keyring: cfg.Vault.Keyring, Logger: logger})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return s, pool, pool.Close, nil
}

const vaultStatusHelp = `usage: connectd vault status
Reports what is sealed under each vault key version, for key rotation (docs/vault.md):

  a table of connections per key version: ROLE (primary: new seals use it), IN KEYRING (NO: the key
  is not in CONNECTD_VAULT_KEYS, so those rows cannot be opened), STATUS (the connections' status)
  and CONNECTIONS (how many);
  a line counting connections and how many are under the primary key;
  a line counting webhook endpoint secrets (sealed under the same keys) and how many are under the
  primary key, and one for organizations' provider app secrets when there are any;
  then what to do: run ` + "`connectd vault rewrap`" + ` when rows are under an older key you still hold,
  or retire the older keys when nothing uses them.

A row under a key that is not configured cannot be opened, and rewrap cannot move it: status says
so in a WARNING naming the missing versions and exits with status 1. Add the missing key back to
CONNECTD_VAULT_KEYS (then rewrap); if it is lost, revoke those connections (connectd admin
connections revoke: their users connect again) and re-add those webhook endpoints (a new secret).
Exit status: 0 when every sealed value opens, 1 after a WARNING, 2 for a configuration error.`

// plural is "1 connection", "2 connections".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// errKeysMissing: vault status found values sealed under keys not
// configured (exit status 1, after the WARNING).
var errKeysMissing = errors.New("vault status: some sealed values cannot be opened with the configured keys")

func vaultStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	pos, err := parseFlags(flag.NewFlagSet("vault status", flag.ContinueOnError), vaultStatusHelp, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{vaultUsage}
	}
	s, pool, done, err := openVault(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer done()
	counts, err := s.KeyStatus(ctx)
	if err != nil {
		return err
	}
	secrets, err := webhook.SecretKeyStatus(ctx, pool, s.Keyring())
	if err != nil {
		return err
	}
	appSecrets, err := org.SecretKeyStatus(ctx, pool, s.Keyring())
	if err != nil {
		return err
	}
	issuerSecrets, err := org.IssuerSecretKeyStatus(ctx, pool, s.Keyring())
	if err != nil {
		return err
	}
	keys := s.Keyring()
	// Configured keys with no rows are listed too: they may be retired.
	for _, v := range keys.Versions() {
		if !slices.ContainsFunc(counts, func(c vault.KeyCount) bool { return c.KeyVersion == v }) {
			counts = append(counts, vault.KeyCount{KeyVersion: v, Primary: v == keys.Primary(), InKeyring: true})
		}
	}
	slices.SortStableFunc(counts, func(a, b vault.KeyCount) int { return int(a.KeyVersion) - int(b.KeyVersion) })
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY VERSION\tROLE\tIN KEYRING\tSTATUS\tCONNECTIONS")
	// Each sealed value is counted once, in one of: under the primary key,
	// under an older key held (rewrap moves it), under a key not held.
	var conns, connsPrimary, connsMissing int64
	var missing []uint32
	for _, c := range counts {
		role, in, status := "-", "yes", string(c.Status)
		if c.Primary {
			role = "primary"
		}
		if !c.InKeyring {
			in = "NO"
			connsMissing += c.Rows
			if c.Rows > 0 && !slices.Contains(missing, c.KeyVersion) {
				missing = append(missing, c.KeyVersion)
			}
		}
		if status == "" {
			status = "-"
		}
		if c.Primary {
			connsPrimary += c.Rows
		}
		conns += c.Rows
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\n", c.KeyVersion, role, in, status, c.Rows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	secretsTotal, secretsPrimary, secretsMissing := keyring.Tally(secrets, &missing)
	fmt.Fprintf(stdout, "\n%s; %d under the primary key %d\n", plural(conns, "connection", "connections"), connsPrimary, keys.Primary())
	fmt.Fprintf(stdout, "%s; %d under the primary key\n", plural(secretsTotal, "webhook endpoint secret", "webhook endpoint secrets"), secretsPrimary)
	// Organizations' provider app secrets, sealed under the same keys.
	appsTotal, appsPrimary, appsMissing := keyring.Tally(appSecrets, &missing)
	if appsTotal > 0 {
		fmt.Fprintf(stdout, "%s; %d under the primary key\n", plural(appsTotal, "provider app secret", "provider app secrets"), appsPrimary)
	}
	if appsMissing > 0 {
		fmt.Fprintf(stdout, "WARNING: %s cannot be opened: set those apps again (connectd orgs apps set, a secret from the provider).\n",
			plural(appsMissing, "provider app secret", "provider app secrets"))
	}
	// Organizations' issuers' login client secrets, likewise.
	issuersTotal, issuersPrimary, issuersMissing := keyring.Tally(issuerSecrets, &missing)
	if issuersTotal > 0 {
		fmt.Fprintf(stdout, "%s; %d under the primary key\n", plural(issuersTotal, "issuer client secret", "issuer client secrets"), issuersPrimary)
	}
	if issuersMissing > 0 {
		fmt.Fprintf(stdout, "WARNING: %s cannot be opened (login at those issuers is off): add those issuers again "+
			"(connectd orgs issuers remove, then add).\n", plural(issuersMissing, "issuer client secret", "issuer client secrets"))
	}
	older := (conns - connsPrimary - connsMissing) + (secretsTotal - secretsPrimary - secretsMissing) + (appsTotal - appsPrimary - appsMissing) +
		(issuersTotal - issuersPrimary - issuersMissing)
	appsMissing += issuersMissing // the organizations' secrets: the operator's to set again
	switch {
	case older > 0:
		fmt.Fprintf(stdout, "%d under older keys you hold: run `connectd vault rewrap`\n", older)
	case connsMissing+secretsMissing+appsMissing == 0:
		fmt.Fprintln(stdout, "Keys other than the primary are no longer needed.")
	}
	if connsMissing+secretsMissing == 0 {
		if appsMissing > 0 {
			return errKeysMissing
		}
		return nil
	}
	slices.Sort(missing)
	versions := make([]string, len(missing))
	for i, v := range missing {
		versions[i] = strconv.FormatUint(uint64(v), 10)
	}
	fmt.Fprintf(stdout, "WARNING: %s and %s are sealed under key version %s, not in CONNECTD_VAULT_KEYS: they cannot be opened, "+
		"and rewrap cannot move them. Add the missing key back to CONNECTD_VAULT_KEYS (then run `connectd vault rewrap`); "+
		"if it is lost, revoke those connections (connectd admin connections revoke; their users connect again) "+
		"and re-add those webhook endpoints (connectd clients webhooks remove, then add: a new secret).\n",
		plural(connsMissing, "connection", "connections"), plural(secretsMissing, "webhook endpoint secret", "webhook endpoint secrets"),
		strings.Join(versions, ", "))
	return errKeysMissing
}

func vaultRewrap(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("vault rewrap", flag.ContinueOnError)
	batch := fset.Int("batch", 100, "connections re-encrypted per transaction (1-10000)")
	wait := fset.Duration("wait", 30*time.Second, "how long to wait for connections locked by concurrent refreshes")
	pos, err := parseFlags(fset, "usage: connectd vault rewrap [-batch N] [-wait DURATION]\n"+
		"Re-encrypts every connection under the primary key, in batches, while serving.", args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *batch < 1 || *batch > 10000 || *wait <= 0 {
		return &usageError{"usage: connectd vault rewrap [-batch 1-10000] [-wait DURATION]"}
	}
	s, pool, done, err := openVault(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer done()
	primary := s.Keyring().Primary()
	res, err := s.Rewrap(ctx, vault.RewrapOptions{Batch: *batch, Wait: *wait, Progress: func(r vault.RewrapResult) {
		fmt.Fprintf(stderr, "rewrapped %d so far\n", r.Rewrapped)
	}})
	fmt.Fprintf(stdout, "rewrapped %s to key version %d", plural(int64(res.Rewrapped), "connection", "connections"), primary)
	if len(res.Failed) > 0 {
		fmt.Fprintf(stdout, "; %d did not open (key missing or data damaged): %v", len(res.Failed), res.Failed)
	}
	fmt.Fprintln(stdout)
	if err == nil || errors.Is(err, vault.ErrRewrapIncomplete) {
		n, failed, werr := webhook.RewrapSecrets(ctx, pool, s.Keyring())
		if werr != nil {
			return werr
		}
		fmt.Fprintf(stdout, "rewrapped %s", plural(int64(n), "webhook endpoint secret", "webhook endpoint secrets"))
		if len(failed) > 0 {
			fmt.Fprintf(stdout, "; %d did not open (key missing): %v", len(failed), failed)
		}
		fmt.Fprintln(stdout)
		n, failed, werr = org.RewrapSecrets(ctx, pool, s.Keyring())
		if werr != nil {
			return werr
		}
		if n > 0 || len(failed) > 0 {
			fmt.Fprintf(stdout, "rewrapped %s", plural(int64(n), "provider app secret", "provider app secrets"))
			if len(failed) > 0 {
				fmt.Fprintf(stdout, "; %d did not open (key missing): %v", len(failed), failed)
			}
			fmt.Fprintln(stdout)
		}
		n, failed, werr = org.RewrapIssuerSecrets(ctx, pool, s.Keyring())
		if werr != nil {
			return werr
		}
		if n > 0 || len(failed) > 0 {
			fmt.Fprintf(stdout, "rewrapped %s", plural(int64(n), "issuer client secret", "issuer client secrets"))
			if len(failed) > 0 {
				fmt.Fprintf(stdout, "; %d did not open (key missing): %v", len(failed), failed)
			}
			fmt.Fprintln(stdout)
		}
	}
	if errors.Is(err, vault.ErrRewrapIncomplete) {
		return fmt.Errorf("%w; run it again (it resumes), and check that every replica runs with key %d as primary", err, primary)
	}
	return err
}
