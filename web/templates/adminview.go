package templates

import "net/url"

// withOrg is an admin page's path for the acting organization org (""
// none): the ?org= every admin link carries (docs/admin.md).
func withOrg(path, org string) string {
	if org == "" {
		return path
	}
	return path + "?" + url.Values{"org": {org}}.Encode()
}

// shortID is a long id's first 12 characters and an ellipsis (the whole id
// is the element's title): request ids are 32 hex digits, enough to find in
// the logs by their start.
func shortID(id string) string {
	if len(id) <= 16 {
		return id
	}
	return id[:12] + "…"
}
