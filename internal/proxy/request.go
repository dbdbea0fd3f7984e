package proxy

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// What of a caller's request may reach the provider: the methods, the path,
// the headers. The rule is that a provider acts on exactly the method and
// path connectd checked (the operator's request rules among them): nothing
// a provider might honour instead — a method-override header, a rewritten
// URL, a ";" path parameter that Tomcat and Spring strip before resolving
// "..", an encoding that decodes to another path — crosses; and nothing that
// says who the caller is, or was for a proxy in front of it, does either.

// Methods are the methods the proxy forwards, as documented (docs/api.md):
// any other (TRACE, TRACK, CONNECT, OPTIONS, an unknown or lower-case one)
// is ErrMethod before a credential is attached. A TRACE that an API echoes
// would hand the caller the credential.
var Methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete}

// Allow is the Allow header of a refused method.
var Allow = strings.Join(Methods, ", ")

// Check refuses what of r the proxy never forwards, before anything is
// looked up: a method outside Methods (ErrMethod, method names are
// case-sensitive), a method-override or URL-rewrite header, or a query
// parameter that overrides the method (ErrOverride). A form body's
// override fields are Forward's to refuse (it reads the body).
func Check(r *http.Request) error {
	if !slices.Contains(Methods, r.Method) {
		return fmt.Errorf("%w: %q", ErrMethod, r.Method)
	}
	for k := range r.Header {
		if overrideHeader(k) {
			return fmt.Errorf("%w: header %s", ErrOverride, k)
		}
	}
	if k, ok := overrideField(r.URL.RawQuery); ok {
		return fmt.Errorf("%w: query parameter %q", ErrOverride, k)
	}
	return nil
}

// overrideHeader reports whether header k asks a server or a proxy in
// front of it to act on another method or URL than the request line's:
// X-HTTP-Method-Override, X-Method-Override, X-HTTP-Method,
// X-Original-Method and every name holding "method"; X-Original-URL,
// X-Rewrite-URL and the families they belong to (X-Original-*,
// X-Rewrite-*, X-Override-*, X-Envoy-Original-*).
//
// "_" counts as "-" (X_Original_URL is X-Original-URL): CGI-style servers
// (PHP-FPM, WSGI, Rack) map both to the same HTTP_X_ORIGINAL_URL.
func overrideHeader(k string) bool {
	k = strings.ReplaceAll(strings.ToLower(k), "_", "-")
	return strings.Contains(k, "method") || strings.HasPrefix(k, "x-original-") ||
		strings.HasPrefix(k, "x-rewrite-") || strings.HasPrefix(k, "x-override-") ||
		strings.HasPrefix(k, "x-envoy-original-")
}

// overrideField finds, in a query or a form-encoded body, a field that
// frameworks read as the method (Rails, Laravel, Symfony, Express'
// method-override: "_method"; "X-HTTP-Method-Override" as a parameter):
// a name, decoded and lower-cased, that starts with "_", "$" or "x-" and
// holds "method", or that holds "method-override" or "method_override".
// Pairs are split on "&" and ";" alike: some servers split on either.
func overrideField(raw string) (string, bool) {
	for raw != "" {
		var pair string
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			pair, raw = raw, ""
		}
		k, _, _ := strings.Cut(pair, "=")
		if d, err := url.QueryUnescape(k); err == nil {
			k = d
		}
		l := strings.ToLower(strings.TrimSpace(k))
		if strings.Contains(l, "method") && (strings.HasPrefix(l, "_") || strings.HasPrefix(l, "$") ||
			strings.HasPrefix(l, "x-")) || strings.Contains(l, "method-override") || strings.Contains(l, "method_override") {
			return k, true
		}
	}
	return "", false
}

// A body's kind, as frameworks read it (bodyForm).
type formKind int

const (
	notForm       formKind = iota
	urlencoded             // application/x-www-form-urlencoded, or no Content-Type
	multipartForm          // multipart/form-data
)

// bodyForm reports whether a request body of content type ct is one whose
// fields frameworks read: application/x-www-form-urlencoded, or a body
// without a Content-Type (Rack reads it as a form: urlencoded), or
// multipart/form-data (Rack, and PHP's $_POST for Laravel and Symfony).
func bodyForm(ct string) formKind {
	if strings.TrimSpace(ct) == "" {
		return urlencoded
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(ct, ";")
	}
	switch mt = strings.ToLower(strings.TrimSpace(mt)); mt {
	case "application/x-www-form-urlencoded":
		return urlencoded
	case "multipart/form-data":
		return multipartForm
	}
	return notForm
}

// multipartOverride refuses (ErrOverride) multipart/form-data body b, of
// content type ct, holding a part whose name (Content-Disposition's name,
// whatever the disposition) is an override field (overrideField's rule),
// or that does not parse: no boundary, a part without a Content-Disposition
// that parses, a broken part or no closing boundary.
func multipartOverride(b []byte, ct string) error {
	_, params, err := mime.ParseMediaType(ct)
	if err != nil || params["boundary"] == "" {
		return fmt.Errorf("%w: a multipart body without a boundary", ErrOverride)
	}
	mr := multipart.NewReader(bytes.NewReader(b), params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: a multipart body that does not parse", ErrOverride)
		}
		_, dp, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		if err != nil {
			return fmt.Errorf("%w: a multipart part without a Content-Disposition", ErrOverride)
		}
		if k, ok := overrideField(dp["name"]); ok {
			return fmt.Errorf("%w: multipart field %q", ErrOverride, k)
		}
		if _, err := io.Copy(io.Discard, p); err != nil {
			return fmt.Errorf("%w: a multipart body that does not parse", ErrOverride)
		}
	}
}

