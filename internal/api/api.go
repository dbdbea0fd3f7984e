package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/audit"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/consent"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/identity"
	"github.com/connectd/connectd/internal/lifecycle"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/notice"
	"github.com/connectd/connectd/internal/org"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/provider"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/scope"
	"github.com/connectd/connectd/internal/vault"
	"github.com/connectd/connectd/internal/web"
)

// caller is an authenticated /v1 request: the MCP server and the user.
type caller struct {
	client clientauth.Client
	id     mcpauth.Identity
	user   identity.User
}

func (s *Server) authenticate(r *http.Request) (caller, error) {
	c, id, err := s.auth.Authenticate(r)
	if err != nil {
		s.sampleRefusal(r, c, err)
		return caller{}, err
	}
	return caller{client: c, id: id, user: identity.User{Issuer: id.Issuer, Subject: id.Subject}}, nil
}

// connections is the vault's handle on c's organization's connections: the
// only one any /v1 answer to c reads or changes connections through, so a
// connection of another organization is, to c, one that does not exist
// (vault.Store.In; package release decides on the organization again, as
// the second line).
func (s *Server) connections(c *caller) *vault.Store { return s.vault.In(c.client.Org) }

// Limits on mint input.
const (
	maxScopes  = 64
	maxMessage = 500
	maxDigest  = 128
)

func validScopes(scopes []string) error {
	if len(scopes) > maxScopes {
		return web.Errorf(http.StatusBadRequest, "invalid_request", "at most %d scopes", maxScopes)
	}
	for _, sc := range scopes {
		if !scope.Valid(sc) {
			return web.Errorf(http.StatusBadRequest, "invalid_scope", "scopes must be non-empty RFC 6749 scope tokens")
		}
	}
	return nil
}

// dedupe keeps the first occurrence of each scope.
func dedupe(scopes []string) []string {
	return scope.Union(nil, scopes)
}

type mintRequest struct {
	Provider      string   `json:"provider"`
	Scopes        []string `json:"scopes"`
	Message       string   `json:"message"`
	RequestDigest string   `json:"request_digest"`
	// Account: a connection id (reauthorize or step up that account),
	// "new" (connect another account), or "" (the user chooses).
	Account string `json:"account"`
}

// urlElicitation is the MCP 2025-11-25 elicitation/create params (mode url).
type urlElicitation struct {
	Mode          string `json:"mode"`
	ElicitationID string `json:"elicitationId"`
	URL           string `json:"url"`
	Message       string `json:"message"`
}

// inputRequest is the MCP 2026-07-28 entry of InputRequiredResult.inputRequests.
type inputRequest struct {
	Method string            `json:"method"`
	Params inputRequestParam `json:"params"`
}

type inputRequestParam struct {
	Mode    string `json:"mode"`
	Message string `json:"message"`
	URL     string `json:"url"`
}

// jsonRPCError is the MCP 2025-11-25 URLElicitationRequiredError.
type jsonRPCError struct {
	Code    int                  `json:"code"`
	Message string               `json:"message"`
	Data    urlElicitationErrata `json:"data"`
}

type urlElicitationErrata struct {
	Elicitations []urlElicitation `json:"elicitations"`
}

// URLElicitationRequiredCode is the MCP JSON-RPC error code for
// URLElicitationRequiredError (2025-11-25).
const URLElicitationRequiredCode = -32042

type statusDoc struct {
	ElicitationID string             `json:"elicitation_id"`
	Kind          elicitation.Kind   `json:"kind"`
	Status        elicitation.Status `json:"status"`
	Reason        string             `json:"reason,omitempty"`
	Provider      string             `json:"provider"`
	Scopes        []string           `json:"scopes"`
	ExpiresAt     time.Time          `json:"expires_at"`
	CompletedAt   *time.Time         `json:"completed_at,omitempty"`
	RequestState  string             `json:"request_state,omitempty"`
}

