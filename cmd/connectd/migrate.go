package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/connectd/connectd/migrations"
)

var migrationName = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,62}$`)

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const text = "usage: connectd migrate up|down|status|create NAME\n" +
		"  up       apply every pending migration (under a session lock: safe with several replicas)\n" +
		"  down     roll back the newest migration\n" +
		"  status   list migrations and when each was applied\n" +
		"  create   write a new empty SQL migration into ./migrations"
	if helpRequested(args) {
		fmt.Fprintln(stdout, text)
		return flag.ErrHelp
	}
	if _, _, err := groupArgs(args, text, stdout); err != nil {
		return err
	}
	if args[0] == "create" {
		if len(args) != 2 || !migrationName.MatchString(args[1]) {
			return &usageError{"usage: connectd migrate create NAME (lower-case letters, digits and _)"}
		}
		return createMigration("migrations", args[1], stdout)
	}
	if len(args) != 1 {
		return &usageError{"usage: connectd migrate up|down|status|create NAME"}
	}
	_, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{})
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := migrations.NewProvider(db)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return migrateUp(ctx, pool, logger)
	case "down":
		r, err := p.Down(ctx)
		if err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		fmt.Fprintf(stdout, "rolled back %d %s\n", r.Source.Version, filepath.Base(r.Source.Path))
		return nil
	case "status":
		st, err := p.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate status: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED AT\tFILE")
		for _, s := range st {
			at := "-"
			if !s.AppliedAt.IsZero() {
				at = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, at, filepath.Base(s.Source.Path))
		}
		return tw.Flush()
	default:
		return &usageError{fmt.Sprintf("unknown migrate command %q (want up, down, status or create)", args[0])}
	}
}

// createMigration writes dir/NNNNN_name.sql with the next sequential version.
func createMigration(dir, name string, stdout io.Writer) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("migrate create: run it from the repository root: %w", err)
	}
	var next int64 = 1
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		if v, err := strconv.ParseInt(num, 10, 64); err == nil && v >= next {
			next = v + 1
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("%05d_%s.sql", next, name))
	body := "-- +goose Up\n\n-- +goose Down\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("migrate create: %w", err)
	}
	if _, err := f.WriteString(body); err != nil {
		f.Close()
		return fmt.Errorf("migrate create: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("migrate create: %w", err)
	}
	fmt.Fprintln(stdout, "created", path)
	return nil
}
