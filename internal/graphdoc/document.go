package graphdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"gopkg.in/yaml.v3"
	"strings"
	"time"
)

// Document is one graph document, parsed and checked.
type Document struct {
	file  string // the file, as the config names it
	base  string // the document's pointer within file ("" unless inline)
	spec  document
	input *schema // nil: no input_schema
}

// Description is the document's description.
func (d *Document) Description() string { return d.spec.Description }

// InputSchema is the document's input_schema, nil when it has none.
func (d *Document) InputSchema() map[string]any {
	s, _ := d.spec.InputSchema.(map[string]any)
	return s
}

// CheckInput checks a run's input (a state object, as JSON values) against
// the document's input_schema; nil when it conforms or there is none. The
// error is a *ValidationError whose problems name "input" as their file.
func (d *Document) CheckInput(input any) error {
	if d.input == nil {
		return nil
	}
	var ps problems
	validate(*d.input, input, "input", "", &ps)
	return ps.err()
}

// document is the JSON shape of a graph document; the JSON Schema has
// vouched for it before it is decoded, so every field has the right type.
type document struct {
	Description string                  `json:"description"`
	State       map[string]*channelSpec `json:"state"`
	InputSchema any                     `json:"input_schema"`
	Tools       map[string]*toolSpec    `json:"tools"`
	Nodes       map[string]*nodeSpec    `json:"nodes"`
	Edges       []*edgeSpec             `json:"edges"`
}

type channelSpec struct {
	Reducer string `json:"reducer"`
	Default any    `json:"default"`
	Schema  any    `json:"schema"`
}

type toolSpec struct {
	Kind             string  `json:"kind"` // http or function
	Description      string  `json:"description"`
	Parameters       any     `json:"parameters"`
	URL              string  `json:"url"`
	Method           string  `json:"method"`
	Timeout          float64 `json:"timeout"`
	MaxResponseBytes int64   `json:"max_response_bytes"`
}

// nodeSpec holds the fields of every kind; the schema allows each kind only
// its own.
type nodeSpec struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
	// chat_model
	BaseURL      string   `json:"base_url"`
	Model        string   `json:"model"`
	APIKeySecret string   `json:"api_key_secret"`
	System       string   `json:"system"`
	Temperature  *float64 `json:"temperature"`
	MaxTokens    *int64   `json:"max_tokens"`
	// chat_model, tools
	Tools    []string `json:"tools"`
	Messages string   `json:"messages"`
	// http
	URL              string         `json:"url"`
	Method           string         `json:"method"`
	Query            any            `json:"query"` // http: an object of templates; store: a template
	Headers          map[string]any `json:"headers"`
	Body             any            `json:"body"`
	MaxResponseBytes int64          `json:"max_response_bytes"`
	// http, transform, interrupt, subgraph
	Update map[string]any `json:"update"`
	// interrupt
	Value any `json:"value"`
	// subgraph
	Graph string         `json:"graph"`
	Input map[string]any `json:"input"`
	// chat_model, http, function
	Timeout float64 `json:"timeout"`
	// http, tools: a provider token of the run's user (auth.go)
	Auth *authSpec `json:"auth"`
	// store (storenode.go; query above)
	Operation string         `json:"operation"`
	Namespace []any          `json:"namespace"`
	Key       any            `json:"key"`
	Filter    map[string]any `json:"filter"`
	Limit     int64          `json:"limit"`
	TTL       *float64       `json:"ttl"`
	Index     any            `json:"index"`

	// Templates, parsed by check.
	system          tmpl
	query, headers  map[string]tmpl
	body, value     tmpl
	update, input   map[string]tmpl
	messagesChannel string
	// store
	namespace      []tmpl
	key, queryText tmpl
	filter         map[string]tmpl
}

type edgeSpec struct {
	From string `json:"from"`
	To   any    `json:"to"` // a target or a list of targets
	// Conditional edges: when is tool_calls or a state path.
	When     string            `json:"when"`
	Messages string            `json:"messages"`
	Then     string            `json:"then"`
	Else     string            `json:"else"`
	Cases    map[string]string `json:"cases"`
	Default  string            `json:"default"`

	targets  []string  // static targets
	messages string    // the tool_calls condition's channel
	field    fieldPath // the switch's path
}

// parseDocument checks the JSON value v as a graph document found at base
// in file: first against the JSON Schema, then the rules a schema cannot
// say. It returns nil when there are problems.
func parseDocument(v any, file, base string, ps *problems) *Document {
	n := len(ps.list)
	validate(schemas().document, v, file, base, ps)
	if len(ps.list) > n {
		return nil
	}
	d := &Document{file: file, base: base}
	raw, err := json.Marshal(v)
	if err == nil {
		err = decodeJSON(raw, &d.spec)
	}
	if err != nil { // not expected once the schema passed
		ps.add(file, base, "cannot be read: %v", err)
		return nil
	}
	d.check(ps)
	if len(ps.list) > n {
		return nil
	}
	return d
}

// decode reads YAML or JSON (JSON is YAML) into a JSON value: objects,
// lists, strings, json.Number, booleans and null.
func decode(data []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if strings.Contains(msg, "invalid map key") && bytes.Contains(data, []byte("{{")) {
			msg = `a value starts with {{ and is not quoted (in YAML, write "{{ state.x }}")`
		}
		return nil, fmt.Errorf("is not valid YAML or JSON: %s", msg)
	}
	v, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("is not representable as JSON: %v", err)
	}
	var out any
	if err := decodeJSON(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// jsonValue converts what yaml.v3 produces to JSON types: mapping keys
// become strings and timestamps are written back as text.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			y, err := jsonValue(x)
			if err != nil {
				return nil, err
			}
			v[k] = y
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			y, err := jsonValue(x)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = y
		}
		return out, nil
	case []any:
		for i, x := range v {
			y, err := jsonValue(x)
			if err != nil {
				return nil, err
			}
			v[i] = y
		}
		return v, nil
	case time.Time:
		if v.Equal(v.Truncate(24 * time.Hour)) {
			return v.Format(time.DateOnly), nil
		}
		return v.Format(time.RFC3339Nano), nil
	}
	return v, nil
}

// decodeJSON decodes keeping numbers as json.Number, the engine's shape.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
