package clientauth

import (
	"errors"

	"github.com/connectd/connectd/internal/jose"
)

// Client-key errors.
var (
	// ErrMissingClientKey means the request had no Bearer client key.
	ErrMissingClientKey = errors.New("clientauth: no client key")
	// ErrInvalidClientKey means the key is malformed, unknown or past its overlap.
	ErrInvalidClientKey = errors.New("clientauth: invalid client key")
	// ErrSwappedHeaders means Authorization carried a JWT and the user
	// token header a client key: the two headers were swapped (issue 38
	// item 6). Neither was used.
	ErrSwappedHeaders = errors.New("clientauth: the client key and the user token are in each other's header")
	// ErrClientDisabled means the key is valid but its client is disabled.
	ErrClientDisabled = errors.New("clientauth: client disabled")
	// ErrClientNotFound means no client has the given id.
	ErrClientNotFound = errors.New("clientauth: no such client")
	// ErrInvalidClient means a client's registration data is not acceptable.
	ErrInvalidClient = errors.New("clientauth: invalid client registration")
)

// ErrIssuerUnavailable means a client's JWKS URL could not be fetched, or its
// keys may no longer verify, so an assertion or DPoP proof could be neither
// accepted nor refused: a 503, never a 401 (jose.ErrUnavailable, the one
// JWKS cache's, as mcpauth's for issuers).
var ErrIssuerUnavailable = jose.ErrUnavailable
