package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/devidp"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/keyring"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/vault"
)

// The token lookup across organizations (issue 34): -orgs organizations
// (bench-org-000, …), each with an MCP server of its own (its own resource
// and client key) and -org-users users with a connection in that
// organization and consent for its server. The load cycles over the
// (organization, user) pairs, each request with its organization's client
// key, on replicas of its own; the row stands beside the one-organization
// token lookup of the same run.
const scenarioOrgs = "token lookup, %d organizations × %d users"

// orgsScenario is the row's name for orgs organizations of users users.
func orgsScenario(orgs, users int) string { return fmt.Sprintf(scenarioOrgs, orgs, users) }

// orgsRow reports whether scenario is an orgs row (of any size).
func orgsRow(scenario string) bool {
	var o, u int
	n, _ := fmt.Sscanf(scenario, scenarioOrgs, &o, &u)
	return n == 2
}

func orgID(o int) string       { return fmt.Sprintf("bench-org-%03d", o) }
func orgResource(o int) string { return "https://" + orgID(o) + ".mcp.example/" }

// orgUser is user u of organization o: subjects of their own, so that the
// default organization's seeded users (user-NNNNN) and consents stay as
// they are.
func orgUser(o, u int) string { return fmt.Sprintf("%s-user-%03d", orgID(o), u) }

// orgPair is the (organization, user) of pair index k among orgs
// organizations: consecutive indexes are consecutive organizations, so
// that the load, which takes index n % (orgs × users) for its n-th
// request, moves to another organization (another client) on every request
// and meets every pair once per cycle.
func orgPair(k, orgs int) (o, u int) { return k % orgs, k / orgs }

// orgSeed is what seedOrgs made: per pair index (orgPair), the user token
// and its organization's client key.
type orgSeed struct {
	tokens, keys []string
	took         time.Duration
}

