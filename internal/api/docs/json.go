package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// object is a JSON object that remembers the order of its keys, so the page
// lists paths, properties and responses in the order the document gives them.
type object struct {
	order []string
	vals  map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) any {
	if o == nil {
		return nil
	}
	return o.vals[k]
}

func (o *object) has(k string) bool {
	if o == nil {
		return false
	}
	_, ok := o.vals[k]
	return ok
}

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.order = append(o.order, k)
	}
	o.vals[k] = v
}

func (o *object) obj(k string) *object {
	v, _ := o.get(k).(*object)
	return v
}

func (o *object) str(k string) string {
	v, _ := o.get(k).(string)
	return v
}

func (o *object) list(k string) []any {
	v, _ := o.get(k).([]any)
	return v
}

func (o *object) boolean(k string) bool {
	v, _ := o.get(k).(bool)
	return v
}

func (o *object) len() int { return len(o.keys()) }

// keys lists the keys in document order; nil for a nil object.
func (o *object) keys() []string {
	if o == nil {
		return nil
	}
	return o.order
}

// MarshalJSON writes the keys in their original order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.order {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// maxNesting bounds how deep a document may nest, so a hostile document
// cannot exhaust the stack.
const maxNesting = 512

// parseJSON decodes one JSON value: objects become *object, arrays []any,
// numbers json.Number, and strings, booleans and null their Go values.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("nested deeper than %d levels", maxNesting)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := newObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return o, nil
	case '[':
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return list, nil
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// lookup resolves a JSON pointer ("/components/schemas/Pet") in doc.
func lookup(doc any, pointer string) any {
	if pointer == "" {
		return doc
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = unescapeToken(tok)
		switch c := cur.(type) {
		case *object:
			if !c.has(tok) {
				return nil
			}
			cur = c.get(tok)
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func unescapeToken(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// fragmentPointer turns a local reference ("#/components/schemas/Pet") into
// its JSON pointer; ok is false for references to other documents.
func fragmentPointer(ref string) (string, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return "", false
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	return frag, true
}

// jsonText renders a JSON value compactly, cut to a readable length.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(b.String())
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}

// jsonIndented renders a JSON value over several lines.
func jsonIndented(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "{}"
	}
	return strings.TrimSpace(b.String())
}
