// Package proxy forwards an MCP server's call to a provider's API with the
// user's credential attached by connectd, so the MCP server never holds it
// (issue 25). It owns the forwarding rules: where a call may go (the
// provider's API base URL and a path below it, never a host the caller
// names), which methods, paths and request and response headers cross
// (request.go), the body caps, the retry of a call the provider refused
// with 401 once the credential is refreshed, the hooks of the call's
// rate budget (budget.go: a spent one, a provider's 429/503 Retry-After
// included, is answered without calling the provider; package ratebudget
// keeps it across replicas), and the deadlines: the provider's answer within HeaderTimeout (15 s, or the
// caller's shorter one), the whole call within Timeout. Who may call, and with which credential,
// is package connect's (the one release decision).
package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults.
const (
	DefaultMaxRequestBytes  = 10 << 20  // 10 MiB
	DefaultMaxResponseBytes = 100 << 20 // 100 MiB
	DefaultTimeout          = 5 * time.Minute
	// DefaultHeaderTimeout bounds the wait for the provider's answer (its
	// status and headers) of one call, from when the call is sent (for a
	// streamed request body, from the last piece the provider took): a provider that
	// hangs is answered 504 well before the common MCP client timeouts
	// (30–60 s). A caller may ask for less (Call.HeaderTimeout), never
	// more. The answer's body then streams within Timeout.
	DefaultHeaderTimeout = 15 * time.Second
	// DefaultMaxInFlight caps the calls in flight to one provider app (a
	// provider and the app the credential is of) from one replica: a
	// provider that hangs holds at most this many of each app's calls.
	DefaultMaxInFlight = 512
	// replayable is the largest request body kept to send again after a
	// refresh (larger ones stream and are not retried).
	replayable = 1 << 20
)

// Config configures a Forwarder.
type Config struct {
	// Transport makes the calls: the egress client's (SSRF guard, no
	// proxy from the environment, no redirects followed).
	Transport http.RoundTripper
	// MaxRequestBytes and MaxResponseBytes cap the bodies (defaults above).
	MaxRequestBytes, MaxResponseBytes int64
	// Timeout bounds one forwarded call, streaming included
	// (CONNECTD_PROXY_TIMEOUT).
	Timeout time.Duration
	// HeaderTimeout bounds the wait for the provider's status and headers
	// (default DefaultHeaderTimeout); past it the call is ErrTimeout.
	HeaderTimeout time.Duration
	// MaxInFlight caps the calls in flight to one provider app, each
	// (Call.Provider, Call.App) apart (default DefaultMaxInFlight); past it
	// a call is ErrBusy at once, and other apps' calls are not affected.
	MaxInFlight int
	Now         func() time.Time
}

// Forwarder forwards calls. It is safe for concurrent use.
type Forwarder struct {
	cfg   Config
	mu    sync.Mutex
	slots map[bulkhead]chan struct{} // provider app → its in-flight calls
}

// New returns a Forwarder.
func New(cfg Config) *Forwarder {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	return &Forwarder{cfg: cfg, slots: map[bulkhead]chan struct{}{}}
}

// Errors the caller maps to its answers (internal/web's one error table
// has a row for each): each is returned wrapped, never a status.
var (
	// ErrPath: the path leaves the API base or is not a plain path (Clean).
	ErrPath = errors.New("proxy: not a plain path below the provider's API")
	// ErrMethod: the method is not one the proxy forwards (Methods).
	ErrMethod = errors.New("proxy: the method is not forwarded")
	// ErrOverride: the request carries a method override or a URL rewrite
	// (a header, a query parameter or a form field) that a provider might
	// honour over the method and path the rules matched.
	ErrOverride = errors.New("proxy: a method or URL override")
	// ErrNotSupported: the provider has no API base URL (or no way to
	// attach the credential) for the proxy.
	ErrNotSupported = errors.New("proxy: no API base URL for this provider")
	// ErrTooLarge: the request body is over the cap (or the response's
	// announced length is).
	ErrTooLarge = errors.New("proxy: body too large")
	// ErrResponseTooLarge: the provider's answer is over the cap.
	ErrResponseTooLarge = errors.New("proxy: the provider's answer is too large")
	// ErrRefused: the provider answered 401 to the credential (refreshed
	// and sent again where it could be).
	ErrRefused = errors.New("proxy: the provider refused the credential")
	// ErrBusy: as many calls to the provider with the call's app are in
	// flight as allowed.
	ErrBusy = errors.New("proxy: too many calls to the provider in flight")
	// ErrUnavailable: the provider could not be reached or did not answer.
	ErrUnavailable = errors.New("proxy: the provider could not be reached")
	// ErrTimeout: the provider's answer (status and headers) did not come
	// within the call's deadline (Config.HeaderTimeout, or the caller's
	// shorter Call.HeaderTimeout).
	ErrTimeout = errors.New("proxy: the provider did not answer in time")
	// ErrBadTimeout: the deadline a caller asked for is not a positive
	// duration (ParseTimeout).
	ErrBadTimeout = errors.New("proxy: not a positive duration")
)