// seedOrgs creates the organizations, their clients, every user's
// connection (in its organization's vault, 8 writers, as seed does) and
// consents, and mints the user tokens with each organization's resource as
// audience.
func seedOrgs(ctx context.Context, pool *pgxpool.Pool, keyLine, issuer string, idp *devidp.Provider, orgs, users int) (*orgSeed, error) {
	started := time.Now()
	keys, err := keyring.Parse(keyLine)
	if err != nil {
		return nil, err
	}
	store, err := vault.New(vault.Config{Pool: pool, Keyring: keys})
	if err != nil {
		return nil, err
	}
	orgStore := org.New(org.Config{Pool: pool})
	clients := clientauth.NewClients(clientauth.ClientsConfig{Pool: pool, AllowHTTP: true, Logger: slog.New(slog.DiscardHandler)})
	clientKeys := make([]string, orgs)
	for o := range orgs {
		if _, err := orgStore.Create(ctx, orgID(o), "Bench "+orgID(o), "connectd-bench"); err != nil {
			return nil, err
		}
		if _, clientKeys[o], err = clients.CreateIn(ctx, orgID(o), "bench "+orgID(o), []string{orgResource(o)}, []string{"bench"}); err != nil {
			return nil, err
		}
	}
	total := orgs * users
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for k := w; k < total; k += 8 {
				o, u := orgPair(k, orgs)
				cred := vault.Credential{AccessToken: benchAccessToken(k), RefreshToken: "bench-refresh",
					TokenType: "Bearer", Expiry: time.Now().Add(30 * 24 * time.Hour), Scopes: []string{"read"}}
				if _, err := store.In(orgID(o)).Put(ctx, identity.User{Issuer: issuer, Subject: orgUser(o, u)}, "bench", cred); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	// As seed's consents: each connection's organization's client, the
	// exact scope set, the account hash of a credential naming no account.
	if _, err := pool.Exec(ctx, `INSERT INTO consents (issuer, subject, client_id, provider, scopes, account_hash, granted_at, updated_at,
			connection_id)
		SELECT $1, cn.subject, cl.id, 'bench', '{read}', $2, now(), now(), cn.id
		FROM connections cn JOIN clients cl ON cl.org_id = cn.org_id
		WHERE cn.issuer = $1 AND cn.provider = 'bench' AND cn.org_id LIKE 'bench-org-%'
		ON CONFLICT DO NOTHING`, issuer, consent.AccountHash("")); err != nil {
		return nil, err
	}
	s := &orgSeed{tokens: make([]string, total), keys: make([]string, total)}
	for k := range total {
		o, u := orgPair(k, orgs)
		if s.tokens[k], err = idp.AccessToken(orgUser(o, u), orgResource(o)); err != nil {
			return nil, err
		}
		s.keys[k] = clientKeys[o]
	}
	s.took = time.Since(started)
	return s, nil
}

// measureOrgs runs the orgs scenario at every level on replicas of its own
// (started here, stopped on return), primed before each level as the token
// scenario is. A priming that fails (an API that does not read the
// client's organization answers 404) is logged and the level measured
// anyway: its row then shows the errors.
func measureOrgs(ctx context.Context, o *options, env []string, s *orgSeed, res *results, logf func(string, ...any)) error {
	set := make([]*process, o.replicas)
	for i := range set {
		var err error
		if set[i], err = newProcess(); err != nil {
			return err
		}
	}
	if err := startSet(ctx, o.binary, env, set); err != nil {
		return err
	}
	defer stopSet(set)
	lg := newLoad("", s.tokens, set)
	lg.keys = s.keys
	name := orgsScenario(o.orgs, o.orgUsers)
	for _, c := range o.levels {
		if err := lg.prime(ctx); err != nil {
			logf("orgs: %v", err)
		}
		res.add(measure(ctx, name, c, o.duration, set, lg.token))
	}
	return nil
}

// orgsRatios sets VsToken of every orgs row: its req/s over the token
// lookup's at the same level in the same run.
func (r *results) orgsRatios() {
	tok := map[int]float64{}
	for _, x := range r.Results {
		if x.Scenario == scenarioToken {
			tok[x.Concurrency] = x.RPS
		}
	}
	for i := range r.Results {
		if x := &r.Results[i]; orgsRow(x.Scenario) && tok[x.Concurrency] > 0 {
			x.VsToken = x.RPS / tok[x.Concurrency]
		}
	}
}

// cell keeps a table cell on one line and in its column.
var cell = strings.NewReplacer("\n", " ", "|", "\\|")

// orgsTable writes the orgs rows beside the token lookup's at each level,
// when measured.
func (r *results) orgsTable(w io.Writer) {
	var rows []result
	for _, x := range r.Results {
		if orgsRow(x.Scenario) {
			rows = append(rows, x)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Organizations\n\nThe token lookup with the seeded clients of %d organizations, each of %d users "+
		"(row `%s`; seeded in %s), against the one-organization token lookup of this run, level by level: "+
		"each request with its organization's client key and a user token for that organization's MCP server, "+
		"on replicas of its own started after the read path, primed as the token lookup is.\n\n",
		r.Orgs, r.OrgUsers, rows[0].Scenario, r.OrgSeed)
	fmt.Fprint(w, "| callers | 1 organization req/s | organizations req/s | organizations / 1 | p99 ms 1 / organizations | "+
		"CPU s/1k 1 / organizations | errors |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, x := range rows {
		t, ok := r.find(scenarioToken, x.Concurrency)
		ratio := "—"
		if x.VsToken > 0 {
			ratio = percentDown(x.VsToken)
		}
		one, p99, cpu := "—", "—", "—"
		if ok {
			one, p99, cpu = fmt.Sprintf("%.0f", t.RPS), fmt.Sprintf("%.2f", t.P99ms), fmt.Sprintf("%.3f", t.CPUPer1k)
		}
		errs := fmt.Sprint(x.Errors)
		if x.FirstError != "" {
			errs += " (" + cell.Replace(x.FirstError) + ")"
		}
		fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s / %.2f | %s / %.3f | %s |\n", x.Concurrency, one, x.RPS, ratio,
			p99, x.P99ms, cpu, x.CPUPer1k, errs)
	}
}
