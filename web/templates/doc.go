// Package templates holds connectd's templ components and the static assets they
// use. Components take small view-model structs, never database rows or
// *http.Request, and never receive a secret to display. Pages work without
// JavaScript; no inline script or style is used, so the CSP can forbid both.
package templates

import "embed"

// Static holds the stylesheet and other assets served under /static/.
//
//go:embed static
var Static embed.FS