type mintResponse struct {
	statusDoc
	URL                         string         `json:"url"`
	Elicitation                 urlElicitation `json:"elicitation"`
	URLElicitationRequiredError jsonRPCError   `json:"url_elicitation_required_error"`
	InputRequest                inputRequest   `json:"input_request"`
}

func (s *Server) statusOf(e *elicitation.Elicitation) statusDoc {
	d := statusDoc{ElicitationID: e.ID, Kind: cmp.Or(e.Kind, elicitation.KindConnect), Status: e.Effective(s.now()),
		Reason: e.Reason, Provider: e.Provider, Scopes: elicitation.NonNil(e.Scopes), ExpiresAt: e.ExpiresAt.UTC()}
	if !e.CompletedAt.IsZero() {
		t := e.CompletedAt.UTC()
		d.CompletedAt = &t
	}
	return d
}

// connectURL is the only URL handed out: the public origin and the opaque id.
func (s *Server) connectURL(id string) string {
	return s.publicURL + "/c/" + id
}

// mint handles POST /v1/elicitations.
func (s *Server) mint(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &mintRequest{}, endpoint[mintRequest, minted]{
		caller: authenticated[mintRequest](s), call: s.mintFor, encode: s.writeMinted})
}

// minted is a mint's answer: the elicitation, a fresh request_state, and
// whether it was created (201) or is the pending one for the same request
// (200).
type minted struct {
	e       *elicitation.Elicitation
	rs      string
	created bool
}

// mintFor mints for c (the body is read after the caller's budget).
func (s *Server) mintFor(w http.ResponseWriter, r *http.Request, c caller, req *mintRequest) (minted, error) {
	// Per (user, client) first: a client that floods a user spends its own
	// budget, not the user's other clients'. Then a ceiling per user, so no
	// set of clients can flood a user with connect links either.
	user := c.user.Issuer + "\x00" + c.user.Subject
	if err := s.mintLimit.Allow(w, r, web.KeyOf(user+"\x00"+c.client.ID)); err != nil {
		return minted{}, err
	}
	if err := s.mintUserLimit.Allow(w, r, web.KeyOf(user)); err != nil {
		return minted{}, err
	}
	if err := web.DecodeJSON(w, r, req, 0); err != nil {
		return minted{}, err
	}
	if !names.ValidProvider(req.Provider) {
		return minted{}, web.Errorf(http.StatusBadRequest, "unknown_provider", "unknown provider")
	}
	p, err := s.catalog.Get(req.Provider)
	if err != nil {
		return minted{}, web.Errorf(http.StatusBadRequest, "unknown_provider", "unknown provider %q", req.Provider)
	}
	if err := release.Admit(releaseClient(c.client), req.Provider, release.Describe); err != nil {
		return minted{}, err
	}
	if err := validScopes(req.Scopes); err != nil {
		return minted{}, err
	}
	info := p.Info()
	if info.Kind == provider.KindOAuth2 {
		// An organization with no app at the provider (and no fallback to
		// the deployment's) hears it now, not its user on the connect page —
		// when the link could only end at the provider: the user has no
		// connection there in the organization (one they have may still be
		// shared on the consent page alone).
		if _, err := s.orgs.Resolve(r.Context(), c.client.Org, req.Provider); errors.Is(err, org.ErrNoApp) {
			has, herr := s.connections(&c).Exists(r.Context(), c.user, req.Provider)
			if herr != nil {
				return minted{}, herr
			}
			if !has {
				return minted{}, err
			}
		} else if err != nil {
			return minted{}, err
		}
	}
	scopes := dedupe(req.Scopes)
	if len(scopes) == 0 && info.Kind == provider.KindOAuth2 {
		scopes = append([]string(nil), info.DefaultScopes...)
	}
	if info.Kind == provider.KindAPIKey {
		scopes = nil
	}
	msg := strings.TrimSpace(req.Message)
	if msg == "" {
		msg = fmt.Sprintf("%s needs access to your %s account. Open the link to connect it.", c.client.Name, info.DisplayName)
	}
	if utf8.RuneCountInString(msg) > maxMessage || !utf8.ValidString(msg) || elicitation.HasControl(msg) {
		return minted{}, web.Errorf(http.StatusBadRequest, "invalid_request", "message must be at most %d characters of text", maxMessage)
	}
	if len(req.RequestDigest) > maxDigest || !printableASCII(req.RequestDigest) {
		return minted{}, web.Errorf(http.StatusBadRequest, "invalid_request", "request_digest must be at most %d printable characters", maxDigest)
	}
	if err := s.checkMintAccount(r.Context(), &c, req.Provider, req.Account); err != nil {
		return minted{}, err
	}
	now := s.now().Truncate(time.Microsecond) // as Postgres keeps it: an answer again shows the same expiry
	e := &elicitation.Elicitation{
		ID: elicitation.NewID(), ClientID: c.client.ID, Issuer: c.user.Issuer, Subject: c.user.Subject,
		Provider: req.Provider, Scopes: scopes, Message: msg, RequestDigest: req.RequestDigest, Account: req.Account,
		Status: elicitation.StatusPending, CreatedAt: now, ExpiresAt: now.Add(s.elicitationTTL),
	}
	// Idempotent (elicitation.Store.Mint): the pending elicitation for the
	// same request (client, user, provider, scope set, digest) is answered
	// again while it is not near its expiry.
	e, created, err := s.elicitations.Mint(r, e, s.elicitationTTL, nil)
	if err != nil {
		return minted{}, err
	}
	rs, err := s.sealRequestState(e)
	if err != nil {
		return minted{}, err
	}
	return minted{e: e, rs: rs, created: created}, nil
}

