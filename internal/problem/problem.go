// Package problem gives the packages below the HTTP layer (webhook, the
// admin store, vault...) a way to say what kind of failure an error is and
// the words a caller may be shown about it, without choosing a status: the
// one error table (internal/web's codes.go) maps each kind to a status and a
// stable code and takes the description from here. No handler reads an
// error's text to build an answer. It is a leaf.
package problem

import (
	"errors"
	"fmt"
)

// The kinds every package may use. A package's own sentinel wraps one
// (var ErrInvalid = fmt.Errorf("webhook: %w", problem.ErrInvalid)), so that
// errors.Is answers both.
var (
	// ErrInvalid: the caller sent a malformed argument (400 invalid_request).
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound: no such resource, or not one the caller may see (404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request conflicts with what exists (409 conflict).
	ErrConflict = errors.New("conflict")
)

// detailed is an error of a kind with a description safe to show.
type detailed struct {
	kind error
	desc string
	errs []error // error arguments of the description, for errors.Is/As
}

func (d *detailed) Error() string { return d.kind.Error() + ": " + d.desc }

func (d *detailed) Unwrap() []error { return append([]error{d.kind}, d.errs...) }

// Detail returns an error that is kind (and every error among args) whose
// description for the caller is fmt.Sprintf(format, args...). The
// description must carry no secret: at most an id, a name or a rule the
// caller sent or may know.
func Detail(kind error, format string, args ...any) error {
	d := &detailed{kind: kind, desc: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok {
			d.errs = append(d.errs, e)
		}
	}
	return d
}

// Description is the outermost description Detail gave err, if any.
func Description(err error) (string, bool) {
	var d *detailed
	if errors.As(err, &d) {
		return d.desc, true
	}
	return "", false
}

// subject is an error about one named thing.
type subject struct {
	name string
	err  error
}

func (s *subject) Error() string { return s.err.Error() }
func (s *subject) Unwrap() error { return s.err }

// About marks err as being about name (a provider the caller named, say),
// for descriptions that name it ("the github connection must be authorized
// again"). Nil stays nil.
func About(name string, err error) error {
	if err == nil {
		return nil
	}
	return &subject{name: name, err: err}
}

// Subject is the name About gave err, if any.
func Subject(err error) (string, bool) {
	var s *subject
	if errors.As(err, &s) {
		return s.name, true
	}
	return "", false
}
