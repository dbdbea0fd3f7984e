package mcpauth

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// maxResponseBytes caps every body connectd reads from an issuer (discovery,
// JWKS, token responses): enough for any real document, small enough that a
// hostile or broken server cannot exhaust memory.
const maxResponseBytes = 1 << 20

var errResponseTooLarge = errors.New("mcpauth: response body exceeds 1 MiB")

// outboundClient returns a copy of c (or of a default client with a timeout)
// that never follows redirects and caps response bodies. The transport of c is
// kept, so a caller-supplied SSRF guard stays in force.
func outboundClient(c *http.Client, timeout time.Duration) *http.Client {
	if c == nil {
		c = &http.Client{Timeout: timeout}
	}
	cp := *c
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = limitTransport{base: base}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponseBytes}
	return resp, nil
}

// limitedBody fails a read that goes past left bytes, rather than silently
// truncating (a truncated JSON document must not parse as something else).
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errResponseTooLarge
	}
	return n, err
}