// writeMinted answers a mint with e: its URL, the ready elicitation params of
// both MCP protocol generations, and a fresh request_state.
func (s *Server) writeMinted(w http.ResponseWriter, m minted) error {
	status := http.StatusOK
	if m.created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/elicitations/"+m.e.ID)
	web.WriteJSON(w, status, s.mintDoc(m.e, m.rs))
	return nil
}

// mintDoc is the document a mint answers for e with request_state rs (and
// the proxy's user_approval_required, for an approval).
func (s *Server) mintDoc(e *elicitation.Elicitation, rs string) mintResponse {
	msg := e.Message
	u := s.connectURL(e.ID)
	el := urlElicitation{Mode: "url", ElicitationID: e.ID, URL: u, Message: msg}
	resp := mintResponse{
		statusDoc:   s.statusOf(e),
		URL:         u,
		Elicitation: el,
		URLElicitationRequiredError: jsonRPCError{Code: URLElicitationRequiredCode,
			Message: "This request requires more information.", Data: urlElicitationErrata{Elicitations: []urlElicitation{el}}},
		InputRequest: inputRequest{Method: "elicitation/create", Params: inputRequestParam{Mode: "url", Message: msg, URL: u}},
	}
	resp.RequestState = rs
	return resp
}

// printableASCII reports whether s is only visible ASCII (and spaces).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// maxWait bounds long-polls.
const maxWait = 60 * time.Second

func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, web.Errorf(http.StatusBadRequest, "invalid_request", "wait must be a duration such as 30s (at most 60s)")
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > maxWait {
		return 0, web.Errorf(http.StatusBadRequest, "invalid_request", "wait must be between 0s and 60s")
	}
	return d, nil
}

// status handles GET /v1/elicitations/{id}[?wait=30s].
func (s *Server) status(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &statusRequest{}, endpoint[statusRequest, *elicitation.Elicitation]{
		decode: decodeStatus, caller: authenticated[statusRequest](s), call: s.awaitStatus, encode: s.writeStatus})
}

// statusRequest is a status read: the elicitation and how long to wait.
type statusRequest struct {
	id   string
	wait time.Duration
}

func decodeStatus(r *http.Request, req *statusRequest) error {
	req.id = r.PathValue("id")
	var err error
	req.wait, err = parseWait(r.URL.Query().Get("wait"))
	return err
}