// ParseTimeout reads the deadline a caller asks for its call: a positive Go
// duration with its unit ("5s", "1500ms", "1m"), at most an hour; one
// longer than the Forwarder's HeaderTimeout is that (a caller may ask for
// less, not more).
func ParseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 || d > time.Hour {
		return 0, fmt.Errorf("%w: %q (e.g. 5s, 1500ms)", ErrBadTimeout, v)
	}
	return d, nil
}

// HeldError: the call's budget is spent until Until — the provider asked
// not to be called until then (a 429/503 Retry-After, X-RateLimit-* or
// RateLimit headers) or its documented limit is reached (Call.Budget);
// the call was not made.
type HeldError struct {
	Until time.Time
	Left  time.Duration // what was left of the window when the call was refused (the answer's Retry-After)
}

func (e *HeldError) Error() string {
	return "proxy: the provider asked not to be called until " + e.Until.UTC().Format(time.RFC3339)
}

// Call is one forwarded call.
type Call struct {
	Base *url.URL // the provider's API base: scheme, host, optional path prefix
	// Path is the caller's path below Base, escaped, as Clean answers it
	// (Target cleans it again): an escaped slash (%2F, GitLab's project
	// ids) stays one.
	Path string
	// Header and Value attach the credential: Value is the header's whole
	// value (e.g. "Bearer …").
	Header, Value string
	// Refresh, when set, gives a new credential value after the provider
	// answered 401: the call is then sent once more when its body can be.
	Refresh func(ctx context.Context) (string, error)
	// Provider and App name the bulkhead the call takes a place in: the
	// provider, and the provider app the credential was obtained with
	// (vault.Connection.AppID; "" is the deployment's shared app, one app
	// for every organization that uses it). One organization's burst at a
	// provider with its own app takes none of another app's places.
	Provider, App string
	// Drop are request headers of connectd's own that must not cross
	// beyond those dropped by name or family (the user token header, the
	// DPoP proof), in their "_" spelling too (sameHeader).
	Drop []string
	// Budget, when set, is the call's share of the provider's rate limits
	// (budget.go), the one owner of a provider's Retry-After window: a
	// spent one is a *HeldError without calling the provider. Without one
	// nothing is held.
	Budget Budget
	// HeaderTimeout, when positive, is the caller's own deadline for the
	// provider's answer: the shorter of it and Config.HeaderTimeout holds.
	HeaderTimeout time.Duration
}

// Target is where c goes: Base's scheme and host, Base's path joined with
// c.Path cleaned (Clean: the path the rules matched is the one sent, byte
// for byte).
func (c *Call) Target() (*url.URL, error) {
	p, err := Clean(c.Path)
	if err != nil {
		return nil, err
	}
	u := *c.Base
	dp, err := url.PathUnescape(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPath, err)
	}
	u.Path = strings.TrimSuffix(c.Base.Path, "/") + "/" + dp
	u.RawPath = strings.TrimSuffix(c.Base.EscapedPath(), "/") + "/" + p
	if u.EscapedPath() != u.RawPath { // not a form url would send as it is: refused, not sent another way
		return nil, fmt.Errorf("%w: not sent as checked", ErrPath)
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return &u, nil
}

// responseKeep are the provider's response headers the caller receives;
// every other (Set-Cookie, its own security headers, WWW-Authenticate of a
// credential the caller never held) stays behind.
var responseKeep = []string{"Content-Type", "Content-Length", "Content-Encoding", "Content-Language",
	"Content-Disposition", "Content-Range", "Accept-Ranges", "Cache-Control", "Etag", "Expires", "Last-Modified",
	"Vary", "Link", "Location", "Retry-After", "Date"}

// keepResponse reports whether the provider's response header k crosses.
func keepResponse(k string) bool {
	k = http.CanonicalHeaderKey(k)
	for _, h := range responseKeep {
		if k == h {
			return true
		}
	}
	// Rate-limit headers of the common shapes (GitHub, Slack, IETF draft).
	return strings.HasPrefix(k, "X-Ratelimit-") || strings.HasPrefix(k, "Ratelimit") || strings.HasPrefix(k, "X-Rate-Limit-")
}

