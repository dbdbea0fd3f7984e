package main

import (
	"bytes"
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

	"github.com/connectd/connectd/internal/admin"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/server"
	"github.com/connectd/connectd/internal/webhook"
)

var webhooksUsage = `usage:
  connectd clients webhooks add --client ID --url URL [--events TYPE,TYPE...]
  connectd clients webhooks list --client ID
  connectd clients webhooks remove --id ENDPOINT_ID
  connectd clients webhooks deliveries --endpoint ENDPOINT_ID [--limit N]
  connectd clients webhooks delivery --id DELIVERY_ID
  connectd clients webhooks redeliver --id DELIVERY_ID
Event types: ` + strings.Join(webhook.Types, ", ") + `.
See docs/admin.md.`

// webhooksSubUsage is each webhooks subcommand's line, for its -h.
var webhooksSubUsage = map[string]string{
	"add":        "--client ID --url URL [--events TYPE,TYPE...]\nRegisters an HTTPS endpoint and prints its signing secret, once.",
	"list":       "--client ID\nLists the MCP server's endpoints (never their secrets).",
	"remove":     "--id ENDPOINT_ID\nDeletes an endpoint and its deliveries.",
	"deliveries": "--endpoint ENDPOINT_ID [--limit N]\nLists an endpoint's latest deliveries, newest first.",
	"delivery":   "--id DELIVERY_ID\nShows a delivery, its payload and every attempt.",
	"redeliver":  "--id DELIVERY_ID\nSends a delivery again now, with a fresh run of retries.",
}

// webhooksCmd manages the webhook endpoints of MCP servers and their
// deliveries: connectd clients webhooks add|list|remove|deliveries|delivery|redeliver.
// It needs the vault keys (endpoint secrets are sealed with them); changes
// are audited as the admin actions they are, by cli:$USER. Deliveries
// themselves are sent by the serving replicas.
func webhooksCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := groupArgs(args, webhooksUsage, stdout)
	if err != nil {
		return err
	}
	help, ok := webhooksSubUsage[sub]
	if !ok {
		return &usageError{fmt.Sprintf("unknown webhooks command %q\n%s", sub, webhooksUsage)}
	}
	fset := flag.NewFlagSet("clients webhooks "+sub, flag.ContinueOnError)
	var client, rawURL, events, id, endpoint string
	limit := admin.DefaultPageSize
	type flagRef struct {
		name string
		v    *string
	}
	var required []flagRef
	switch sub {
	case "add":
		fset.StringVar(&client, "client", "", "the MCP server (client id) the endpoint belongs to")
		fset.StringVar(&rawURL, "url", "", "the endpoint's https URL, on a public host (http:// only in dev mode, "+
			"to a host:port of CONNECTD_EGRESS_ALLOW_HOSTS)")
		fset.StringVar(&events, "events", "", "comma-separated event types it receives (default: every type)")
		required = []flagRef{{"--client", &client}, {"--url", &rawURL}}
	case "list":
		fset.StringVar(&client, "client", "", "the MCP server (client id)")
		required = []flagRef{{"--client", &client}}
	case "remove":
		fset.StringVar(&id, "id", "", "the endpoint id (we_…)")
		required = []flagRef{{"--id", &id}}
	case "deliveries":
		fset.StringVar(&endpoint, "endpoint", "", "the endpoint id (we_…)")
		fset.IntVar(&limit, "limit", admin.DefaultPageSize, "deliveries to list (1-"+strconv.Itoa(admin.MaxPageSize)+")")
		required = []flagRef{{"--endpoint", &endpoint}}
	case "delivery", "redeliver":
		fset.StringVar(&id, "id", "", "the delivery id (msg_…, the webhook-id header)")
		required = []flagRef{{"--id", &id}}
	}
	sub1 := "usage: connectd clients webhooks " + sub + " " + help
	pos, err := parseFlags(fset, sub1, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return &usageError{sub1}
	}
	for _, f := range required {
		if *f.v = strings.TrimSpace(*f.v); *f.v == "" {
			return &usageError{f.name + " is required\n" + sub1}
		}
	}
	if limit < 1 || limit > admin.MaxPageSize {
		return &usageError{"--limit must be 1-" + strconv.Itoa(admin.MaxPageSize)}
	}

	cfg, logger, pool, err := openDatabase(ctx, getenv, stderr, needs{})
	if err != nil {
		return err
	}
	defer pool.Close()
	if cfg.Vault.Keyring == nil {
		return &ConfigError{Var: "CONNECTD_VAULT_KEYS",
			Problem: "is required for webhooks: endpoint secrets are sealed with it (or CONNECTD_VAULT_KEYS_FILE)"}
	}
	wh, err := server.NewWebhooks(cfg.server(pool, logger), pool, cfg.Vault.Keyring)
	if err != nil {
		return err
	}
	st, err := admin.NewStore(admin.StoreConfig{Pool: pool, Webhooks: wh, Logger: logger})
	if err != nil {
		return err
	}
	by := cliActor(getenv)
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: cfg.Dev})

	switch sub {
	case "add":
		if _, err := clients.Get(ctx, client); err != nil {
			return clientErr(err)
		}
		ep, secret, err := st.CreateWebhook(ctx, client, rawURL, splitList(events), by)
		if err != nil {
			return webhookErr(err)
		}
		fmt.Fprintf(stdout, "id: %s\nsecret: %s\n", ep.ID, secret)
		fmt.Fprintln(stderr, "The secret is shown only now: connectd keeps it sealed under the vault keys and never shows it "+
			"again. Give it to the MCP server; it verifies each delivery's webhook-signature with it (Standard Webhooks).")
		return nil
	case "list":
		if _, err := clients.Get(ctx, client); err != nil {
			return clientErr(err)
		}
		eps, err := wh.Endpoints(ctx, client)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tURL\tEVENTS\tCREATED")
		for _, e := range eps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ID, e.URL, eventsList(e.Events), cliTime(e.CreatedAt))
		}
		return tw.Flush()
	case "remove":
		ep, err := st.DeleteWebhook(ctx, id, by)
		if err != nil {
			return webhookErr(err)
		}
		fmt.Fprintf(stdout, "removed %s (%s of %s) and its deliveries\n", ep.ID, ep.URL, ep.ClientID)
		return nil
	case "deliveries":
		if _, err := wh.Endpoint(ctx, endpoint); err != nil {
			return webhookErr(err)
		}
		ds, err := wh.Deliveries(ctx, endpoint, limit)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tATTEMPTS\tCREATED\tNEXT ATTEMPT")
		for _, d := range ds {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Type, d.Status, d.Attempts, cliTime(d.CreatedAt),
				cliTimePtr(d.NextAttemptAt))
		}
		return tw.Flush()
	case "delivery":
		d, err := wh.Delivery(ctx, id)
		if err != nil {
			return webhookErr(err)
		}
		return printDelivery(stdout, d)
	default: // redeliver
		d, err := st.Redeliver(ctx, id, by)
		if err != nil {
			return webhookErr(err)
		}
		fmt.Fprintf(stdout, "redelivery of %s (%s) queued for endpoint %s; a serving replica sends it\n", d.ID, d.Type, d.EndpointID)
		return nil
	}
}