// awaitStatus is the elicitation, once it leaves pending or the wait ends.
func (s *Server) awaitStatus(_ http.ResponseWriter, r *http.Request, c caller, req *statusRequest) (*elicitation.Elicitation, error) {
	id, wait := req.id, req.wait
	if !elicitation.ValidID(id) {
		return nil, notFound()
	}
	e, err := s.ownElicitation(r.Context(), c, id)
	if err != nil {
		return nil, err
	}
	if wait > 0 && e.Effective(s.now()) == elicitation.StatusPending {
		release, err := s.waiters.Acquire(c.client.ID)
		if err != nil {
			return nil, err
		}
		e, err = s.waitFor(r, c, id, wait)
		release()
		if err != nil {
			return nil, err
		}
	}
	return e, nil
}

// writeStatus is the answer of a status read and a cancel: the
// elicitation's status document.
func (s *Server) writeStatus(w http.ResponseWriter, e *elicitation.Elicitation) error {
	web.WriteJSON(w, http.StatusOK, s.statusOf(e))
	return nil
}

// cancel handles DELETE /v1/elicitations/{id}: the MCP client reported that
// the user declined or cancelled opening the link. A pending elicitation
// ends declined (client_declined) — waking its long-polls and telling the
// client's webhooks — so the next mint of the request gets a new link at
// once; one that already ended is answered as it is.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &statusRequest{}, endpoint[statusRequest, *elicitation.Elicitation]{
		caller: authenticated[statusRequest](s), call: s.cancelFor, encode: s.writeStatus})
}

// cancelFor declines c's pending elicitation of the request's path.
func (s *Server) cancelFor(_ http.ResponseWriter, r *http.Request, c caller, _ *statusRequest) (*elicitation.Elicitation, error) {
	id := r.PathValue("id")
	if !elicitation.ValidID(id) {
		return nil, notFound()
	}
	e, err := s.ownElicitation(r.Context(), c, id)
	if err != nil {
		return nil, err
	}
	if e.Effective(s.now()) == elicitation.StatusPending {
		if _, err := s.elicitations.Settle(r, e, elicitation.StatusDeclined, "client_declined"); err != nil {
			return nil, err
		}
		if e, err = s.ownElicitation(r.Context(), c, id); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func notFound() error {
	return web.Errorf(http.StatusNotFound, "not_found", "no such elicitation")
}

// ownElicitation loads id if it was minted by this client for this user; any
// other elicitation is indistinguishable from a missing one.
func (s *Server) ownElicitation(ctx context.Context, c caller, id string) (*elicitation.Elicitation, error) {
	e, err := s.elicitations.Get(ctx, id)
	if errors.Is(err, elicitation.ErrNotFound) {
		return nil, notFound()
	}
	if err != nil {
		return nil, err
	}
	if e.ClientID != c.client.ID || e.Issuer != c.user.Issuer || e.Subject != c.user.Subject {
		return nil, notFound()
	}
	return e, nil
}

// waitFor blocks until the elicitation leaves pending, the wait ends, the
// request is cancelled or the server shuts down, then returns its state.
// When the calling client changes on any replica (disabled: a cut-off), its
// key is checked again, and a key now refused ends the poll with the error
// any request with it gets (401 invalid_client) instead of the status.
func (s *Server) waitFor(r *http.Request, c caller, id string, wait time.Duration) (*elicitation.Elicitation, error) {
	ctx := r.Context()
	ch, cancel := s.elicitations.Subscribe(id)
	defer cancel()
	changed, unwatch := s.clientWakeups.Subscribe(c.client.ID)
	defer unwatch()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// Checked after subscribing too, so a change between the request's
	// authentication and the subscription is not missed.
	recheck := true
	for {
		if recheck {
			// Only a refusal ends the poll; a check the database could not
			// answer (the listener's reconnect wakes every poll at once)
			// leaves it waiting, to be checked at the next change.
			if err := s.auth.Recheck(r, c.client.ID); clientauth.Refused(err) {
				s.sampleRefusal(r, clientauth.Client{}, err)
				return nil, err
			} else if err != nil {
				s.logger.WarnContext(ctx, "long-poll: the client could not be checked again; the poll goes on",
					slog.String("client_id", c.client.ID), slog.Any("error", err))
			}
			recheck = false
		}
		// Re-read after subscribing, so a completion between the first read
		// and the subscription is not missed.
		e, err := s.ownElicitation(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if e.Effective(s.now()) != elicitation.StatusPending {
			return e, nil
		}
		expiry := time.NewTimer(time.Until(e.ExpiresAt) + 10*time.Millisecond)
		select {
		case <-ch:
			expiry.Stop()
		case <-changed:
			expiry.Stop()
			recheck = true
		case <-expiry.C:
		case <-timer.C:
			expiry.Stop()
			return e, nil
		case <-s.done:
			expiry.Stop()
			return e, nil
		case <-ctx.Done():
			expiry.Stop()
			return nil, ctx.Err()
		}
	}
}

type resolveRequest struct {
	RequestState  string `json:"request_state"`
	RequestDigest string `json:"request_digest"`
}

// resolve handles POST /v1/elicitations/resolve.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &resolveRequest{}, endpoint[resolveRequest, statusDoc]{
		caller: authenticated[resolveRequest](s), call: s.resolveFor, encode: writeOK[statusDoc]})
}

