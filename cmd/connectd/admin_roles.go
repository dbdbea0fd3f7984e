package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/connectd/connectd/internal/admin"
)

// adminRolesCmd is `connectd admin roles grant|list|revoke|map|unmap`: an
// organization's admins (tables org_admins and org_admin_claims, package
// admin) from the command line, as an operator (the CLI acts on every
// organization). --issuer and --subject are taken byte for byte, as every
// identity (docs/identity.md).
func adminRolesCmd(ctx context.Context, sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("admin roles "+sub, flag.ContinueOnError)
	var issuer, subject, role, claim string
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
	case "map", "unmap":
		fset.StringVar(&issuer, "issuer", "", "the issuer (URL) whose ID tokens carry the claim (required)")
		fset.StringVar(&claim, "claim", "", "NAME=VALUE: an ID token claim (dotted for nested objects) and the value it holds or contains (required)")
		if sub == "map" {
			fset.StringVar(&role, "role", "", "owner, admin, security or viewer (required)")
		}
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
	case (sub == "grant" || sub == "revoke") && (issuer == "" || subject == ""):
		return &usageError{"--issuer URL and --subject SUBJECT are required: a subject is unique only within its issuer\n" + usage}
	case (sub == "map" || sub == "unmap") && (issuer == "" || !strings.Contains(claim, "=")):
		return &usageError{"--issuer URL and --claim NAME=VALUE are required\n" + usage}
	case (sub == "grant" || sub == "map") && role == "":
		return &usageError{"--role is required\n" + usage}
	}
	claimName, claimValue, _ := strings.Cut(claim, "=")

	_, _, pool, err := openDatabase(ctx, getenv, stderr, needs{})
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
	case "map":
		r, err := admin.ParseRole(role)
		if err != nil {
			return adminErr(err)
		}
		m, err := st.MapClaim(ctx, admin.ClaimMapping{Org: pos[0], Issuer: issuer, Claim: claimName, Value: claimValue, Role: r}, by)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "who signs in at %s with %s=%s is %s of %s\n", visible(m.Issuer), visible(m.Claim),
			visible(m.Value), m.Role, m.Org)
		return nil
	case "unmap":
		m := admin.ClaimMapping{Org: pos[0], Issuer: issuer, Claim: claimName, Value: claimValue}
		if err := st.UnmapClaim(ctx, m, by); err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "%s=%s at %s gives no role in %s any more\n", visible(claimName), visible(claimValue),
			visible(issuer), pos[0])
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
		if err := tw.Flush(); err != nil {
			return err
		}
		maps, err := st.ClaimMappings(ctx, org, "", by)
		if err != nil {
			return adminErr(err)
		}
		if len(maps) == 0 {
			return nil
		}
		fmt.Fprintln(stdout, "\nclaim mappings:")
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORG\tISSUER\tCLAIM\tROLE\tMAPPED\tMAPPED BY")
		for _, m := range maps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Org, visible(m.Issuer), visible(m.Claim+"="+m.Value), m.Role,
				cliTime(m.CreatedAt), orDash(m.CreatedBy))
		}
		return tw.Flush()
	}
}
