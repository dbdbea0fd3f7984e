package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connectd/connectd/internal/approval"
	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/elicitation"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/names"
	"github.com/connectd/connectd/internal/problem"
	"github.com/connectd/connectd/internal/proxy"
	"github.com/connectd/connectd/internal/refusal"
	"github.com/connectd/connectd/internal/release"
	"github.com/connectd/connectd/internal/web"
)

// The proxy (issue 25): an MCP server calls the provider's API through
// connectd, which attaches the user's credential itself; the MCP server
// never holds it. It is authenticated and decided exactly as the token read
// (release): the same client key and user token, the same approval, the
// same narrowed credential. Where the call goes and what crosses is package
// proxy's.

// AccountHeader names the connection a proxied call is for, as the token
// read's account=<id> (the query belongs to the provider's API); it is not
// forwarded (no Connectd-* header is).
const AccountHeader = "Connectd-Account"

// ScopesHeader names the scopes a proxied call needs, as the token read's
// scopes=…: a connection without them is insufficient_scope (and a client
// not approved for them consent_required) before the provider is called,
// so the MCP server can ask the user for them instead of reading the
// provider's 403. It is not forwarded.
const ScopesHeader = "Connectd-Scopes"

// TimeoutHeader is how long a proxied call may wait for the provider's
// answer, as the caller asks (a Go duration: "5s", "1500ms"): shorter than
// the proxy's own deadline (proxy.DefaultHeaderTimeout) it holds, longer
// it is that deadline. Past it the call is 504 provider_timeout. It is not
// forwarded.
const TimeoutHeader = "Connectd-Timeout"

// proxyPrefix is where the proxy's paths start: /v1/proxy/{provider}/{path}.
// Its route is Raw (server.go): ServeMux neither cleans nor redirects a path
// below it, so that what ServeMux would redirect ("..", ".", "//") is
// refused here like any path the proxy will not send.
const proxyPrefix = "/v1/proxy/"

// proxyCall handles /v1/proxy/{provider}/{path...}. The path is checked
// (proxy.Clean), then the method and any override (proxy.Check), before
// the caller is authenticated or anything is looked up; the request rules
// match the cleaned path, the very one sent, before the release could
// refresh a token at the provider. It picks no status: its errors are
// rows of the one error table (internal/web's codes.go).
func (s *Server) proxyCall(w http.ResponseWriter, r *http.Request) error {
	name, path, err := proxyPath(r)
	if err != nil {
		return err
	}
	if err := proxy.Check(r); err != nil {
		return problem.About(name, err)
	}
	var wait time.Duration
	if h := r.Header.Get(TimeoutHeader); h != "" {
		if wait, err = proxy.ParseTimeout(h); err != nil {
			return err
		}
	}
	c, err := s.authenticate(r)
	if err != nil {
		return err
	}
	var rule clientauth.Rule
	if rules, ok := c.client.ProxyRules[name]; ok {
		if rule, ok = rules.Match(r.Method, "/"+path); !ok {
			s.sampleDenied(r, &c, "security.proxy_not_allowed", name)
			return problem.About(name, clientauth.ErrProxyNotAllowed)
		}
	}
	var required []string
	if h := r.Header.Get(ScopesHeader); h != "" {
		required = dedupe(strings.FieldsFunc(h, func(r rune) bool { return r == ',' || r == ' ' }))
		if err := validScopes(required); err != nil {
			return err
		}
	}
	rel, err := s.release(r, &c, release.Proxy, name, r.Header.Get(AccountHeader), required)
	if err != nil {
		return err
	}
	if rel.info.APIBaseURL == "" || rel.info.APIAuth.Header == "" {
		return problem.About(name, proxy.ErrNotSupported)
	}
	base, err := apiBase(rel.info.APIBaseURL)
	if err != nil {
		return fmt.Errorf("connect: api base of %s: %w", name, err)
	}
	connID := rel.approval.ConnectionID
	if rule.Ask {
		// The user approves this call first (issue 36): checked after the
		// release, so that it is asked only of a user whose connection the
		// client may use, and for that connection.
		if err := s.askFirst(w, r, &c, name, path, rule, connID); err != nil {
			return err
		}
	}
	start := s.now()
	call := &proxy.Call{Base: base, Path: path, Header: rel.info.APIAuth.Header,
		Value: rel.info.APIAuth.HeaderValue(rel.cred.AccessToken), Provider: name, App: rel.appID,
		Drop: []string{mcpauth.UserTokenHeader, clientauth.DPoPHeader, AccountHeader, ScopesHeader}, HeaderTimeout: wait,
		Budget: s.budgets.For(name, rel.appID, connID, path, rel.info.RateLimits)}
	call.Refresh = func(ctx context.Context) (string, error) {
		// The provider refused the token: refresh it once (across
		// replicas, under the connection's lease; at most once a window
		// for 401s, vault.RefusedRefreshWindow) — a narrowed token is
		// fetched anew, the connection's own token otherwise — then decide
		// again.
		if rel.narrowedTo != nil {
			if _, err := s.connections(&c).NarrowedRefused(ctx, c.user, name, connID, rel.narrowedTo, rel.cred.AccountID,
				rel.cred.AccessToken); err != nil {
				return "", err
			}
		} else if err := s.connections(&c).Refused(ctx, c.user, name, connID, rel.cred.AccessToken); err != nil {
			return "", err
		}
		again, err := s.release(r.WithContext(ctx), &c, release.Proxy, name, connID, required)
		if err != nil {
			return "", err
		}
		if again.cred.AccessToken == rel.cred.AccessToken {
			return "", errors.New("connect: the token was not refreshed (none to refresh it with, or refreshed for a 401 a moment ago)")
		}
		return rel.info.APIAuth.HeaderValue(again.cred.AccessToken), nil
	}
	fr, stop := s.whileAllowed(r, c.client.ID)
	status, err := s.forwarder.Forward(w, fr, call)
	stop()
	if refused, ok := context.Cause(fr.Context()).(*clientRefused); ok && status == 0 {
		return refused.err // disabled before the provider answered: what the key now gets
	}
	s.onProxy(name, status, time.Since(start))
	s.sampleProxy(r, &c, name, connID, path, rule, status, err)
	return problem.About(name, err)
}