// resolveFor resolves the request_state of the body (read once the caller
// is known) for c.
func (s *Server) resolveFor(w http.ResponseWriter, r *http.Request, c caller, req *resolveRequest) (statusDoc, error) {
	if err := web.DecodeJSON(w, r, req, 0); err != nil {
		return statusDoc{}, err
	}
	rs, err := s.openRequestState(req.RequestState)
	if err == nil {
		err = s.checkRequestState(rs, c.client.ID, c.user, req.RequestDigest)
	}
	if err == nil {
		err = s.consumeRequestState(r.Context(), rs)
	}
	if err != nil {
		if kind := requestStateKind(err); kind != "" {
			s.elicitations.Audit(r, audit.Event{Kind: "security.request_state_refused", Issuer: c.user.Issuer, Subject: c.user.Subject,
				ClientID: c.client.ID, Detail: map[string]any{"reason": kind}})
		}
		return statusDoc{}, err
	}
	e, err := s.ownElicitation(r.Context(), c, rs.Elicitation)
	if err != nil {
		return statusDoc{}, err
	}
	doc := s.statusOf(e)
	if doc.Status == elicitation.StatusPending {
		if doc.RequestState, err = s.sealRequestState(e); err != nil {
			return statusDoc{}, err
		}
	}
	return doc, nil
}

// requestStateKind is the reason a refused request_state is audited
// with: the code the error table answers it with; "" for an error that is
// no request_state refusal (the database's, say).
func requestStateKind(err error) string {
	if !errors.Is(err, refusal.ErrRequestState) {
		return ""
	}
	return web.AsError(err).Code
}