func printDelivery(stdout io.Writer, d webhook.Delivery) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", d.ID}, {"endpoint", d.EndpointID}, {"type", d.Type}, {"status", d.Status},
		{"attempts", strconv.Itoa(d.Attempts)}, {"created", cliTime(d.CreatedAt)},
		{"next attempt", cliTimePtr(d.NextAttemptAt)}, {"delivered", cliTimePtr(d.DeliveredAt)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var payload bytes.Buffer
	if json.Indent(&payload, []byte(d.Payload), "  ", "  ") != nil {
		payload.Reset()
		payload.WriteString(d.Payload)
	}
	fmt.Fprintf(stdout, "\npayload:\n  %s\n\nattempts:\n", payload.String())
	if len(d.Tries) == 0 {
		fmt.Fprintln(stdout, "  none yet")
		return nil
	}
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tTIME\tHTTP STATUS\tDURATION\tERROR")
	for _, a := range d.Tries {
		code := "-"
		if a.StatusCode != 0 {
			code = strconv.Itoa(a.StatusCode)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%dms\t%s\n", a.N, a.At.UTC().Format(time.RFC3339), code, a.DurationMS, orDash(a.Error))
	}
	return tw.Flush()
}

// webhookErr turns what the operator got wrong (a bad URL or event type,
// an unknown id, a URL already registered) into a usage error (exit 2).
func webhookErr(err error) error {
	if errors.Is(err, webhook.ErrInvalid) || errors.Is(err, webhook.ErrNotFound) || errors.Is(err, webhook.ErrExists) {
		return &usageError{err.Error()}
	}
	return err
}

// cliActor is who the audit trail says acted from the CLI: cli:$USER.
func cliActor(getenv func(string) string) admin.Actor {
	if u := strings.TrimSpace(getenv("USER")); u != "" {
		return admin.Actor{Name: "cli:" + u}
	}
	return admin.Actor{Name: "cli"}
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func eventsList(events []string) string {
	if len(events) == 0 {
		return "all"
	}
	return strings.Join(events, ",")
}

func cliTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return cliTime(*t)
}
