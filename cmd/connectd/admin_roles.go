package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/connectd/connectd/internal/admin"
)

// adminRolesCmd is `connectd admin roles grant|list|revoke`: an
// organization's admins (table org_admins, package admin) from the command
// line, as an operator (the CLI acts on every organization). --issuer and
// --subject are taken byte for byte, as every identity (docs/identity.md).
func adminRolesCmd(ctx context.Context, sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("admin roles "+sub, flag.ContinueOnError)
	var issuer, subject, role string
	want := 1
	switch sub {
	case "grant":
		fset.StringVar(&issuer, "issuer", "", "the issuer (URL) the admin signs in at (required)")
		fset.StringVar(&subject, "subject", "", "the admin's subject at that issuer (required)")
		fset.StringVar(&role, "role", "", "owner, admin, security or viewer (required)")
	case "list":
		want = -1 // ORG is optional
	case "revoke":
		fset.StringVar(&issuer, "issuer", "", "the issuer (URL) the admin signs in at (required)")
		fset.StringVar(&subject, "subject", "", "the admin's subject at that issuer (required)")
	default:
		return &usageError{fmt.Sprintf("unknown admin command %q\n%s", "roles "+sub, adminUsage)}
	}
	usage := adminSubUsage("roles", sub)
	pos, err := parseFlags(fset, usage, args, stdout, stderr)
	if err != nil {
		return err
	}
	switch {
	case want == -1 && len(pos) > 1, want == 1 && len(pos) != 1:
		return &usageError{usage}
	case sub != "list" && (issuer == "" || subject == ""):
		return &usageError{"--issuer URL and --subject SUBJECT are required: a subject is unique only within its issuer\n" + usage}
	case sub == "grant" && role == "":
		return &usageError{"--role is required\n" + usage}
	}

	_, _, pool, err := openDatabase(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := admin.NewStore(admin.StoreConfig{Pool: pool})
	if err != nil {
		return err
	}
	by := cliActor(getenv)
	switch sub {
	case "grant":
		r, err := admin.ParseRole(role)
		if err != nil {
			return adminErr(err)
		}
		a, err := st.Grant(ctx, admin.Assignment{Org: pos[0], Issuer: issuer, Subject: subject, Role: r}, by)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "%s at %s is %s of %s\n", visible(a.Subject), visible(a.Issuer), a.Role, a.Org)
		return nil
	case "revoke":
		if err := st.RevokeRole(ctx, pos[0], issuer, subject, by); err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "%s at %s has no role in %s any more\n", visible(subject), visible(issuer), pos[0])
		return nil
	default: // list
		org := ""
		if len(pos) == 1 {
			org = pos[0]
		}
		as, err := st.Assignments(ctx, org, by)
		if err != nil {
			return adminErr(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORG\tISSUER\tSUBJECT\tROLE\tGRANTED\tGRANTED BY")
		for _, a := range as {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Org, visible(a.Issuer), visible(a.Subject), a.Role,
				cliTime(a.CreatedAt), orDash(a.CreatedBy))
		}
		return tw.Flush()
	}
}
