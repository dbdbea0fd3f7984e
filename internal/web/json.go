package web

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// MaxJSONBody is the default cap on JSON request bodies.
const MaxJSONBody = 64 << 10

// DecodeJSON reads exactly one JSON object from r's body into v: at most max
// bytes (MaxJSONBody when max ≤ 0), Content-Type application/json, no unknown
// fields, nothing after the value. Failures are *Error values: 415
// unsupported_media_type, 413 request_too_large, 400 invalid_request.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any, max int64) error {
	if max <= 0 {
		max = MaxJSONBody
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			return Errorf(http.StatusRequestEntityTooLarge, "request_too_large", "the body is larger than %d bytes", max)
		case errors.Is(err, io.EOF):
			return Errorf(http.StatusBadRequest, "invalid_request", "the body is empty")
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return Errorf(http.StatusBadRequest, "invalid_request", "the body is not valid JSON")
		case errors.As(err, &typ):
			return Errorf(http.StatusBadRequest, "invalid_request", "field %q has the wrong type", typ.Field)
		default:
			// Unknown fields and other decoder complaints; the message names the field, never a value.
			return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "the body does not match the expected object: " + strings.TrimPrefix(err.Error(), "json: "), Err: err}
		}
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "invalid_request", "the body must hold exactly one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Errorf(http.StatusBadRequest, "invalid_request", "the body must hold exactly one JSON value")
	}
	return nil
}
