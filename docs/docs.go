// Package docs holds connectd's documentation. Its Go side is small: the
// OpenAPI description, embedded so tests can hold the API to it
// (internal/openapitest), and the tests that keep docs/security.md true.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml, the description of the /v1 API.
//
//go:embed openapi.yaml
var OpenAPI []byte