// Clean is the path rule: p, the caller's path below the API base as sent
// (escaped), is refused (ErrPath) unless it is a plain relative path, and
// is answered in the one form the rules match and the provider receives
// (RFC 3986 §6.2.2: escapes of unreserved characters decoded, every other
// escape's hex upper-cased). Refused: an empty p, an empty segment (so a
// leading, trailing or doubled "/"), a "." or ".." segment in any encoding
// ("%2e", "%2E", ".%2e"), a ";" anywhere (raw or "%3B": a path parameter,
// which Tomcat and Spring strip, so that "..;" is ".." to them), a
// backslash or a control character (raw or escaped), an escaped "/" that
// would separate an empty, "." or ".." part, an escape that is not one, a
// character a path cannot hold unescaped ("?", "#", space...), and, once
// decoded, what decodes a second time to "%2e", "%2f", "%5c", "%3b" or
// "%00" (a server that decodes twice must not find them either).
func Clean(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: no path", ErrPath)
	}
	if plain(p) {
		return p, nil // already in the one form: nothing to decode or upper-case
	}
	return cleanAll(p)
}

// cleanAll is Clean's whole rule, segment by segment.
func cleanAll(p string) (string, error) {
	var b strings.Builder
	b.Grow(len(p))
	for i, seg := range strings.Split(p, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if err := cleanSegment(&b, seg); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// plain reports whether p is a path Clean answers as it is, without a copy
// (most calls): no escape at all, only characters cleanSegment keeps
// unchanged, and no empty, "." or ".." segment. Anything else takes the
// whole rule.
func plain(p string) bool {
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
				return false
			}
			start = i + 1
			continue
		}
		if c := p[i]; !unreserved(c) && strings.IndexByte("!$&'()*+,=:@", c) < 0 {
			return false
		}
	}
	return true
}

// cleanSegment writes seg, one segment of an escaped path, normalized to b,
// or refuses it (Clean).
func cleanSegment(b *strings.Builder, seg string) error {
	decoded := make([]byte, 0, len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
				return fmt.Errorf("%w: a bad escape", ErrPath)
			}
			d := unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 2
			decoded = append(decoded, d)
			if unreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteString(fmt.Sprintf("%%%02X", d))
			}
		case unreserved(c) || strings.IndexByte("!$&'()*+,=:@", c) >= 0:
			decoded = append(decoded, c)
			b.WriteByte(c)
		default: // ';', '\\', '?', '#', space, a control or a non-ASCII byte unescaped
			return fmt.Errorf("%w: %q is not a path character here", ErrPath, c)
		}
	}
	d := string(decoded)
	for _, c := range []byte(d) {
		if c == ';' || c == '\\' || c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: a segment holds %q", ErrPath, c)
		}
	}
	// An escaped slash stays one (GitLab's project ids), but what it
	// separates follows the same rule: a provider that decodes it must not
	// find an empty, "." or ".." segment there.
	for _, part := range strings.Split(d, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%w: an empty, \".\" or \"..\" segment", ErrPath)
		}
	}
	l := strings.ToLower(d)
	for _, twice := range []string{"%2e", "%2f", "%5c", "%3b", "%00"} {
		if strings.Contains(l, twice) {
			return fmt.Errorf("%w: a segment decodes twice to %s", ErrPath, twice)
		}
	}
	return nil
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' ||
		c == '~'
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// requestDrop are request headers never forwarded, by name: the caller's
// own credentials and cookies, hop-by-hop ones (httputil.ReverseProxy
// removes those it knows, and those Connection names, too), who the caller
// is or where it came from, and the browser's origin headers.
var requestDrop = []string{"Authorization", "Proxy-Authorization", "Cookie", "Forwarded", "Via", "X-Real-Ip",
	"X-Client-Ip", "True-Client-Ip", "X-Cluster-Client-Ip", "Client-Ip", "X-Originating-Ip", "X-Remote-Ip",
	"X-Remote-Addr", "X-Host", "X-Request-Id", "Origin", "Referer", "Connection", "Keep-Alive", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host"}

// requestDropPrefixes are request header families never forwarded:
// forwarding headers (X-Forwarded-For, -Host, -Proto, -Server, -User,
// -Email...), a CDN's or edge proxy's (Cloudflare's CF-Connecting-IP,
// Fastly-Client-IP, Envoy's, AWS's), and connectd's own (Connectd-*: the
// account and scopes headers, and any other a caller invents).
var requestDropPrefixes = []string{"X-Forwarded-", "Connectd-", "Cf-", "Fastly-", "X-Envoy-", "X-Amzn-"}

// dropRequest reports whether request header k stays behind. "_" counts
// as "-" (X_Forwarded_For is X-Forwarded-For, Cf_Connecting_Ip is
// CF-Connecting-IP): CGI-style servers (PHP-FPM, WSGI, Rack) map both to
// the same HTTP_X_FORWARDED_FOR.
func dropRequest(k string) bool {
	k = headerName(k)
	if slices.Contains(requestDrop, k) {
		return true
	}
	for _, p := range requestDropPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// headerName is header k as CGI-style servers (PHP-FPM, WSGI, Rack) read
// it, "_" as "-", in canonical form: X_forwarded_for is X-Forwarded-For.
func headerName(k string) string { return http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-")) }

// sameHeader reports whether headers a and b are one to such a server.
func sameHeader(a, b string) bool { return headerName(a) == headerName(b) }
