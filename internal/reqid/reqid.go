// Package reqid carries a request's id in its context: package web puts it
// there for every request, and anything below (the vault's audit rows, log
// lines) reads it without importing the HTTP layer.
//
// It must never import another connectd package.
package reqid

import "context"

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context { return context.WithValue(ctx, key{}, id) }

// From returns the request id ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}
