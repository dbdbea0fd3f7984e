package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// The proxy's in-run bound (issue 35): a bare reverse proxy of the
// standard library in front of the same upstream, driven by the same load
// generator at every level. It checks a static key in constant time and
// injects the bearer header, nothing else: what any reverse proxy costs on
// this machine, against which connectd's proxy is judged.

// bareKey is the key the bare proxy's callers send (Authorization: Bearer …).
const bareKey = "bench-bare-proxy-key"

// bareServer is `connectd-bench bareproxy UPSTREAM`: the bare reverse
// proxy, a process of its own (its CPU is its own, as the upstream's is).
func bareServer(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: connectd-bench bareproxy UPSTREAM-URL")
	}
	u, err := url.Parse(args[0])
	if err != nil {
		return err
	}
	return serveReported(ctx, stdout, bareProxy(u, bareKey))
}

// bareProxy forwards every request with "Authorization: Bearer key" to
// upstream, its Authorization replaced by a seeded access token's shape;
// any other request is 401. Its transport keeps as many idle connections
// per host as connectd's proxy client (256).
func bareProxy(upstream *url.URL, key string) http.Handler {
	want := []byte("Bearer " + key)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Header.Set("Authorization", "Bearer "+benchAccessToken(0))
		},
		Transport: t,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// bare is the 1 KB GET through the bare reverse proxy.
func (l *load) bare(c apiCall) request {
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.bareBase+"/"+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+bareKey)
		return l.drain(req, c.size)
	}
}
