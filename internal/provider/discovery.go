package provider

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/connectd/connectd/internal/egress"
)

// discover fetches issuer's metadata (egress.Discover: RFC 8414, then OIDC,
// the document naming exactly that issuer) and checks the endpoints a
// provider needs: authorization and token endpoints present, and every
// endpoint passing the same URL rule as the providers file.
func discover(ctx context.Context, client *http.Client, issuer string, dev bool) (*egress.Metadata, error) {
	md, err := egress.Discover(ctx, client, issuer)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, v string }{
		{"authorization_endpoint", md.AuthorizationEndpoint},
		{"token_endpoint", md.TokenEndpoint},
		{"revocation_endpoint", md.RevocationEndpoint},
	} {
		if f.v == "" {
			if f.name != "revocation_endpoint" {
				return nil, fmt.Errorf("metadata of %s has no %s", issuer, f.name)
			}
			continue
		}
		if err := egress.CheckURL(f.v, dev); err != nil {
			return nil, fmt.Errorf("metadata of %s: %s %w", issuer, f.name, err)
		}
	}
	if err := checkAuthorizeQuery(md.AuthorizationEndpoint); err != nil {
		return nil, fmt.Errorf("metadata of %s: authorization_endpoint %w", issuer, err)
	}
	return md, nil
}

// discoveredSelectAccount is what a discovered provider is sent to let the
// user choose another account, unless its entry says otherwise: OpenID
// Connect Core 1.0 §3.1.2.1 prompt=select_account ("the Authorization
// Server SHOULD prompt the End-User to select a user account"). A plain
// OAuth server that does not know it ignores it (RFC 6749 §3.1); one that
// refuses it is configured with select_account_params {"prompt": ""}.
func discoveredSelectAccount() map[string]string {
	return map[string]string{"prompt": "select_account"}
}

// applyMetadata fills what the providers file left open: endpoints, client
// authentication (Basic unless only post is offered;
// RFC 8414's default is Basic) and the RFC 9207 flag.
func applyMetadata(s *Spec, md *egress.Metadata) {
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
