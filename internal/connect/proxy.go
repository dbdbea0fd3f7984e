package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/connectd/connectd/internal/clientauth"
	"github.com/connectd/connectd/internal/mcpauth"
	"github.com/connectd/connectd/internal/proxy"
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
// forwarded.
const AccountHeader = "Connectd-Account"

// ScopesHeader names the scopes a proxied call needs, as the token read's
// scopes=…: a connection without them is insufficient_scope (and a client
// not approved for them consent_required) before the provider is called,
// so the MCP server can ask the user for them instead of reading the
// provider's 403. It is not forwarded.
const ScopesHeader = "Connectd-Scopes"

// proxyCall handles any method on /v1/proxy/{provider}/{path...}.
func (s *Server) proxyCall(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("provider")
	c, err := s.authenticate(r)
	if err != nil {
		return err
	}
	// The operator's request rules for this client at this provider, on
	// the decoded path: before anything is looked up, and before the release
	// could refresh a token at the provider.
	if rules, ok := c.client.ProxyRules[name]; ok && !rules.Allows(r.Method, "/"+r.PathValue("path")) {
		s.sampleDenied(r, &c, "security.proxy_not_allowed", name)
		return web.Errorf(http.StatusForbidden, "proxy_not_allowed",
			"this client may not make that call at %s (its request rules)", name)
	}
	var required []string
	if h := r.Header.Get(ScopesHeader); h != "" {
		required = dedupe(strings.FieldsFunc(h, func(r rune) bool { return r == ',' || r == ' ' }))
		if err := validScopes(required); err != nil {
			return err
		}
	}
	rel, err := s.release(r, &c, name, r.Header.Get(AccountHeader), required)
	if err != nil {
		return err
	}
	if rel.info.APIBaseURL == "" || rel.info.APIAuth.Header == "" {
		return web.Errorf(http.StatusNotFound, "proxy_not_supported",
			"connectd knows no API base URL for %s; read the token instead", name)
	}
	base, err := url.Parse(rel.info.APIBaseURL)
	if err != nil {
		return fmt.Errorf("connect: api base of %s: %w", name, err)
	}
	connID := rel.approval.ConnectionID
	start := s.now()
	// The path as sent (escaped): an escaped slash stays one (GitLab's
	// project ids); package proxy refuses one that climbs out.
	path, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/proxy/"+name+"/")
	if !ok {
		path = ""
	}
	call := &proxy.Call{Base: base, Path: path, Header: rel.info.APIAuth.Header,
		Value: rel.info.APIAuth.HeaderValue(rel.cred.AccessToken), HoldKey: name + "\x00" + connID, Provider: name,
		Drop: []string{mcpauth.UserTokenHeader, clientauth.DPoPHeader, AccountHeader, ScopesHeader}}
	call.Refresh = func(ctx context.Context) (string, error) {
		// The provider refused the token: refresh it once (across
		// replicas, under the connection's lease) — a narrowed token is
		// fetched anew, the connection's own token otherwise — then decide
		// again.
		if rel.narrowedTo != nil {
			if _, err := s.vault.NarrowedRefused(ctx, c.user, name, connID, rel.narrowedTo, rel.cred.AccountID,
				rel.cred.AccessToken); err != nil {
				return "", err
			}
		} else if err := s.vault.Refused(ctx, c.user, name, connID, rel.cred.AccessToken); err != nil {
			return "", err
		}
		again, err := s.release(r.WithContext(ctx), &c, name, connID, required)
		if err != nil {
			return "", err
		}
		if again.cred.AccessToken == rel.cred.AccessToken {
			return "", errors.New("connect: nothing to refresh the token with")
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
	s.sampleProxy(r, &c, name, connID)
	var held *proxy.HeldError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, proxy.ErrPath):
		return web.Errorf(http.StatusBadRequest, "invalid_request", "the path must be a plain path below the provider's API")
	case errors.Is(err, proxy.ErrTooLarge):
		return web.Errorf(http.StatusRequestEntityTooLarge, "request_too_large", "the request body is over the proxy's limit")
	case errors.Is(err, proxy.ErrResponseTooLarge):
		return web.Errorf(http.StatusBadGateway, "provider_response_too_large", "%s's answer is over the proxy's limit", name)
	case errors.Is(err, proxy.ErrRefused):
		return web.Errorf(http.StatusUnauthorized, "provider_unauthorized",
			"%s refused the credential, even refreshed; the user may have to connect again", name)
	case errors.As(err, &held):
		secs := max(1, int(held.Until.Sub(s.now()).Seconds()+0.999))
		return &web.Error{Status: http.StatusTooManyRequests, Code: "provider_rate_limited",
			Description: fmt.Sprintf("%s asked not to be called for now; retry later", name),
			Header:      http.Header{"Retry-After": {strconv.Itoa(secs)}}}
	case errors.Is(err, proxy.ErrBusy):
		return &web.Error{Status: http.StatusServiceUnavailable, Code: "provider_unavailable", Err: err,
			Description: fmt.Sprintf("too many calls to %s are in flight; retry shortly", name),
			Header:      http.Header{"Retry-After": {"1"}}}
	case errors.Is(err, context.Canceled):
		return err // the caller went away (499, as for any request)
	case errors.Is(err, proxy.ErrUnavailable):
		s.logger.WarnContext(r.Context(), "proxied call failed", "provider", name, "error", err)
		return &web.Error{Status: http.StatusServiceUnavailable, Code: "provider_unavailable", Err: err,
			Description: fmt.Sprintf("%s could not be reached; retry later", name),
			Header:      http.Header{"Retry-After": {"5"}}}
	}
	return err
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
		changed, unwatch := s.clientWakeups.subscribe(clientID)
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
