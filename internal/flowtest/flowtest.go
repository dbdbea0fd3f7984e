// Package flowtest is a scripted browser for connectd's connect flow over
// plain HTTP: it keeps cookies the way a browser does for one site, follows
// no redirect by itself, and walks a connect URL through login at the
// development identity provider (internal/devidp), the consent page and the
// fake third-party provider (internal/provider/providertest), which approves
// at once. The benchmark harness (cmd/connectd-bench) and the multi-replica
// tests drive real connectd processes with it.
//
// It is test and benchmark support: it trusts what it is pointed at and
// never handles a real user's credentials.
package flowtest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Browser is one browser: a cookie store and an HTTP client. Cookies are
// kept by name and sent to every host (connectd, the IdP and the provider
// all live on 127.0.0.1 in tests, as browsers treat localhost); Secure and
// __Host- cookies are sent over http, as browsers do for localhost.
//
// It is the one scripted browser of the repository: the benchmark, the
// multi-replica tests, the end-to-end test and the connect and admin test
// harnesses all drive connectd with it.
type Browser struct {
	client *http.Client

	mu sync.Mutex
	// Cookies are the browser's cookies by name. Tests may read and edit
	// them between requests (to forge, steal or drop a cookie), not while
	// a request of this Browser is in flight.
	Cookies map[string]string
}

// New returns a Browser that sends its requests with client's transport and
// timeout; redirects are never followed by the client itself.
func New(client *http.Client) *Browser {
	c := *client
	c.Jar = nil
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Browser{client: &c, Cookies: map[string]string{}}
}

// Response is what a request returned.
type Response struct {
	Status   int
	Location string // absolute
	Body     string
	Header   http.Header
	// SetCookies are the raw Set-Cookie headers.
	SetCookies []string
	// URL is the URL that answered (after Follow, the last one).
	URL string
}

// SetCookie returns the raw Set-Cookie header of the response for name, or "".
func (r Response) SetCookie(name string) string {
	for _, sc := range r.SetCookies {
		if strings.HasPrefix(sc, name+"=") {
			return sc
		}
	}
	return ""
}

