package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/connectd/connectd/internal/jsontext"
)

// MaxJSONBody is the default cap on JSON request bodies.
const MaxJSONBody = 64 << 10

// maxJSONDepth bounds the nesting of a request body; no request needs more.
const maxJSONDepth = 32

// DecodeJSON reads exactly one JSON object from r's body into v: at most max
// bytes (MaxJSONBody when max ≤ 0), Content-Type application/json, no unknown
// fields, nothing after the value. Stricter than encoding/json alone, member
// names must match a field's JSON name exactly (encoding/json would take
// "PROVIDER" for "provider") and may not repeat (it would keep the last of
// two "provider" members), so that connectd and anything else that reads the
// same body cannot disagree about what it says; and the body must be UTF-8
// (RFC 8259), not have invalid bytes silently replaced. Failures are *Error values:
// 415 unsupported_media_type, 413 request_too_large, 400 invalid_request.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any, max int64) error {
	if max <= 0 {
		max = MaxJSONBody
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return Errorf(http.StatusRequestEntityTooLarge, "request_too_large", "the body is larger than %d bytes", max)
		}
		return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "the body could not be read", Err: err}
	}
	return DecodeJSONBytes(body, v)
}

// DecodeJSONBytes is DecodeJSON's check of a body already read.
func DecodeJSONBytes(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(http.StatusBadRequest, "invalid_request", "the body is empty")
	}
	if !utf8.Valid(body) || !json.Valid(body) {
		return Errorf(http.StatusBadRequest, "invalid_request", "the body is not valid JSON, or holds more than one value")
	}
	if jsontext.LoneSurrogate(body) {
		// \udc00 would decode to U+FFFD: another string than the one sent.
		return Errorf(http.StatusBadRequest, "invalid_request", "the body holds an escaped lone surrogate (\\uD800-\\uDFFF), which is not text")
	}
	if err := checkMembers(body, fieldNames(v)); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return Errorf(http.StatusBadRequest, "invalid_request", "field %s has the wrong type", quoteName(typ.Field))
		}
		// Other decoder complaints; the message names a field, never a value.
		return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Err: err,
			Description: "the body does not match the expected object: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	return nil
}

// fieldNames returns the exact JSON member names v (a pointer to a struct)
// accepts at the top level, or nil when v is anything else (then only
// duplicates are checked).
func fieldNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			names[name] = true
		}
	}
	walk(t)
	return names
}

// checkMembers walks a valid JSON document and refuses a top-level object
// member not named exactly as in names (when names is not nil), a member that
// appears twice in any object, a top-level value that is not an object, and
// nesting deeper than maxJSONDepth.
func checkMembers(body []byte, names map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return errors.New("the body is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("the body must be a JSON object")
	}
	return walkObject(dec, names, 1)
}

// walkObject reads the members of an object whose '{' was just read.
func walkObject(dec *json.Decoder, names map[string]bool, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("the body is nested too deeply")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("the body is not valid JSON")
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("member %s appears more than once", quoteName(key))
		}
		seen[key] = true
		if names != nil && !names[key] {
			return fmt.Errorf("unknown field %s", quoteName(key))
		}
		if err := walkValue(dec, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func walkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return errors.New("the body is not valid JSON")
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		return walkObject(dec, nil, depth+1)
	case '[':
		if depth+1 > maxJSONDepth {
			return errors.New("the body is nested too deeply")
		}
		for dec.More() {
			if err := walkValue(dec, depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}

// quoteName quotes a member name for an error description: at most 64 bytes,
// Go-quoted so control characters cannot forge anything.
func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}
