package api

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var openapiYAML []byte

// openapiJSON is openapi.yaml as JSON, made at build time (cmd/specjson):
// parsing the YAML was half of a function's cold start (review #19). Used
// only while it matches the YAML (openapiYAMLSHA256); a stale one (the
// YAML edited, `go generate` not run) makes the server parse the YAML, and
// TestGeneratedSpecMatchesYAML fail.
//
//go:generate go run ../../cmd/specjson
//go:embed openapi.gen.json
var openapiJSON []byte

// operation is one route of the document with what is needed to validate a
// request to it.
type operation struct {
	ID       string
	Method   string
	Path     string
	Public   bool // no API key needed (security: [])
	Params   []param
	Body     *jsonschema.Schema // nil: the operation takes no body
	BodyNeed bool
	// RawBody (x-raw-body on the request body) hands the body to the
	// handler unvalidated, within the size limit: a JSON-RPC endpoint
	// answers malformed messages with its protocol's error objects, not 422.
	RawBody bool
}

type param struct {
	Name     string
	In       string // path, query, header
	Required bool
	Type     string // the JSON type of the schema ("string" when unsure)
	Schema   *jsonschema.Schema
}

// spec is the loaded document: its JSON form (served at /openapi.json) and
// its operations.
type spec struct {
	JSON       []byte
	Operations []operation
}

var methods = []string{"get", "post", "put", "patch", "delete"}

const specURL = "mem://openapi.json"

// loadSpec parses the embedded document and compiles the request schemas of
// the operations served (every one when served is nil). The others are
// listed without their schemas: a function on Lambda serves a few routes,
// and compiling the ~100 operations' schemas would be most of its cold
// start (review #19; bench/results/2026-11-26-cold-start.md).
func loadSpec(served map[string]bool) (*spec, error) {
	doc, raw, err := specDocument()
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(specURL, inst); err != nil {
		return nil, err
	}
	s := &spec{JSON: raw}
	paths, _ := doc["paths"].(map[string]any)
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[path].(map[string]any)
		shared, _ := item["parameters"].([]any)
		for _, m := range methods {
			opDoc, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			compile := served == nil || served[strings.ToUpper(m)+" "+path]
			op, err := compileOperation(c, doc, path, m, opDoc, shared, compile)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", strings.ToUpper(m), path, err)
			}
			s.Operations = append(s.Operations, op)
		}
	}
	return s, nil
}

// specDocument is the document, parsed, and its JSON form: from the
// generated JSON when it is current, else from the YAML.
func specDocument() (map[string]any, []byte, error) {
	var doc map[string]any
	if sum := sha256.Sum256(openapiYAML); hex.EncodeToString(sum[:]) == openapiYAMLSHA256 {
		if err := json.Unmarshal(openapiJSON, &doc); err != nil {
			return nil, nil, fmt.Errorf("openapi.gen.json: %w", err)
		}
		return doc, openapiJSON, nil
	}
	return yamlDocument()
}

// yamlDocument parses openapi.yaml itself.
func yamlDocument() (map[string]any, []byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		return nil, nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("openapi.yaml to JSON: %w", err)
	}
	return doc, raw, nil
}

func compileOperation(c *jsonschema.Compiler, doc map[string]any, path, method string, opDoc map[string]any, shared []any, compile bool) (operation, error) {
	op := operation{Method: strings.ToUpper(method), Path: path}
	op.ID, _ = opDoc["operationId"].(string)
	if op.ID == "" {
		return op, fmt.Errorf("operationId missing")
	}
	if sec, ok := opDoc["security"].([]any); ok && len(sec) == 0 {
		op.Public = true
	}
	if !compile {
		return op, nil
	}
	ptr := "/paths/" + escapePointer(path) + "/" + method
	own, _ := opDoc["parameters"].([]any)
	all := append(indexed(shared, "/paths/"+escapePointer(path)+"/parameters"), indexed(own, ptr+"/parameters")...)
	for _, p := range all {
		pm, err := compileParam(c, doc, p)
		if err != nil {
			return op, err
		}
		op.Params = append(op.Params, pm)
	}
	if rb, ok := opDoc["requestBody"].(map[string]any); ok {
		op.BodyNeed, _ = rb["required"].(bool)
		if raw, _ := rb["x-raw-body"].(bool); raw {
			op.RawBody = true
			return op, nil
		}
		sch, err := c.Compile(specURL + "#" + ptr + "/requestBody/content/application~1json/schema")
		if err != nil {
			return op, fmt.Errorf("request body schema: %w", err)
		}
		op.Body = sch
	}
	return op, nil
}

type located struct {
	value   any
	pointer string
}

