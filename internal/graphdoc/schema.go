package graphdoc

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// DocumentSchema is the JSON Schema (draft 2020-12) of a graph document, for
// the API to serve and editors to use.
//
//go:embed schema/graph.schema.json
var DocumentSchema []byte

// ConfigSchema is the JSON Schema (draft 2020-12) of a graph config.
//
//go:embed schema/config.schema.json
var ConfigSchema []byte

// schema is a compiled JSON Schema with its source, which problems are
// worded from.
type schema struct {
	compiled *jsonschema.Schema
	source   any
}

type ownSchemas struct {
	document, config schema
}

// schemas compiles the embedded schemas once; they are tested, so a failure
// is a bug in this package.
var schemas = sync.OnceValue(func() ownSchemas {
	return ownSchemas{
		document: mustCompileSchema("graph.schema.json", DocumentSchema),
		config:   mustCompileSchema("config.schema.json", ConfigSchema),
	}
})

func mustCompileSchema(name string, raw []byte) schema {
	sch, err := compileSchema(raw)
	if err != nil {
		panic(fmt.Sprintf("graphdoc: embedded %s: %v", name, err))
	}
	var source any
	if err := decodeJSON(raw, &source); err != nil {
		panic(fmt.Sprintf("graphdoc: embedded %s: %v", name, err))
	}
	return schema{compiled: sch, source: source}
}

// compileSchema compiles a JSON Schema (draft 2020-12 unless it says
// otherwise). It loads nothing from outside: a $ref to a file or a URL other
// than the JSON Schema meta-schemas fails, so a document cannot make the
// platform read local files or fetch addresses.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const url = "mem:///schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// validate checks the JSON value inst against sch, adding one problem per
// broken rule; base is the pointer of inst within file.
func validate(sch schema, inst any, file, base string, ps *problems) {
	err := sch.compiled.Validate(inst)
	if err == nil {
		return
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		ps.add(file, base, "%v", err)
		return
	}
	n := len(ps.list)
	sch.leaves(ve, file, base, ps)
	if len(ps.list) == n { // not expected: every error has a leaf
		ps.add(file, base, "does not match the schema")
	}
}

var printer = message.NewPrinter(language.English)

// leaves turns the leaves of a validation error tree into problems, worded
// for a person writing the document.
func (sch schema) leaves(ve *jsonschema.ValidationError, file, base string, ps *problems) {
	if len(ve.Causes) > 0 {
		causes := ve.Causes
		if _, ok := ve.ErrorKind.(*kind.AnyOf); ok {
			causes = withoutTypeMismatches(causes)
		}
		for _, c := range causes {
			sch.leaves(c, file, base, ps)
		}
		return
	}
	at := pointer(base, ve.InstanceLocation...)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			ps.add(file, pointer(at, name), "is required")
		}
	case *kind.AdditionalProperties:
		rule := "is not a known property here"
		if pattern := sch.namePattern(ve.SchemaURL); pattern != "" {
			rule = "is not a valid name (must match " + pattern + ")"
		}
		for _, name := range k.Properties {
			ps.add(file, pointer(at, name), "%s", rule)
		}
	case *kind.Type:
		ps.add(file, at, "must be %s, not %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		ps.add(file, at, "must be one of %s", strings.Join(want, ", "))
	case *kind.Const:
		ps.add(file, at, "must be %v", k.Want)
	case *kind.Maximum:
		ps.add(file, at, "must be <= %s", number(k.Want))
	case *kind.Minimum:
		ps.add(file, at, "must be >= %s", number(k.Want))
	case *kind.ExclusiveMinimum:
		ps.add(file, at, "must be > %s", number(k.Want))
	case *kind.ExclusiveMaximum:
		ps.add(file, at, "must be < %s", number(k.Want))
	case *kind.MinLength:
		ps.add(file, at, "must not be empty")
	case *kind.Pattern:
		ps.add(file, at, "must match %s", k.Want)
	case *kind.MinProperties:
		ps.add(file, at, "must have at least %d entries", k.Want)
	case *kind.MinItems:
		ps.add(file, at, "must have at least %d items", k.Want)
	case *kind.UniqueItems:
		ps.add(file, at, "items %d and %d are the same", k.Duplicates[0], k.Duplicates[1])
	default:
		ps.add(file, at, "%s", ve.ErrorKind.LocalizedString(printer))
	}
}

// withoutTypeMismatches drops, from the failed branches of an anyOf, those
// that failed only for the value's type when another failed for a better
// reason: "must match ..." says more than "must be array, not string".
func withoutTypeMismatches(causes []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	kept := slices.DeleteFunc(slices.Clone(causes), func(c *jsonschema.ValidationError) bool {
		for len(c.Causes) == 1 {
			c = c.Causes[0]
		}
		_, ok := c.ErrorKind.(*kind.Type)
		return ok && len(c.Causes) == 0
	})
	if len(kept) == 0 {
		return causes
	}
	return kept
}

// number writes a bound plainly (the library's printer writes 1000000 as
// 1×10⁶).
func number(r *big.Rat) string {
	if r.IsInt() && r.Num().IsInt64() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	if math.IsInf(f, 0) {
		return "a number out of range"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// namePattern returns the one key of the patternProperties of the schema
// object at url: such an object is a map keyed by names (nodes, channels...)
// whose additionalProperties are names that break the pattern. (The
// schemas say this with patternProperties rather than propertyNames, whose
// errors the library places at a wrong instance location.)
func (sch schema) namePattern(url string) string {
	_, fragment, _ := strings.Cut(url, "#")
	v := sch.source
	for _, tok := range strings.Split(fragment, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		obj, _ := v.(map[string]any)
		v = obj[tok]
	}
	obj, _ := v.(map[string]any)
	patterns, _ := obj["patternProperties"].(map[string]any)
	if len(patterns) != 1 {
		return ""
	}
	for p := range patterns {
		return p
	}
	return ""
}
