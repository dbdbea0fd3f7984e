// Package openapitest holds the /v1 API to its description, docs/openapi.yaml:
// wrapped around a test server's handler, it checks every answer to a
// documented operation — its status must be documented for that operation and
// its JSON body must validate against that response's schema — and fails the
// test otherwise. It is test support; nothing in production imports it.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/connectd/connectd/docs"
)

const specURL = "file:///connectd/docs/openapi.yaml"

// Spec is docs/openapi.yaml, ready to check answers against.
type Spec struct {
	ops []operation

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by JSON pointer
}

type operation struct {
	method    string
	segments  []string          // "{x}" matches any one segment
	pointer   string            // JSON pointer of the operation object
	responses map[string]string // status → JSON pointer of its response object
}

var (
	loadOnce sync.Once
	loaded   *Spec
	loadErr  error
)

// Load parses docs/openapi.yaml once per test binary.
func Load() (*Spec, error) {
	loadOnce.Do(func() { loaded, loadErr = parse(docs.OpenAPI) })
	return loaded, loadErr
}

func parse(raw []byte) (*Spec, error) {
	var y any
	if err := yaml.Unmarshal(raw, &y); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	// Through JSON, so the document has only JSON types (yaml gives ints).
	j, err := json.Marshal(y)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(specURL, doc); err != nil {
		return nil, err
	}
	s := &Spec{compiler: c, schemas: map[string]*jsonschema.Schema{}}
	paths, _ := doc.(map[string]any)["paths"].(map[string]any)
	for p, item := range paths {
		for method, op := range item.(map[string]any) {
			pointer := "/paths/" + escape(p) + "/" + method
			resp, _ := op.(map[string]any)["responses"].(map[string]any)
			codes := map[string]string{}
			for code, r := range resp {
				codes[code] = pointer + "/responses/" + code
				if ref, ok := r.(map[string]any)["$ref"].(string); ok {
					codes[code] = strings.TrimPrefix(ref, "#") // a shared response, e.g. the error envelope
				}
			}
			s.ops = append(s.ops, operation{method: strings.ToUpper(method), segments: strings.Split(p, "/"),
				pointer: pointer, responses: codes})
		}
	}
	return s, nil
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// find returns the documented operation for method and path: the one whose
// template matches with the most literal segments.
func (s *Spec) find(method, path string) *operation {
	segs := strings.Split(path, "/")
	var best *operation
	bestLit := -1
	for i := range s.ops {
		op := &s.ops[i]
		if op.method != method || len(op.segments) != len(segs) {
			continue
		}
		lit, ok := 0, true
		for k, t := range op.segments {
			switch {
			case strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}"):
				ok = ok && segs[k] != ""
			case t == segs[k]:
				lit++
			default:
				ok = false
			}
		}
		if ok && lit > bestLit {
			best, bestLit = op, lit
		}
	}
	return best
}

func (s *Spec) schema(pointer string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.schemas[pointer]; ok {
		return sch, nil
	}
	sch, err := s.compiler.Compile(specURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	s.schemas[pointer] = sch
	return sch, nil
}

// Check checks one answer. An operation the description does not have is not
// checked (the fallback's 404 and 405 answers); for a documented one, the
// status must be listed and a JSON body must validate against its schema.
func (s *Spec) Check(method, path string, status int, contentType string, body []byte) error {
	op := s.find(method, path)
	if op == nil {
		return nil
	}
	code := strconv.Itoa(status)
	resp, ok := op.responses[code]
	if !ok {
		return fmt.Errorf("%s %s answered %d, which docs/openapi.yaml does not list for this operation: %s",
			method, path, status, body)
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/json" {
		if len(body) == 0 {
			return nil
		}
		return fmt.Errorf("%s %s answered %d with %q, not JSON", method, path, status, contentType)
	}
	sch, err := s.schema(resp + "/content/application~1json/schema")
	if err != nil {
		return fmt.Errorf("docs/openapi.yaml has no JSON schema for %s %s %d: %w", method, path, status, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s answered %d with invalid JSON: %w", method, path, status, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s %s answered %d with a body docs/openapi.yaml does not describe: %s\n%v",
			method, path, status, body, err)
	}
	return nil
}

// Handler wraps h so that every answer h gives to a documented operation
// (/v1, the token endpoint) is checked against docs/openapi.yaml; a mismatch fails t.
func Handler(t testing.TB, h http.Handler) http.Handler {
	spec, err := Load()
	if err != nil {
		t.Fatalf("openapitest: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The proxy's answers are the providers' own documents, not
		// connectd's: the spec describes them as anything.
		if !documented(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if r.Context().Err() != nil {
			return // the client went away: nobody receives this answer
		}
		if err := spec.Check(r.Method, r.URL.Path, rec.status, rec.Header().Get("Content-Type"), rec.body.Bytes()); err != nil {
			t.Errorf("openapitest: %v", err)
		}
	})
}

// documented reports whether the answers at path are connectd's own API's:
// /v1 (less the proxy, whose answers are the providers' own documents, which
// the spec describes as anything), the OAuth token endpoint and its metadata.
func documented(path string) bool {
	switch path {
	case "/oauth/token", "/.well-known/oauth-authorization-server":
		return true
	}
	return strings.HasPrefix(path, "/v1/") && !strings.HasPrefix(path, "/v1/proxy/")
}

// recorder passes the answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}

// Flush keeps long-polls and streaming working through the wrapper.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