// Do sends one request (a form POST when form is not nil) and records the
// cookies the answer sets.
func (b *Browser) Do(method, u string, form url.Values) (Response, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return Response{}, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		// As a browser submitting a form of the same site.
		req.Header.Set("Origin", req.URL.Scheme+"://"+req.URL.Host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.Send(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	r := Response{Status: resp.StatusCode, Body: string(raw), Header: resp.Header,
		SetCookies: resp.Header.Values("Set-Cookie"), URL: resp.Request.URL.String()}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sc := range r.SetCookies {
		c, err := http.ParseSetCookie(sc)
		if err != nil {
			return r, fmt.Errorf("flowtest: bad Set-Cookie %q from %s", sc, u)
		}
		if c.MaxAge < 0 {
			delete(b.Cookies, c.Name)
		} else {
			b.Cookies[c.Name] = c.Value
		}
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		abs, err := resp.Request.URL.Parse(loc)
		if err != nil {
			return r, err
		}
		r.Location = abs.String()
	}
	return r, nil
}

// Send sends req as it is, with the browser's cookies, and returns the
// answer without recording the cookies it sets: for tests that craft a
// request's headers themselves.
func (b *Browser) Send(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	for name, value := range b.Cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	b.mu.Unlock()
	return b.client.Do(req)
}

// Get is Do without a body.
func (b *Browser) Get(u string) (Response, error) { return b.Do(http.MethodGet, u, nil) }

// Follow is Do, then follows redirects the way a browser does (a 301, 302
// or 303 becomes a GET without a body; 307 and 308 repeat the request), up to
// ten; the Response is the last one, its URL where the browser ended.
func (b *Browser) Follow(method, u string, form url.Values) (Response, error) {
	r, err := b.Do(method, u, form)
	for range 10 {
		if err != nil || r.Location == "" {
			return r, err
		}
		switch r.Status {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
			method, form = http.MethodGet, nil
		case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return r, nil
		}
		r, err = b.Do(method, r.Location, form)
	}
	if err == nil && r.Location != "" {
		err = fmt.Errorf("flowtest: more than 10 redirects from %s", u)
	}
	return r, err
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

var offerField = regexp.MustCompile(`name="offer" value="([^"]*)"`)

// AllowForm is the answer a browser sends when the user clicks Allow on the
// consent page: its CSRF token and the digest of what the page listed. ok is
// false when page is not a consent form.
func AllowForm(page string) (form url.Values, ok bool) {
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		return nil, false
	}
	form = url.Values{"csrf_token": {m[1]}, "decision": {"allow"}}
	if o := offerField.FindStringSubmatch(page); o != nil {
		form.Set("offer", o[1])
	}
	return form, true
}

// Step names the stages of Connect, for errors.
type Step string

// The stages of Connect.
const (
	StepOpen     Step = "open connect URL"
	StepLogin    Step = "login at the identity provider"
	StepConsent  Step = "consent"
	StepProvider Step = "authorization at the provider"
	StepCallback Step = "provider callback"
)

// Error says at which step Connect stopped and what it saw.
type Error struct {
	Step   Step
	Status int
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("flowtest: %s: status %d: %.300s", e.Step, e.Status, e.Detail)
}

func fail(step Step, r Response, detail string) error {
	if detail == "" {
		detail = r.Location + " " + r.Body
	}
	return &Error{Step: step, Status: r.Status, Detail: detail}
}

// ErrNotConnected: the flow ended on a page other than "Connected".
var ErrNotConnected = errors.New("flowtest: the flow did not end connected")

// Connect walks connectURL the way a user does: signs in at the dev IdP as
// user when connectd asks (the browser may already have a session), allows
// on the consent page, lets the provider approve, and follows the callback.
// It returns nil when connectd's success page, where a completed flow
// redirects, says "Connected" (on the consent-only path too, where no
// provider is involved).
func (b *Browser) Connect(connectURL, user string) error {
	r, err := b.Get(connectURL)
	if err != nil {
		return err
	}
	if r.Status == http.StatusFound && strings.Contains(r.Location, "/login?") {
		if err := b.login(r.Location, user); err != nil {
			return err
		}
		if r, err = b.Get(connectURL); err != nil {
			return err
		}
	}
	if r.Status != http.StatusOK {
		return fail(StepOpen, r, "")
	}
	form, ok := AllowForm(r.Body)
	if !ok {
		return fail(StepConsent, r, "no consent form")
	}
	r, err = b.Do(http.MethodPost, connectURL, form)
	if err != nil {
		return err
	}
	if r.Status == http.StatusSeeOther && sameHost(r.Location, connectURL) {
		// Consent only: nothing to ask the provider; the answer is the
		// link's success page.
		return b.successPage(r)
	}
	if r.Status != http.StatusSeeOther {
		return fail(StepConsent, r, "")
	}
	back, err := b.Get(r.Location) // the fake provider approves at once
	if err != nil {
		return err
	}
	if back.Status != http.StatusFound || !strings.Contains(back.Location, "/oauth/callback?") {
		return fail(StepProvider, back, "")
	}
	done, err := b.Get(back.Location)
	if err != nil {
		return err
	}
	if done.Status != http.StatusSeeOther {
		return fail(StepCallback, done, "")
	}
	return b.successPage(done)
}

// successPage follows r, a completed flow's redirect to the link's success
// page, and checks that page says "Connected".
func (b *Browser) successPage(r Response) error {
	page, err := b.Get(r.Location)
	if err != nil {
		return err
	}
	if page.Status != http.StatusOK {
		return fail(StepCallback, page, "")
	}
	return connected(page)
}

// sameHost reports whether URLs a and b name the same host.
func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}

func connected(r Response) error {
	if !strings.Contains(r.Body, "Connected") {
		return fmt.Errorf("%w: %.300s", ErrNotConnected, r.Body)
	}
	return nil
}

// login follows connectd's /login redirect to the dev IdP, answers its user
// picker as user, and follows the callback back to connectd.
func (b *Browser) login(loginURL, user string) error {
	r, err := b.Get(loginURL)
	if err != nil {
		return err
	}
	if r.Status != http.StatusFound {
		return fail(StepLogin, r, "")
	}
	authorize := r.Location
	if r, err = b.Get(authorize); err != nil { // the picker page
		return err
	}
	if r.Status != http.StatusOK {
		return fail(StepLogin, r, "")
	}
	u, err := url.Parse(authorize)
	if err != nil {
		return err
	}
	form := u.Query() // the picker's hidden fields carry exactly these
	form.Set("user", user)
	u.RawQuery = ""
	if r, err = b.Do(http.MethodPost, u.String(), form); err != nil {
		return err
	}
	if r.Status != http.StatusSeeOther || !strings.Contains(r.Location, "/login/callback?") {
		return fail(StepLogin, r, "")
	}
	if r, err = b.Get(r.Location); err != nil {
		return err
	}
	if r.Status != http.StatusSeeOther {
		return fail(StepLogin, r, "")
	}
	return nil
}
