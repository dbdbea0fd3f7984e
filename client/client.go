package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// UserTokenHeader carries the user's MCP access token on every /v1 call.
const UserTokenHeader = "X-User-Token"

// maxResponse bounds what is read from connectd.
const maxResponse = 1 << 20

// maxWait is connectd's longest long-poll.
const maxWait = 60 * time.Second

// defaultRetryWait is Config.RetryWait's default.
const defaultRetryWait = 20 * time.Second

// Config configures a Client.
type Config struct {
	// BaseURL is connectd's public origin, e.g. https://connect.example.com
	// (a path prefix is allowed).
	BaseURL string
	// Key is this MCP server's client key (cks_…, from `connectd clients
	// create`). Keep it secret: it is sent on every call.
	Key string
	// HTTPClient makes the calls. Default: a client with a 90 s timeout, more
	// than connectd's longest long-poll (60 s). A client with a shorter
	// timeout makes Wait poll with shorter waits. Redirects are not followed
	// unless the client sets its own CheckRedirect: net/http would resend the
	// X-User-Token header to wherever a redirect points.
	HTTPClient *http.Client
	// AllowHTTP permits an http:// BaseURL whose host is not a loopback
	// address. Development only: the key and the users' tokens would cross
	// the network in clear text. http://127.0.0.1 and http://localhost are
	// always allowed.
	AllowHTTP bool
	// UserAgent is sent with every call; default "connectd-client-go".
	UserAgent string
	// RetryWait bounds how long RequireConnection waits when the MCP client
	// retries a request whose connect link is still pending (connectd
	// answers the mint with the same elicitation): it waits on the
	// long-poll for up to this long, so a client that retries at once (for
	// instance after -32042) gets the connection, or the same link again,
	// rather than looping. RequireApproval waits as long for an approval it
	// handed out that comes back pending. Default 20 s; a negative value: no
	// wait.
	RetryWait time.Duration
	// NoFallback turns the fallback off: by default, RequireConnection
	// (and RequireApproval) answers an MCP client that did not declare
	// URL-mode elicitation with a tool result that asks the user to open
	// the connect (approval) link and try again (Answer.Fallback). With
	// NoFallback it fails with ErrURLElicitationUnsupported instead, without
	// minting anything.
	NoFallback bool
}