// Forward sends r as c to the provider and writes its answer to w, through
// httputil.ReverseProxy: status, the kept headers and the body as it
// arrives (a chunked or server-sent-events answer flushed piece by piece,
// nothing buffered beyond one copy buffer). It returns an error, having written nothing, when the call was
// not made or failed before an answer (Check's, ErrPath, ErrTooLarge, ErrOverride, *HeldError, ErrBusy,
// ErrResponseTooLarge, ErrUnavailable); else the status the caller got
// (after a 401 and a refresh, the second answer's). A body past the
// response cap is cut off mid-stream.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, c *Call) (int, error) {
	if err := Check(r); err != nil {
		return 0, err
	}
	target, err := c.Target()
	if err != nil {
		return 0, err
	}
	if r.ContentLength > f.cfg.MaxRequestBytes {
		return 0, ErrTooLarge
	}
	if err := f.admit(r.Context(), c); err != nil {
		return 0, err
	}
	release, ok := f.slot(bulkhead{c.Provider, c.App})
	if !ok {
		return 0, ErrBusy
	}
	defer release()
	// One context and one timer bound the call: first the answer's
	// deadline (the context ends with errNoAnswer unless the provider's
	// headers come first), then, once they came (ModifyResponse), what is
	// left of Timeout for the whole call, streaming included (errTooLong).
	wait := min(f.cfg.HeaderTimeout, f.cfg.Timeout)
	if c.HeaderTimeout > 0 && c.HeaderTimeout < wait {
		wait = c.HeaderTimeout
	}
	started := time.Now()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	in, err := f.replayable(r.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	var answered atomic.Bool
	deadline := time.AfterFunc(wait, func() {
		if answered.Load() {
			cancel(errTooLong)
		} else {
			cancel(errNoAnswer)
		}
	})
	defer deadline.Stop()
	if in.GetBody == nil && in.Body != http.NoBody {
		// A streamed body (over 1 MiB or of unknown length): the wait
		// starts again with each piece the provider takes, so a long upload
		// is not cut while a provider that stops taking it is; Timeout
		// bounds the whole.
		sendCtx, cancelSend := context.WithTimeout(in.Context(), f.cfg.Timeout)
		defer cancelSend()
		in = in.WithContext(sendCtx)
		in.Body = &progress{ReadCloser: in.Body, taken: func() {
			if !answered.Load() {
				deadline.Reset(wait)
			}
		}}
	}
	var (
		failed error
		status int
	)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target.RawQuery = pr.In.URL.RawQuery // target is this call's own copy
			pr.Out.URL, pr.Out.Host = target, ""
			for k := range pr.Out.Header {
				if dropRequest(k) || slices.ContainsFunc(c.Drop, func(d string) bool { return sameHeader(k, d) }) {
					delete(pr.Out.Header, k)
				}
			}
			pr.Out.Header.Set(c.Header, c.Value)
		},
		Transport: &retrying{next: f.cfg.Transport, call: c},
		// 0: an answer of unknown length (chunked) or a text/event-stream
		// one is flushed as each piece arrives (httputil flushes those
		// at once); one whose length is known is written as it is read
		// and flushed when complete, a write the fewer per call.
		FlushInterval: 0,
		ModifyResponse: func(resp *http.Response) error {
			if !deadline.Stop() && context.Cause(ctx) == errNoAnswer {
				return ErrTimeout // the answer came as its deadline passed
			}
			answered.Store(true)
			deadline.Reset(f.cfg.Timeout - time.Since(started))
			f.observe(c, resp.StatusCode, resp.Header)
			if resp.StatusCode == http.StatusUnauthorized {
				return ErrRefused
			}
			if resp.ContentLength > f.cfg.MaxResponseBytes {
				return ErrResponseTooLarge
			}
			for k := range resp.Header {
				if !keepResponse(k) {
					resp.Header.Del(k)
				}
			}
			resp.Body = &capped{ReadCloser: resp.Body, left: f.cfg.MaxResponseBytes}
			status = resp.StatusCode
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { failed = err },
		ErrorLog:     quiet, // a failure is the caller's answer (and its log line), not a line of its own
		BufferPool:   buffers,
	}
	rp.ServeHTTP(w, in)
	switch {
	case failed != nil && r.Context().Err() != nil:
		return 0, r.Context().Err() // the caller went away: not the provider's fault
	case failed == nil:
		return status, nil
	case errors.Is(failed, ErrResponseTooLarge), errors.Is(failed, ErrRefused):
		return 0, failed
	case errors.Is(failed, ErrTimeout) || context.Cause(ctx) == errNoAnswer:
		return 0, fmt.Errorf("%w (within %s)", ErrTimeout, wait)
	case isTimeout(failed):
		// The egress client's own header deadline, or the whole call's
		// Timeout, before an answer: the provider's silence as well.
		return 0, ErrTimeout
	case errors.As(failed, new(*http.MaxBytesError)):
		return 0, ErrTooLarge
	}
	// A transport error quotes the URL, whose query may hold what the
	// caller put there (a key): only the cause is kept.
	var ue *url.Error
	if errors.As(failed, &ue) {
		failed = ue.Err
	}
	return 0, fmt.Errorf("%w: %v", ErrUnavailable, failed)
}

