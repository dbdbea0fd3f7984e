package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Metadata is the part of RFC 8414 authorization server metadata (or an
// OpenID Connect discovery document) connectd uses.
type Metadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
}

// metadataURLs lists where an issuer's metadata may live: RFC 8414 §3.1
// (well-known segment inserted before the issuer's path), then OpenID Connect
// Discovery (appended).
func metadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	path := strings.TrimRight(u.Path, "/")
	rfc8414 := *u
	rfc8414.Path = "/.well-known/oauth-authorization-server" + path
	oidc := *u
	oidc.Path = path + "/.well-known/openid-configuration"
	return []string{rfc8414.String(), oidc.String()}, nil
}

// Discover fetches and checks the metadata of issuer: the document must name
// exactly that issuer (RFC 8414 §3.3) and its endpoints must pass the same URL
// rules as the providers file.
func Discover(ctx context.Context, client *http.Client, issuer string, dev bool) (*Metadata, error) {
	urls, err := metadataURLs(issuer)
	if err != nil {
		return nil, errors.New("issuer is not a valid URL")
	}
	var errs []error
	for _, u := range urls {
		md, err := fetchMetadata(ctx, client, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("metadata at %s names another issuer", u)
		}
		for _, f := range []struct{ name, v string }{
			{"authorization_endpoint", md.AuthorizationEndpoint},
			{"token_endpoint", md.TokenEndpoint},
			{"revocation_endpoint", md.RevocationEndpoint},
		} {
			if f.v == "" {
				if f.name != "revocation_endpoint" {
					return nil, fmt.Errorf("metadata at %s has no %s", u, f.name)
				}
				continue
			}
			if err := checkURL(f.v, dev); err != nil {
				return nil, fmt.Errorf("metadata at %s: %s %w", u, f.name, err)
			}
		}
		if err := checkAuthorizeQuery(md.AuthorizationEndpoint); err != nil {
			return nil, fmt.Errorf("metadata at %s: authorization_endpoint %w", u, err)
		}
		return md, nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return nil, errors.New(strings.Join(msgs, "; "))
}

func fetchMetadata(ctx context.Context, client *http.Client, u string) (*Metadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	var md Metadata
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		return nil, fmt.Errorf("GET %s: not a metadata document", u)
	}
	return &md, nil
}

// applyMetadata fills what the providers file left open: endpoints, client
// authentication (Basic unless only post is offered;
// RFC 8414's default is Basic) and the RFC 9207 flag.
func applyMetadata(s *Spec, md *Metadata) {
	if s.AuthorizeURL == "" {
		s.AuthorizeURL = md.AuthorizationEndpoint
	}
	if s.TokenURL == "" {
		s.TokenURL = md.TokenEndpoint
	}
	if s.RevocationURL == "" && md.RevocationEndpoint != "" {
		s.RevocationURL = md.RevocationEndpoint
		if s.Revocation == RevokeNone {
			s.Revocation = RevokeRFC7009
		}
	}
	if s.AuthStyle == "" {
		s.AuthStyle = AuthBasic
		m := md.TokenEndpointAuthMethodsSupported
		if len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post") {
			s.AuthStyle = AuthParams
		}
	}
	if md.AuthorizationResponseIssParameterSupported {
		s.IssParameterSupported = true
	}
}