// Client calls connectd's /v1 API on behalf of one MCP server. It is safe for
// concurrent use. Every call acts for the user whose MCP access token it is
// given: the bare JWT the MCP server received from its MCP client (and has
// verified), which connectd verifies again.
type Client struct {
	base      string
	key       string
	hc        *http.Client
	userAgent string
	retryWait time.Duration
	fallback  bool
	approvals handedOut // approvals RequireApproval handed out (to recognise a retry)
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("connectd client: BaseURL must be an absolute https URL without user info, query or fragment")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (cfg.AllowHTTP || loopback(u.Hostname())):
	case u.Scheme == "http":
		return nil, errors.New("connectd client: BaseURL must use https (set AllowHTTP for a development http:// URL)")
	default:
		return nil, errors.New("connectd client: BaseURL must be an http(s) URL")
	}
	if cfg.Key == "" || strings.ContainsFunc(cfg.Key, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, errors.New("connectd client: Key must be the client key (cks_…)")
	}
	hc := http.Client{Timeout: 90 * time.Second}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	if hc.CheckRedirect == nil {
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	c := &Client{base: u.String(), key: cfg.Key, hc: &hc, userAgent: cfg.UserAgent, retryWait: cfg.RetryWait,
		fallback: !cfg.NoFallback}
	if c.userAgent == "" {
		c.userAgent = "connectd-client-go"
	}
	switch {
	case c.retryWait == 0:
		c.retryWait = defaultRetryWait
	case c.retryWait < 0:
		c.retryWait = 0
	}
	return c, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Mint creates an elicitation (POST /v1/elicitations): a connect URL bound to
// this client, the user and the provider, with the MCP shapes that carry it.
func (c *Client) Mint(ctx context.Context, userToken string, req MintRequest) (*Elicitation, error) {
	var out Elicitation
	// 200: the same request is already pending, answered again (same link).
	status, err := c.call(ctx, http.MethodPost, "/v1/elicitations", nil, userToken, req, &out, http.StatusCreated, http.StatusOK)
	if err != nil {
		return nil, err
	}
	out.Again = status == http.StatusOK
	return &out, nil
}

// Status returns an elicitation's state (GET /v1/elicitations/{id}). With
// wait > 0 connectd holds the answer until the elicitation leaves pending or
// wait ends (at most 60 s; longer waits are cut to 60 s).
func (c *Client) Status(ctx context.Context, userToken, elicitationID string, wait time.Duration) (*ElicitationStatus, error) {
	if elicitationID == "" {
		return nil, errors.New("connectd client: empty elicitation id")
	}
	var q url.Values
	if wait > 0 {
		wait = min(wait, maxWait)
		q = url.Values{"wait": {strconv.Itoa(int((wait+time.Second-1)/time.Second)) + "s"}}
	}
	var out ElicitationStatus
	err := c.do(ctx, http.MethodGet, "/v1/elicitations/"+url.PathEscape(elicitationID), q, userToken, nil, &out, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel tells connectd that the user declined or cancelled opening the
// link in the MCP client (DELETE /v1/elicitations/{id}): a pending
// elicitation ends declined (reason client_declined), so the next
// RequireConnection for the request mints a new link at once instead of
// waiting on the pending one. It returns the status after the call; an
// elicitation that already ended is returned as it is.
func (c *Client) Cancel(ctx context.Context, userToken, elicitationID string) (*ElicitationStatus, error) {
	if elicitationID == "" {
		return nil, errors.New("connectd client: empty elicitation id")
	}
	var out ElicitationStatus
	err := c.do(ctx, http.MethodDelete, "/v1/elicitations/"+url.PathEscape(elicitationID), nil, userToken, nil, &out, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Resolve consumes a request_state the MCP client echoed back (POST
// /v1/elicitations/resolve) and returns the elicitation's state. While it is
// still pending, the answer's RequestState is a fresh one for the next round.
// requestDigest must repeat the RequestDigest given at mint time, if any.
func (c *Client) Resolve(ctx context.Context, userToken, requestState, requestDigest string) (*ElicitationStatus, error) {
	body := struct {
		RequestState  string `json:"request_state"`
		RequestDigest string `json:"request_digest,omitempty"`
	}{requestState, requestDigest}
	var out ElicitationStatus
	if err := c.do(ctx, http.MethodPost, "/v1/elicitations/resolve", nil, userToken, body, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return &out, nil
}

// Connections lists the user's connections this client was allowed to use
// (GET /v1/connections). No credential is included.
func (c *Client) Connections(ctx context.Context, userToken string) ([]Connection, error) {
	var out struct {
		Connections []Connection `json:"connections"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/connections", nil, userToken, nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Connections, nil
}

// Token returns a currently valid credential for provider (GET
// /v1/connections/{provider}/token), refreshed by connectd first if it was
// about to expire. Every scope in required must have been granted, else the
// error matches ErrInsufficientScope and lists the missing ones. When
// NeedsConnection(err) is true, mint an elicitation.
//
// It reads the one connection at provider this client is approved for.
// When the user approved it for several (work and personal GitHub), the
// error matches ErrAccountRequired and APIError.Accounts lists them: ask
// the user which (ChooseAccount), then call AccountToken.
func (c *Client) Token(ctx context.Context, userToken, provider string, required ...string) (*Token, error) {
	return c.AccountToken(ctx, userToken, provider, "", required...)
}

// AccountToken is Token for one of the user's accounts at provider:
// account is its connection id (Account.ID, Connection.ID); empty is
// Token's choice. An id that is not one of the user's connections at
// provider is ErrNotFound; one of the user's this client is not approved
// for is ErrConsentRequired (mint with MintRequest.Account set to it).
func (c *Client) AccountToken(ctx context.Context, userToken, provider, account string, required ...string) (*Token, error) {
	if provider == "" {
		return nil, errors.New("connectd client: empty provider")
	}
	q := url.Values{}
	if len(required) > 0 {
		q.Set("scopes", strings.Join(required, ","))
	}
	if account != "" {
		q.Set("account", account)
	}
	var out Token
	err := c.do(ctx, http.MethodGet, "/v1/connections/"+url.PathEscape(provider)+"/token", q, userToken, nil, &out, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Unlink deletes the user's connection to provider and revokes it at the
// provider where supported (DELETE /v1/connections/{provider}). Every
// client's consent to it is withdrawn. It unlinks the one connection this
// client is approved for; with several it fails with ErrAccountRequired
// (see UnlinkAccount).
func (c *Client) Unlink(ctx context.Context, userToken, provider string) (*Unlinked, error) {
	return c.UnlinkAccount(ctx, userToken, provider, "")
}

// UnlinkAccount is Unlink for one of the user's accounts at provider: a
// connection id, AccountAll for every one this client is approved for
// there, or empty (Unlink). Unlinked.Connections lists each one unlinked.
func (c *Client) UnlinkAccount(ctx context.Context, userToken, provider, account string) (*Unlinked, error) {
	if provider == "" {
		return nil, errors.New("connectd client: empty provider")
	}
	var q url.Values
	if account != "" {
		q = url.Values{"account": {account}}
	}
	var out Unlinked
	if err := c.do(ctx, http.MethodDelete, "/v1/connections/"+url.PathEscape(provider), q, userToken, nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return &out, nil
}

// errorBody is connectd's JSON error envelope.
type errorBody struct {
	Error            string    `json:"error"`
	Description      string    `json:"error_description"`
	RequestID        string    `json:"request_id"`
	MissingScopes    []string  `json:"missing_scopes"`
	UnapprovedScopes []string  `json:"unapproved_scopes"`
	AccountChanged   bool      `json:"account_changed"`
	Accounts         []Account `json:"accounts"`
	Approval         *Approval `json:"approval"`
}

// do makes one call and decodes an answer with one of the want statuses into
// out; any other status becomes an *APIError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, userToken string, in, out any, want ...int) error {
	_, err := c.call(ctx, method, path, query, userToken, in, out, want...)
	return err
}

// call is do, reporting which of the want statuses connectd answered.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, userToken string, in, out any, want ...int) (int, error) {
	if userToken == "" {
		return 0, fmt.Errorf("connectd client: %s %s: no user token given (the MCP access token of the user the call is for): %w",
			method, path, ErrUserToken)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("connectd client: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, fmt.Errorf("connectd client: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set(UserTokenHeader, userToken)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// url.Error names the URL, which holds no secret (the key and the
		// token travel in headers).
		return 0, fmt.Errorf("connectd client: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return 0, fmt.Errorf("connectd client: read %s %s: %w", method, path, err)
	}
	if len(raw) > maxResponse {
		return 0, fmt.Errorf("connectd client: %s %s: answer larger than %d bytes", method, path, maxResponse)
	}
	if !slices.Contains(want, resp.StatusCode) {
		return 0, apiError(resp, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return 0, fmt.Errorf("connectd client: %s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

func apiError(resp *http.Response, raw []byte) error {
	e := &APIError{Status: resp.StatusCode}
	var b errorBody
	if json.Unmarshal(raw, &b) == nil && b.Error != "" {
		e.Code, e.Description, e.RequestID, e.MissingScopes = b.Error, b.Description, b.RequestID, b.MissingScopes
		e.UnapprovedScopes, e.AccountChanged, e.Accounts = b.UnapprovedScopes, b.AccountChanged, b.Accounts
		if b.Error == "user_approval_required" {
			e.Approval = b.Approval
		}
	} else {
		e.Description = "unexpected answer: " + http.StatusText(resp.StatusCode)
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(s); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}