// approvalDoc is the "approval" member of a user_approval_required answer:
// the approval's elicitation as a mint answers it, and the call it is for.
type approvalDoc struct {
	mintResponse
	Method  string `json:"method"`
	Path    string `json:"path"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// askFirst lets a call under an ask rule through when the user allowed it
// (approval.Store.Allowed: a standing approval of the rule, or one for
// exactly this call, used up now), and otherwise answers
// user_approval_required with the approval link — the one already pending
// for exactly this call, or a new one. The body is read whole first (at
// most approval.MaxBody): the approval is bound to its hash, and the very
// bytes hashed are the ones sent.
//
// An approval is a link the user is shown, as a connect link is: asking one
// spends the mint budgets (per user and client, per user), so no client can
// flood a user — or the database — with approvals.
func (s *Server) askFirst(w http.ResponseWriter, r *http.Request, c *caller, name, path string, rule clientauth.Rule, connID string) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, approval.MaxBody+1))
	if err != nil {
		return web.Errorf(http.StatusBadRequest, "invalid_request", "the body could not be read")
	}
	if len(body) > approval.MaxBody {
		return problem.Detail(proxy.ErrTooLarge, "a call the user approves first carries at most %d KiB", approval.MaxBody>>10)
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	target := "/" + path
	if q := r.URL.RawQuery; q != "" {
		target += "?" + q
	}
	call := &approval.Call{Org: c.client.Org, ClientID: c.client.ID, User: c.user, Provider: name, ConnectionID: connID,
		Rule: rule, Method: r.Method, Path: target, Body: body, BodyType: r.Header.Get("Content-Type")}
	var (
		e       *elicitation.Elicitation
		created bool
	)
	for attempt := 0; ; attempt++ {
		if ok, err := s.approvals.Allowed(r.Context(), call); err != nil || ok {
			return err
		}
		if attempt == 0 {
			user := c.user.Issuer + "\x00" + c.user.Subject
			if err := s.mintLimit.Allow(w, r, web.KeyOf(user+"\x00"+c.client.ID)); err != nil {
				return err
			}
			if err := s.mintUserLimit.Allow(w, r, web.KeyOf(user)); err != nil {
				return err
			}
		}
		// The user may have allowed this very call (on an earlier link)
		// since Allowed: Ask sees it, asks nothing, and the call goes —
		// unless another replica's identical call used that one grant
		// meanwhile; then this one is asked (approval.Store.Ask).
		e, created, err = s.approvals.Ask(r, call)
		if errors.Is(err, approval.ErrAllowed) && attempt < 2 {
			continue
		}
		if errors.Is(err, approval.ErrAllowed) {
			return problem.Detail(problem.ErrConflict, "the user's approvals of this call kept changing; retry it")
		}
		if err != nil {
			return err
		}
		break
	}
	if created {
		s.receiptAsked(r, c, name, connID, rule)
	}
	rs, err := s.sealRequestState(e)
	if err != nil {
		return err
	}
	return &refusal.ApprovalRequired{Words: rule.Words, Approval: approvalDoc{mintResponse: s.mintDoc(e, rs),
		Method: r.Method, Path: target, Rule: rule.Key(), Message: rule.Words}}
}

// apiBases are the providers' API base URLs parsed, by their text: a few
// per provider (templates, an organization's own), parsed once, not once a
// call. Never modified (proxy.Call.Target copies Base); bounded.
var apiBases sync.Map // string → *url.URL

func apiBase(raw string) (*url.URL, error) {
	if u, ok := apiBases.Load(raw); ok {
		return u.(*url.URL), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if apiBaseCount.Add(1) > 10_000 { // a deployment has nowhere near as many: just stop keeping more
		return u, nil
	}
	apiBases.Store(raw, u)
	return u, nil
}

var apiBaseCount atomic.Int64

// proxyPath splits r's escaped path below proxyPrefix into the provider
// and the path below its API (proxy.Clean's form), or refuses it
// (proxy.ErrPath): the provider must be a provider id as it is, unescaped.
func proxyPath(r *http.Request) (name, path string, err error) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), proxyPrefix)
	name, p, found := strings.Cut(rest, "/")
	if !ok || !found || !names.ValidProvider(name) {
		return "", "", fmt.Errorf("%w: /v1/proxy/{provider}/{path} with a provider id", proxy.ErrPath)
	}
	if path, err = proxy.Clean(p); err != nil {
		return "", "", problem.About(name, err)
	}
	return name, path, nil
}

// watchAfter is how long a proxied call runs before it watches for its
// client being disabled: most calls are over by then, and a longer one (a
// stream, a slow provider) is checked once when it starts watching.
const watchAfter = 500 * time.Millisecond

// clientRefused is the cause of a proxied call ended because its client's
// key is now refused (disabled, cut off) on some replica.
type clientRefused struct{ err error }

func (e *clientRefused) Error() string {
	return "connect: the client's key is now refused: " + e.err.Error()
}

// whileAllowed returns r with a context that ends when the calling client
// is disabled on any replica while the call is in flight (a cut-off ends
// its streams as it ends its long-polls); stop ends the watch.
func (s *Server) whileAllowed(r *http.Request, clientID string) (*http.Request, func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	done := make(chan struct{})
	watch := func() {
		changed, unwatch := s.clientWakeups.Subscribe(clientID)
		defer unwatch()
		for {
			// Checked once subscribed too: a change before is not missed.
			// Only a refusal ends the call: a check the database could not
			// answer (a hiccup, the listener's reconnect waking every call
			// at once) leaves it running, to be checked at the next change.
			if err := s.auth.Recheck(r, clientID); clientauth.Refused(err) {
				cancel(&clientRefused{err})
				return
			} else if err != nil {
				s.logger.WarnContext(r.Context(), "proxy: the client could not be checked again; the call goes on",
					slog.String("client_id", clientID), slog.Any("error", err))
			}
			select {
			case <-changed:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}
	t := time.AfterFunc(watchAfter, watch)
	return r.WithContext(ctx), func() {
		t.Stop()
		close(done)
		cancel(nil)
	}
}
