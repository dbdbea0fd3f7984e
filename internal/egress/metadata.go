package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Metadata is the part of an authorization server's metadata (RFC 8414, or
// an OpenID Connect discovery document, which shares these fields) that
// connectd uses. Discover fills it.
type Metadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	JWKSURI                                    string   `json:"jwks_uri"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
}

// MetadataURLs lists where the metadata of issuer may live, in the order
// Discover tries them:
//
//  1. RFC 8414 §3.1: /.well-known/oauth-authorization-server inserted before
//     the issuer's path;
//  2. OpenID Connect Discovery 1.0 §4: /.well-known/openid-configuration
//     appended to the issuer.
//
// RFC 8414 comes first because it is the document OAuth servers (the
// third-party providers and MCP authorization servers alike) are specified
// to publish, and the MCP authorization spec asks for it first; OIDC-only
// servers are found by the second URL.
func MetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, errors.New("issuer is not a valid URL")
	}
	path := strings.TrimRight(u.Path, "/")
	rfc8414 := *u
	rfc8414.Path, rfc8414.RawPath = "/.well-known/oauth-authorization-server"+path, ""
	oidc := *u
	oidc.Path, oidc.RawPath = path+"/.well-known/openid-configuration", ""
	return []string{rfc8414.String(), oidc.String()}, nil
}

// Discover fetches the metadata of issuer with client, trying the
// MetadataURLs in order: the next one is tried when a URL yields no metadata
// document (no answer, a status other than 200, or not a JSON object). The
// first document found must name exactly issuer (RFC 8414 §3.3, OIDC
// Discovery §4.3): one naming another issuer is refused at once, without
// trying further (mix-up defence). Checking the endpoints a caller needs is
// the caller's business (CheckURL). The error names the URLs tried, never a
// response body.
func Discover(ctx context.Context, client *http.Client, issuer string) (*Metadata, error) {
	urls, err := MetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	var failed error
	for _, u := range urls {
		md, err := fetchMetadata(ctx, client, u)
		if err != nil {
			if failed == nil {
				failed = err
			} else {
				failed = fmt.Errorf("%w; %w", failed, err) // one line, unlike errors.Join
			}
			continue
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("metadata at %s names another issuer (%q, want %q)", u, md.Issuer, issuer)
		}
		return md, nil
	}
	return nil, failed
}

func fetchMetadata(ctx context.Context, client *http.Client, u string) (*Metadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	var md Metadata
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("GET %s: %w", u, err)
		}
		return nil, fmt.Errorf("GET %s: not a metadata document", u)
	}
	return &md, nil
}
