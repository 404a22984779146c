package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// request is a validated request to one operation.
type request struct {
	*http.Request
	op    operation
	orgID string // the caller's organization ("" on public operations)
	body  []byte // the raw body, already checked against the document
	// exact is what decode reads: the body as the schema validator saw it
	// (see exactkeys.go).
	exact []byte
}

// errTooLarge marks a body over the size limit (413).
var errTooLarge = errors.New("request body too large")

// readAndValidate reads the body within the size limit and checks path,
// query, header parameters and body against the operation's schemas.
func (r *request) readAndValidate(w http.ResponseWriter, limit int64) error {
	if err := r.validateParams(); err != nil {
		return err
	}
	if r.op.RawBody {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errTooLarge
		}
		if err != nil {
			return bodyReadError(err)
		}
		if len(bytes.TrimSpace(body)) == 0 && r.op.BodyNeed {
			return fail.Invalid("body", "is required (a JSON-RPC message)")
		}
		r.body = body
		return nil
	}
	if r.op.Body == nil {
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errTooLarge
	}
	if err != nil {
		return bodyReadError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if r.op.BodyNeed {
			return fail.Invalid("body", "is required (a JSON object)")
		}
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fail.Invalid("body", "is not valid JSON")
	}
	if err := r.op.Body.Validate(inst); err != nil {
		return invalid(describe("", err))
	}
	r.body = body
	r.exact, err = exactBody(r.op.Body, inst, body)
	return err
}

// bodyReadError says why a body could not be read without the network
// error's text, which names the server's own address ("read tcp
// 10.0.3.7:8080->…: i/o timeout").
func bodyReadError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fail.BadRequest("body: was not received in time")
	}
	return fail.BadRequest("body: could not be read (the connection broke or the body ended early)")
}

func (r *request) validateParams() error {
	var problems []string
	for _, p := range r.op.Params {
		raw, present := r.paramValue(p)
		if !present {
			if p.Required {
				problems = append(problems, p.Name+": is required")
			}
			continue
		}
		v, ok := coerce(raw, p.Type)
		if !ok {
			problems = append(problems, p.Name+": must be "+article(p.Type))
			continue
		}
		if err := p.Schema.Validate(v); err != nil {
			problems = append(problems, describe(p.Name, err)...)
		}
	}
	return invalid(problems)
}

func (r *request) paramValue(p param) (string, bool) {
	switch p.In {
	case "path":
		v := r.PathValue(p.Name)
		return v, v != ""
	case "query":
		q := r.URL.Query()
		return q.Get(p.Name), q.Has(p.Name)
	case "header":
		v := r.Header.Get(p.Name)
		return v, v != ""
	}
	return "", false
}

// coerce turns a parameter's text into the JSON value its schema expects.
func coerce(raw, typ string) (any, bool) {
	switch typ {
	case "integer":
		n, err := strconv.ParseInt(raw, 10, 64)
		return json.Number(strconv.FormatInt(n, 10)), err == nil
	case "number":
		_, err := strconv.ParseFloat(raw, 64)
		return json.Number(raw), err == nil
	case "boolean":
		b, err := strconv.ParseBool(raw)
		return b, err == nil
	}
	return raw, true
}

func article(typ string) string {
	if typ == "integer" {
		return "an integer"
	}
	return "a " + typ
}

func invalid(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &fail.Error{Kind: fail.KindInvalid, Message: strings.Join(problems, "; ")}
}

// decode fills v from the validated body, as the validator saw it. A body
// that passed the schema but does not fit v (a number out of range, say) is
// still a 422, never a 500.
func (r *request) decode(v any) error {
	if len(r.exact) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.exact, v); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return fail.Invalid("body", "does not fit the operation")
		}
		if strings.HasPrefix(te.Value, "number") {
			if field, ok := outOfRange(r.exact, te.Field); ok {
				return fail.Invalid(field, "must be a number within range")
			}
		}
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fail.Invalid(field, "must be %s", expectedJSON(te.Type))
	}
	return nil
}

// expectedJSON says, in JSON terms, what a Go type accepts.
func expectedJSON(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number within range"
	case reflect.Float32, reflect.Float64:
		return "a number within range"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a JSON value of another type"
}

// outOfRange finds the first number of body, below the struct field path
// under (dotted, without map keys or indices, as json.UnmarshalTypeError
// gives it), that does not fit a float64, and returns its full path
// (source_config.resource_spec.cpu, secrets[0].value).
func outOfRange(body []byte, under string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return "", false
	}
	var want []string
	if under != "" {
		want = strings.Split(under, ".")
	}
	var found string
	var walk func(v any, path string, keys []string) bool
	walk = func(v any, path string, keys []string) bool {
		switch x := v.(type) {
		case json.Number:
			if _, err := strconv.ParseFloat(string(x), 64); err != nil && hasPrefix(keys, want) {
				found = path
				return true
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if walk(x[k], joinField(path, k), append(slices.Clip(keys), k)) {
					return true
				}
			}
		case []any:
			for i, item := range x {
				if walk(item, path+"["+strconv.Itoa(i)+"]", keys) {
					return true
				}
			}
		}
		return false
	}
	if !walk(doc, "", nil) || found == "" {
		return "", false
	}
	return found, true
}

func hasPrefix(keys, prefix []string) bool {
	return len(keys) >= len(prefix) && slices.Equal(keys[:len(prefix)], prefix)
}

// intQuery reads an integer query parameter already validated against the
// document, or def when absent.
func (r *request) intQuery(name string, def int) int {
	if v := r.URL.Query().Get(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}
