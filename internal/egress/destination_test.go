package egress_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"code.dny.dev/ssrf"

	"github.com/connectd/connectd/internal/egress"
)

// TestCheckDestination: what a client refuses of a URL without resolving a
// name, CheckDestination refuses too, with the same error — checked against
// the client's own refusal of the same URL, over real sockets — and it
// accepts names (checked at each dial), public addresses and allow-listed
// loopback host:ports.
func TestCheckDestination(t *testing.T) {
	t.Parallel()
	ln := listenCounter(t, "127.0.0.1:0")
	allowed := ln.ln.Addr().String()
	p := ln.port()
	c := newClient(t, egress.Config{AllowHosts: []string{allowed, "10.0.0.5:80", "dev.test:8080"}})

	for _, tt := range []struct {
		url  string
		want error
	}{
		{"https://10.0.0.1/", egress.ErrBlockedAddress},
		{"https://169.254.169.254/latest/meta-data/", egress.ErrBlockedAddress},
		{"https://100.64.0.1/", egress.ErrBlockedAddress},
		{"https://127.0.0.1/", egress.ErrBlockedAddress},
		{"https://127.0.0.2:" + p + "/", egress.ErrBlockedAddress},
		{"https://0.0.0.0:" + p + "/", egress.ErrBlockedAddress},
		{"https://[::1]/", egress.ErrBlockedAddress},
		{"https://[::]/", egress.ErrBlockedAddress},
		{"https://[::ffff:127.0.0.1]:" + p + "/", egress.ErrBlockedAddress},
		{"https://[::ffff:169.254.169.254]/", egress.ErrBlockedAddress},
		{"https://[fe80::1%25lo]/", egress.ErrBlockedAddress},
		{"https://[fd00::1]/", egress.ErrBlockedAddress},
		{"https://[64:ff9b::7f00:1]/", egress.ErrBlockedAddress},
		{"https://224.0.0.1/", egress.ErrBlockedAddress},
		{"http://10.0.0.5/", egress.ErrBlockedAddress}, // allow-listed, still private
		{"http://example.com/", egress.ErrInsecureScheme},
		{"http://dev.test:8081/", egress.ErrInsecureScheme},
		{"http://169.254.169.254/", egress.ErrInsecureScheme},
		{"ftp://example.com/", egress.ErrInsecureScheme},
	} {
		t.Run(tt.url, func(t *testing.T) {
			_, _, dialErr := get(c, tt.url)
			if !errors.Is(dialErr, tt.want) {
				t.Fatalf("the client: %v, want %v", dialErr, tt.want)
			}
			err := egress.CheckDestination(c, tt.url)
			if !errors.Is(err, tt.want) {
				t.Fatalf("CheckDestination: %v, want %v", err, tt.want)
			}
			if tt.want == egress.ErrBlockedAddress && !errors.Is(err, ssrf.ErrProhibitedIP) {
				t.Fatalf("CheckDestination: %v is not the guard's verdict", err)
			}
			if strings.Contains(err.Error(), "egress:") || strings.Contains(err.Error(), tt.url) {
				t.Fatalf("message %q does not read after a field's name", err)
			}
		})
	}
	ln.assertUntouched(t)

	// No dial from here on: a client without the tests' tripwire, which
	// would refuse the public addresses the guard allows.
	c, err := egress.New(egress.Config{AllowHosts: []string{allowed, "10.0.0.5:80", "dev.test:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		url  string
		want error // nil: accepted
	}{
		// Refused by CheckDestination only: the dial sees the mapped
		// address as IPv4, but an IPv4-mapped spelling is a trick.
		{"https://[::ffff:8.8.8.8]/", egress.ErrBlockedAddress},
		// Neither an address nor a DNS name; to some resolvers 127.0.0.1.
		{"https://2130706433/", egress.ErrBlockedAddress},
		{"https://0x7f000001/", egress.ErrBlockedAddress},
		{"https://0X7F.1/", egress.ErrBlockedAddress},
		{"https://0177.0.0.1/", egress.ErrBlockedAddress},
		{"https://127.1/", egress.ErrBlockedAddress},
		{"https://10.0.0.1./", egress.ErrBlockedAddress},
		{"https://example.com:0/", egress.ErrBlockedAddress},
		{"https://example.com:65536/", egress.ErrBlockedAddress},
		{"https://example.com/", nil},
		{"https://example.com./", nil},
		{"https://1.example.com:8443/", nil},
		{"https://0x.example/", nil},
		{"https://localhost/", nil}, // a name: refused at the dial, as it resolves to loopback
		{"https://8.8.8.8/", nil},
		{"https://[2606:4700:4700::1111]:8443/", nil},
		{"https://" + allowed + "/", nil},
		{"http://" + allowed + "/", nil},
		{"http://dev.test:8080/", nil},
		{"http://DEV.test:8080/", nil},
	} {
		t.Run(tt.url, func(t *testing.T) {
			err := egress.CheckDestination(c, tt.url)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("%v, want %v", err, tt.want)
			}
		})
	}
}

// TestCheckDestinationDialOverride: an allow-listed host:port dialed
// elsewhere is judged by where it is dialed.
func TestCheckDestinationDialOverride(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		to   string
		want error
	}{
		{"127.0.0.1:9", nil},
		{"10.0.0.1:443", egress.ErrBlockedAddress},
	} {
		c, err := egress.New(egress.Config{AllowHosts: []string{"127.0.0.1:8080"},
			DialOverride: map[string]string{"127.0.0.1:8080": tt.to}})
		if err != nil {
			t.Fatal(err)
		}
		if err := egress.CheckDestination(c, "http://127.0.0.1:8080/"); !errors.Is(err, tt.want) {
			t.Errorf("dialed at %s: %v, want %v", tt.to, err, tt.want)
		}
	}
}

// TestCheckDestinationOtherClients: a client whose Transport is not New's
// has no guard to ask, so nothing is refused (it would dial anything).
func TestCheckDestinationOtherClients(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	for i, c := range []*http.Client{nil, http.DefaultClient, srv.Client(),
		egress.Bound(srv.Client(), egress.Limits{})} {
		if err := egress.CheckDestination(c, "https://10.0.0.1/"); err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
}
