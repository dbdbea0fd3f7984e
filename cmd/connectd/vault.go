package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/webhook"
)

const vaultUsage = `usage: connectd vault gen-key [-version N]   print a new random key line VERSION:BASE64KEY
       connectd vault status                  connections and webhook secrets per key version
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
	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr)
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

func vaultStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	pos, err := parseFlags(flag.NewFlagSet("vault status", flag.ContinueOnError),
		"usage: connectd vault status\nCounts connections per key version.", args, stdout, stderr)
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
	var total, stale, unknown int64
	for _, c := range counts {
		role, in, status := "-", "yes", string(c.Status)
		if c.Primary {
			role = "primary"
		}
		if !c.InKeyring {
			in = "NO"
			unknown += c.Rows
		}
		if status == "" {
			status = "-"
		}
		if !c.Primary {
			stale += c.Rows
		}
		total += c.Rows
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\n", c.KeyVersion, role, in, status, c.Rows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%d connections; %d under the primary key %d", total, total-stale, keys.Primary())
	// Webhook endpoint secrets are sealed under the same keys.
	var secretsTotal, secretsStale int64
	for _, c := range secrets {
		secretsTotal += c.Endpoints
		if !c.Primary {
			secretsStale += c.Endpoints
			stale += c.Endpoints
		}
		if !c.InKeyring {
			unknown += c.Endpoints
		}
	}
	fmt.Fprintf(stdout, "\n%d webhook endpoint secrets; %d under the primary key", secretsTotal, secretsTotal-secretsStale)
	switch {
	case stale > 0:
		fmt.Fprintf(stdout, "; %d under older keys: run `connectd vault rewrap`", stale)
	default:
		fmt.Fprint(stdout, "; keys other than the primary are no longer needed")
	}
	if unknown > 0 {
		fmt.Fprintf(stdout, "\nWARNING: %d connections or webhook secrets are under keys not in CONNECTD_VAULT_KEYS and cannot be opened", unknown)
	}
	fmt.Fprintln(stdout)
	return nil
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
	fmt.Fprintf(stdout, "rewrapped %d connections to key version %s", res.Rewrapped, strconv.FormatUint(uint64(primary), 10))
	if len(res.Failed) > 0 {
		fmt.Fprintf(stdout, "; %d did not open (key missing or data damaged): %v", len(res.Failed), res.Failed)
	}
	fmt.Fprintln(stdout)
	if err == nil || errors.Is(err, vault.ErrRewrapIncomplete) {
		n, failed, werr := webhook.RewrapSecrets(ctx, pool, s.Keyring())
		if werr != nil {
			return werr
		}
		fmt.Fprintf(stdout, "rewrapped %d webhook endpoint secrets", n)
		if len(failed) > 0 {
			fmt.Fprintf(stdout, "; %d did not open (key missing): %v", len(failed), failed)
		}
		fmt.Fprintln(stdout)
	}
	if errors.Is(err, vault.ErrRewrapIncomplete) {
		return fmt.Errorf("%w; run it again (it resumes), and check that every replica runs with key %d as primary", err, primary)
	}
	return err
}
