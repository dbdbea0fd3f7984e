package refusal

import "errors"

// Admin roles (package admin): an organization's admin whose role there is
// below the least one a route needs. The same answer whatever the request
// names, so it tells nothing about another organization's objects.
var ErrRoleInsufficient = errors.New("admin role insufficient")