func indexed(list []any, base string) []located {
	out := make([]located, len(list))
	for i, v := range list {
		out[i] = located{v, base + "/" + strconv.Itoa(i)}
	}
	return out
}

// compileParam resolves a parameter (possibly a $ref to components) and
// compiles its schema.
func compileParam(c *jsonschema.Compiler, doc map[string]any, p located) (param, error) {
	m, _ := p.value.(map[string]any)
	pointer := p.pointer
	if ref, ok := m["$ref"].(string); ok {
		pointer = strings.TrimPrefix(ref, "#")
		m, _ = resolvePointer(doc, pointer).(map[string]any)
		if m == nil {
			return param{}, fmt.Errorf("unresolved parameter %s", ref)
		}
	}
	out := param{Type: "string"}
	out.Name, _ = m["name"].(string)
	out.In, _ = m["in"].(string)
	out.Required, _ = m["required"].(bool)
	sch, err := c.Compile(specURL + "#" + pointer + "/schema")
	if err != nil {
		return out, fmt.Errorf("parameter %s: %w", out.Name, err)
	}
	out.Schema = sch
	if schemaDoc, ok := m["schema"].(map[string]any); ok {
		if t, ok := schemaDoc["type"].(string); ok {
			out.Type = t
		}
	}
	return out, nil
}

func resolvePointer(doc any, pointer string) any {
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	return cur
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

var printer = message.NewPrinter(language.English)

// describe turns a schema violation into "field: rule" messages, one per
// broken rule, fields written as dotted paths (source_config.resource_spec.cpu).
func describe(prefix string, err error) []string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []string{prefix + ": " + err.Error()}
	}
	var out []string
	collectLeaves(prefix, ve, &out)
	slices.Sort(out)
	return slices.Compact(out)
}

func collectLeaves(prefix string, ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		causes := ve.Causes
		if _, ok := ve.ErrorKind.(*kind.AnyOf); ok {
			causes = withoutNullBranch(causes)
		}
		for _, c := range causes {
			collectLeaves(prefix, c, out)
		}
		return
	}
	field := fieldPath(prefix, ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			*out = append(*out, joinField(field, name)+": is required")
		}
	case *kind.Type:
		// A value that is not null broke a nullable type: null is how a
		// request says "absent", so the rule worth naming is the other type.
		if k.Got != "null" && len(k.Want) > 1 && slices.Contains(k.Want, "null") {
			k = &kind.Type{Got: k.Got, Want: slices.DeleteFunc(slices.Clone(k.Want), func(w string) bool { return w == "null" })}
		}
		*out = append(*out, field+": "+k.LocalizedString(printer))
	case *kind.Enum:
		// As for types: a value that is not null gains nothing from "<nil>"
		// among the values it could have been.
		if k.Got != nil && slices.Contains(k.Want, nil) {
			k = &kind.Enum{Got: k.Got, Want: slices.DeleteFunc(slices.Clone(k.Want), func(w any) bool { return w == nil })}
		}
		*out = append(*out, field+": "+k.LocalizedString(printer))
	case *kind.Maximum:
		*out = append(*out, fmt.Sprintf("%s: maximum: got %s, want %s", field, number(k.Got), number(k.Want)))
	case *kind.Minimum:
		*out = append(*out, fmt.Sprintf("%s: minimum: got %s, want %s", field, number(k.Got), number(k.Want)))
	default:
		*out = append(*out, field+": "+ve.ErrorKind.LocalizedString(printer))
	}
}

// number writes a schema bound or the value that broke it plainly (the
// library's printer writes 1000000 as 1×10⁰⁶).
func number(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() && r.Num().IsInt64() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	if math.IsInf(f, 0) {
		return "a number out of range"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// withoutNullBranch drops, from the causes of a failed anyOf, the branch
// that only allows null (anyOf [X, {type: null}]): the value was not null,
// so "got object, want null" says nothing; X's causes name the real problem.
func withoutNullBranch(causes []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	kept := slices.DeleteFunc(slices.Clone(causes), func(c *jsonschema.ValidationError) bool {
		t, ok := c.ErrorKind.(*kind.Type)
		return ok && len(c.Causes) == 0 && len(t.Want) == 1 && t.Want[0] == "null"
	})
	if len(kept) == 0 {
		return causes
	}
	return kept
}

func fieldPath(prefix string, loc []string) string {
	field := prefix
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			field += "[" + tok + "]"
			continue
		}
		field = joinField(field, tok)
	}
	if field == "" {
		return "body"
	}
	return field
}

func joinField(base, name string) string {
	if base == "" || base == "body" {
		return name
	}
	return base + "." + name
}