type connectionDoc struct {
	Provider string `json:"provider"`
	// ID, DisplayName, Label: which of the user's accounts at the provider
	// this is (account=<id> names it).
	ID           string     `json:"id"`
	DisplayName  string     `json:"display_name"`
	Label        string     `json:"label,omitempty"`
	Status       string     `json:"status"`
	Scopes       []string   `json:"scopes"`
	AccountLabel string     `json:"account_label,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	// ConsentRequired: the connection grants scopes this client is not
	// approved for (another client's step-up), or its approval predates
	// account binding; mint an elicitation to ask the user again.
	ConsentRequired bool `json:"consent_required,omitempty"`
}

// listConnections handles GET /v1/connections: only connections the user
// consented to for this client.
func (s *Server) listConnections(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &struct{}{}, endpoint[struct{}, connectionsDoc]{
		caller: authenticated[struct{}](s), call: s.connectionsOf, encode: writeOK[connectionsDoc]})
}

// connectionsDoc is the answer of GET /v1/connections.
type connectionsDoc struct {
	Connections []connectionDoc `json:"connections"`
}

// connectionsOf lists the connections c's user approved c for.
func (s *Server) connectionsOf(_ http.ResponseWriter, r *http.Request, c caller, _ *struct{}) (connectionsDoc, error) {
	consented, err := s.consents.OfClient(r.Context(), c.user, c.client.ID)
	if err != nil {
		return connectionsDoc{}, err
	}
	conns, err := s.connections(&c).List(r.Context(), c.user)
	if err != nil {
		return connectionsDoc{}, err
	}
	out := connectionsDoc{Connections: []connectionDoc{}}
	for _, cn := range conns {
		i := slices.IndexFunc(consented[cn.Provider], func(a consent.Approval) bool { return a.ConnectionID == cn.ID })
		if i < 0 || cn.Status == vault.StatusRevoked {
			continue
		}
		a := consented[cn.Provider][i]
		// What this client would receive (the one release decision): a
		// connection it would get nothing of — grown past its approval at a
		// provider that cannot narrow, or now another provider account — is
		// marked; its token answers consent_required. Only the scopes it may
		// see are listed.
		h, err := s.connections(&c).HeldOf(r.Context(), c.user, cn)
		if err != nil {
			return connectionsDoc{}, err
		}
		dec := releaseClient(c.client).Decide(h, &a, s.narrows(cn.Provider))
		d := connectionDoc{Provider: cn.Provider, ID: cn.ID, Status: string(cn.Status), Scopes: dec.Visible(),
			CreatedAt: cn.CreatedAt.UTC(), UpdatedAt: cn.UpdatedAt.UTC(), ConsentRequired: dec.Release == release.Nothing}
		if dec.MayName() { // another account's name is not this client's to know
			d.DisplayName, d.Label = cn.DisplayName, cn.Label
		}
		if !cn.Expiry.IsZero() {
			t := cn.Expiry.UTC()
			d.ExpiresAt = &t
		}
		out.Connections = append(out.Connections, d)
	}
	return out, nil
}

// releaseClient is the one way the release decision's client is made of
// an authenticated MCP server, its organization included: every decision
// about a connection is asked of it (release.Client's methods), never of the
// package functions, which decide for the default organization.
func releaseClient(cl clientauth.Client) release.Client {
	return release.Client{ID: cl.ID, Org: cl.Org, Providers: cl.Providers, ProxyOnly: cl.ProxyOnly}
}

// released is what the release decision gave an authenticated client: the
// credential (whole or narrowed), the approval it was given under, and the
// provider.
type released struct {
	provider string
	cred     *vault.Credential
	approval consent.Approval
	info     provider.Info
	// narrowedTo: cred is a token narrowed to these scopes (nil: the
	// connection's own).
	narrowedTo []string
	// appID is the provider app the connection was obtained with ("": the
	// deployment's): the proxy's bulkhead is per app.
	appID string
}

// release is the one credential-release path, for the token read, token
// exchange and the proxy: package release admits the client (before any
// lookup), chooses the approval the request is about (account), and decides
// on the stored row — before the credential is opened or refreshed — the
// whole credential, a narrowed one, or its typed refusal, which the error
// table answers.
func (s *Server) release(r *http.Request, c *caller, use release.Use, name, account string, required []string) (released, error) {
	admitted := release.Admit(releaseClient(c.client), name, use)
	if errors.Is(admitted, release.ErrProxyOnly) {
		s.sampleDenied(r, c, "security.token_release_refused", name)
		return released{}, admitted
	}
	if !names.ValidProvider(name) {
		return released{}, notConnected(name)
	}
	p, err := s.catalog.Get(name)
	if err != nil {
		return released{}, notConnected(name)
	}
	if admitted != nil {
		return released{}, admitted
	}
	approvals, err := s.consents.For(r.Context(), c.user, c.client.ID, name)
	if errors.Is(err, consent.ErrNotGiven) {
		return released{}, s.withoutConsent(r.Context(), c, name, account)
	}
	if err != nil {
		return released{}, err
	}
	ap, err := s.chosen(r.Context(), c, name, account, approvals)
	if err != nil {
		return released{}, err
	}
	appr := *ap
	info := p.Info()
	var (
		d     release.Decision
		appID string
	)
	cred, err := s.connections(c).TokenFor(r.Context(), c.user, name, appr.ConnectionID, required, func(h vault.Held) error {
		var err error
		appID = h.AppID
		d, err = releaseClient(c.client).Credential(name, h, &appr, info.NarrowOnRefresh, required)
		return err
	})
	if err != nil {
		return released{}, aboutConnection(name, appr.ConnectionID, err)
	}
	var narrowedTo []string
	if d.Release == release.Narrowed {
		if cred, err = s.narrowed(r, c, name, appr, cred, d); err != nil {
			return released{}, err
		}
		narrowedTo = d.Scopes
	}
	return released{provider: name, cred: cred, approval: appr, info: info, narrowedTo: narrowedTo, appID: appID}, nil
}

// narrowed is the token for a client the decision gives a token narrowed to
// d.Scopes (release.Narrowed): fetched for the account the client was
// approved for; refused (consent_required) when the provider cannot narrow
// it after all.
func (s *Server) narrowed(r *http.Request, c *caller, name string, appr consent.Approval, cred *vault.Credential,
	d release.Decision) (*vault.Credential, error) {
	n, err := s.connections(c).Narrowed(r.Context(), c.user, name, appr.ConnectionID, d.Scopes, cred.AccountID)
	if errors.Is(err, vault.ErrCannotNarrow) {
		s.logger.WarnContext(r.Context(), "token could not be narrowed; the client must be approved for the whole connection",
			slog.String("provider", name), slog.Any("error", err))
		return nil, release.NotNarrowed(name, d)
	}
	if err != nil {
		return nil, problem.About(name, err)
	}
	return n, nil
}

// withoutConsent answers a client that holds no consent for the user's
// provider: not_connected when there is no connection at all, else
// consent_required, so the MCP server knows which of the two to fix. The
// credential is never read for it. Only connections of c's organization
// count: a user whose only connection there is another organization's has,
// to c, none (not_connected, never consent_required).
func (s *Server) withoutConsent(ctx context.Context, c *caller, name, account string) error {
	if account != "" && account != AccountAll {
		if _, err := s.chosen(ctx, c, name, account, nil); !errors.Is(err, release.ErrConsentRequired) {
			return err // not_found for an id that is not the user's connection here
		}
	}
	ok, err := s.connections(c).Exists(ctx, c.user, name)
	if err != nil {
		return err
	}
	if !ok {
		return notConnected(name)
	}
	_, err = release.Choose(name, nil, "")
	return err
}

// narrows reports whether provider narrows tokens on refresh.
func (s *Server) narrows(provider string) bool {
	p, err := s.catalog.Get(provider)
	return err == nil && p.Info().NarrowOnRefresh
}

// aboutConnection is the error table's answer to err for connection id,
// naming that connection when the answer asks the client to connect it
// again (reauthorization_required, insufficient_scope): the mint then
// names it (account=<id>) and the right account is asked for.
func aboutConnection(name, id string, err error) error {
	e := web.AsError(problem.About(name, err))
	if e.NamesConnection() {
		c := *e
		c.Fields = maps.Clone(e.Fields)
		if c.Fields == nil {
			c.Fields = map[string]any{}
		}
		c.Fields["account"] = map[string]any{"id": id}
		return &c
	}
	return e
}

// notConnected is the answer for a provider the user has no connection
// at (or that is no provider): the error table's not_connected.
func notConnected(name string) error { return problem.About(name, vault.ErrNotConnected) }

// unlinkDoc is one connection an unlink ended.
type unlinkDoc struct {
	ID                string `json:"id"`
	RevokedAtProvider bool   `json:"revoked_at_provider"`
	Revocation        string `json:"revocation"`
}

// unlink handles DELETE /v1/connections/{provider}[?account=<id>|all]: the
// connection the client names (or its only one there), or with account=all
// every one it is approved for. Each needs an approval that covers its
// account now.
func (s *Server) unlink(w http.ResponseWriter, r *http.Request) error {
	return serveJSON(w, r, &unlinkRequest{}, endpoint[unlinkRequest, map[string]any]{
		decode: func(r *http.Request, req *unlinkRequest) error {
			req.provider, req.account = r.PathValue("provider"), r.URL.Query().Get("account")
			return nil
		},
		caller: authenticated[unlinkRequest](s), call: s.unlinkFor, encode: writeOK[map[string]any]})
}

// unlinkRequest is an unlink: the provider and the connection (an id,
// AccountAll, or "" for the client's only one there).
type unlinkRequest struct{ provider, account string }

// unlinkFor ends the connections req names that c may end.
func (s *Server) unlinkFor(_ http.ResponseWriter, r *http.Request, c caller, req *unlinkRequest) (map[string]any, error) {
	name, account := req.provider, req.account
	if !names.ValidProvider(name) {
		return nil, notConnected(name)
	}
	if err := release.Admit(releaseClient(c.client), name, release.Describe); err != nil {
		return nil, err
	}
	approvals, err := s.consents.For(r.Context(), c.user, c.client.ID, name)
	if errors.Is(err, consent.ErrNotGiven) {
		return nil, s.withoutConsent(r.Context(), &c, name, account)
	} else if err != nil {
		return nil, err
	}
	chosen := approvals
	if account != AccountAll {
		ap, err := s.chosen(r.Context(), &c, name, account, approvals)
		if err != nil {
			return nil, err
		}
		chosen = []consent.Approval{*ap}
	}
	// Unlinking revokes the credential at the provider for every client: a
	// client may do it only while its approval is for the account connected
	// now (a stale approval of another account is no say over this one).
	type target struct {
		conn    *vault.Connection
		account []byte // what the decision saw: the delete goes ahead only while the row still holds it
	}
	var targets []target
	for _, appr := range chosen {
		conn, err := s.connections(&c).Lookup(r.Context(), c.user, name, appr.ConnectionID)
		if errors.Is(err, vault.ErrNotConnected) {
			continue // gone meanwhile
		}
		if err != nil {
			return nil, err
		}
		h, err := s.connections(&c).HeldOf(r.Context(), c.user, *conn)
		if err != nil {
			return nil, err
		}
		if err := releaseClient(c.client).MayEnd(name, h, &appr); err != nil {
			return nil, err
		}
		targets = append(targets, target{conn, h.Account})
	}
	if len(targets) == 0 {
		return nil, notConnected(name)
	}
	out := []unlinkDoc{}
	for _, t := range targets {
		// Credentials and every client's consent go in one transaction.
		ended, err := s.lifecycle.DeleteIn(context.WithoutCancel(r.Context()), c.client.Org, c.user, name, t.conn.ID, t.account,
			lifecycle.Actor{Audit: "client:" + c.client.ID, By: "client", ClientID: c.client.ID,
				RequestID: web.RequestID(r.Context()), IP: web.ClientAddr(r),
				// The user is told on /account which application ended it.
				Notice: &notice.Notice{Kind: notice.KindClientUnlinked, ClientID: c.client.ID, ClientName: c.client.Name}})
		switch {
		case errors.Is(err, vault.ErrNotConnected):
			continue
		case errors.Is(err, lifecycle.ErrReplaced):
			// Another account's credential since the approval was checked:
			// that check is void.
			return nil, release.Replaced(name)
		case err != nil:
			return nil, err
		}
		d := ended.Deletion
		out = append(out, unlinkDoc{ID: t.conn.ID, RevokedAtProvider: d.Revocation == vault.Revoked,
			Revocation: string(d.Revocation)})
	}
	if len(out) == 0 {
		return nil, notConnected(name)
	}
	return map[string]any{"provider": name, "revoked_at_provider": out[0].RevokedAtProvider,
		"revocation": out[0].Revocation, "connections": out}, nil
}