var quiet = log.New(io.Discard, "", 0)

// errNoAnswer is the cause of a call's context ended by its answer's
// deadline.
var errNoAnswer = errors.New("proxy: no answer within the deadline")

// errTooLong is the cause of a call's context ended by Config.Timeout
// after the provider's answer began.
var errTooLong = errors.New("proxy: the call ran past its timeout")

// isTimeout reports whether a transport error is a timeout (the
// transport's ResponseHeaderTimeout, a deadline).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// buffers are the copy buffers of every forwarded body (httputil.BufferPool).
var buffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(x []byte) { b.p.Put(&x) }

// replayable caps r's body and, when it is small, keeps it so that the
// call can be sent again after a refresh (GetBody); a larger body streams
// and is not retried. A body frameworks parse into form fields (bodyForm:
// form-encoded, multipart/form-data, or one without a Content-Type) is
// read before it is sent, and refused holding a method override
// (ErrOverride: a framework would read it as the method; a multipart body
// that does not parse is refused the same way, since what a framework
// reads from it cannot be checked); one too large to read first (over
// 1 MiB, or of unknown length) is ErrTooLarge. The bytes sent are the
// bytes read, unchanged.
func (f *Forwarder) replayable(r *http.Request) (*http.Request, error) {
	out := r // Forward's own shallow copy (WithContext); ReverseProxy clones it again
	if r.Body == nil || r.Body == http.NoBody {
		out.Body, out.ContentLength = http.NoBody, 0
		out.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return out, nil
	}
	form := bodyForm(r.Header.Get("Content-Type"))
	limited := http.MaxBytesReader(nil, r.Body, f.cfg.MaxRequestBytes)
	if r.ContentLength < 0 || r.ContentLength > replayable {
		if form != notForm {
			return nil, fmt.Errorf("%w: a form body must have a Content-Length of at most 1 MiB", ErrTooLarge)
		}
		out.Body = limited
		return out, nil
	}
	b, err := io.ReadAll(limited)
	if err != nil {
		return nil, ErrTooLarge
	}
	switch form {
	case urlencoded:
		if k, ok := overrideField(string(b)); ok {
			return nil, fmt.Errorf("%w: form field %q", ErrOverride, k)
		}
	case multipartForm:
		if err := multipartOverride(b, r.Header.Get("Content-Type")); err != nil {
			return nil, err
		}
	}
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return out, nil
}

// retrying sends a call once more, with a refreshed credential, when the
// provider answered 401 and the body can be sent again.
type retrying struct {
	next http.RoundTripper
	call *Call
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || t.call.Refresh == nil || req.GetBody == nil {
		return resp, err
	}
	v, rerr := t.call.Refresh(req.Context())
	if rerr != nil {
		return resp, nil // the provider's 401 stands
	}
	body, err := req.GetBody()
	if err != nil {
		return resp, nil
	}
	resp.Body.Close()
	again := req.Clone(req.Context())
	again.Body = body
	again.Header.Set(t.call.Header, v)
	return t.next.RoundTrip(again)
}

// progress calls taken after each piece of a request body read.
type progress struct {
	io.ReadCloser
	taken func()
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if n > 0 {
		p.taken()
	}
	return n, err
}

// capped ends a response body with an error past its cap: the reverse
// proxy then cuts the answer off.
type capped struct {
	io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if int64(n) > c.left {
		n, c.left = int(c.left), -1
		return n, ErrResponseTooLarge
	}
	c.left -= int64(n)
	return n, err
}

// bulkhead is whose calls in flight a call counts among: one provider
// app's. There are as many as apps that were called (provider_apps' rows
// and the deployment's apps), so the map is never swept.
type bulkhead struct{ provider, app string }

// slot takes a place among b's calls in flight, without waiting.
func (f *Forwarder) slot(b bulkhead) (func(), bool) {
	f.mu.Lock()
	ch, ok := f.slots[b]
	if !ok {
		ch = make(chan struct{}, f.cfg.MaxInFlight)
		f.slots[b] = ch
	}
	f.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	default:
		return nil, false
	}
}
