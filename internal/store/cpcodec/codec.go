package cpcodec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
)

const (
	// InlineMax is the largest value kept in the manifest instead of a
	// blob: small values cost less inline than a row of their own.
	InlineMax = 256
	// MaxDepth bounds the appends a value's chain may have below it: past
	// it the value is written whole, so a read follows at most MaxDepth+1
	// blobs.
	MaxDepth = 512
	// maxLinks is what a reader follows at most before it calls the chain
	// broken (a value is never written deeper than MaxDepth; two writes of
	// the same content can leave a longer one, never a cycle: a base is
	// strictly shorter than what appends to it).
	maxLinks = 4 * MaxDepth
)

// Manifest says how a split checkpoint's values are stored.
type Manifest struct {
	// At is where the values object goes back into the head.
	At int `json:"at"`
	// Ch are the channels in the order of the values object.
	Ch []Entry `json:"ch"`
}

// Entry is one channel of a manifest: inline (V) or a blob (ID, N, P, D).
type Entry struct {
	K json.RawMessage `json:"k"`           // the key as it was written, quotes included
	V json.RawMessage `json:"v,omitempty"` // the value, when inline
	// ID names the blob: the first 32 hex digits of the value's SHA-256.
	ID string `json:"id,omitempty"`
	N  int    `json:"n,omitempty"` // the value's length in bytes
	// P is the hex SHA-256 of the value without its last byte: what an
	// array that extends this one starts with, up to its ",".
	P string `json:"p,omitempty"`
	// D is the number of appends below this version (0: a whole blob);
	// R, when D > 0, the ID of the whole blob its chain starts from. An
	// adapter may key blobs by (root, depth) so that one range read
	// fetches a chain (see Root).
	D int    `json:"d,omitempty"`
	R string `json:"r,omitempty"`
}

// Root is the ID of the whole blob e's chain starts from.
func (e Entry) Root() string {
	if e.D == 0 {
		return e.ID
	}
	return e.R
}

// Blob is one stored version of a channel: the whole value (Base "") or
// the elements appended to version Base, without brackets.
type Blob struct {
	ID   string
	Base string
	Data []byte
	// Root and Depth place the blob in its chain (Root: the chain's whole
	// blob; Depth 0 for a whole one).
	Root  string
	Depth int
}

// Encoded is a checkpoint as an adapter stores it.
type Encoded struct {
	// Head is the checkpoint without its values; the whole Data when
	// Manifest is nil.
	Head []byte
	// Manifest is the JSON of M; nil when the data is stored whole.
	Manifest []byte
	M        *Manifest
	// Blobs are the versions this checkpoint introduced; an adapter
	// inserts each unless its ID is stored already (same content).
	Blobs []Blob
}

// Bytes is what storing e writes, blobs included.
func (e Encoded) Bytes() int {
	n := len(e.Head) + len(e.Manifest)
	for _, b := range e.Blobs {
		n += len(b.ID) + len(b.Base) + len(b.Data)
	}
	return n
}

// Encode splits data, the bytes of a checkpoint whose parent's manifest
// is parent (nil when unknown or stored whole). Data that is not an
// engine-shaped checkpoint comes back whole.
func Encode(data []byte, parent *Manifest) Encoded {
	vs, ve, ok := valuesSpan(data)
	if !ok {
		return Encoded{Head: data}
	}
	return encodeSpan(data, vs, ve, parent)
}

// EncodeObject splits a document that is itself a values object (a
// thread's values, a run's result: compact JSON objects whose members are
// the state's channels) against a checkpoint's manifest, so that values
// the checkpoint stores already cost a manifest entry. Anything else comes
// back whole.
func EncodeObject(doc []byte, parent *Manifest) Encoded {
	if len(doc) < 2 || doc[0] != '{' {
		return Encoded{Head: doc}
	}
	if end, ok := skip(doc, 0); !ok || end != len(doc) {
		return Encoded{Head: doc}
	}
	return encodeSpan(doc, 0, len(doc), parent)
}

func encodeSpan(data []byte, vs, ve int, parent *Manifest) Encoded {
	members, ok := objectMembers(data[vs:ve])
	if !ok {
		return Encoded{Head: data}
	}
	prev := map[string]Entry{}
	if parent != nil {
		for _, e := range parent.Ch {
			if e.ID != "" {
				prev[string(e.K)] = e
			}
		}
	}
	m := &Manifest{At: vs, Ch: make([]Entry, 0, len(members))}
	var blobs []Blob
	for _, mem := range members {
		if !compactJSON(mem.key) {
			return Encoded{Head: data}
		}
		if len(mem.val) <= InlineMax && compactJSON(mem.val) {
			m.Ch = append(m.Ch, Entry{K: mem.key, V: mem.val})
			continue
		}
		e, blob := version(mem.key, mem.val, prev[string(mem.key)])
		m.Ch = append(m.Ch, e)
		if blob != nil {
			blobs = append(blobs, *blob)
		}
	}
	man, err := json.Marshal(m)
	if err != nil {
		return Encoded{Head: data}
	}
	head := make([]byte, 0, len(data)-(ve-vs))
	head = append(append(head, data[:vs]...), data[ve:]...)
	return Encoded{Head: head, Manifest: man, M: m, Blobs: blobs}
}

// version makes the entry of value val of channel key, and the blob to
// write (nil when the parent's version pe is the same value).
func version(key, val []byte, pe Entry) (Entry, *Blob) {
	h := sha256.New()
	n := len(val)
	appends := pe.ID != "" && pe.D < MaxDepth && n > pe.N && pe.N >= 2 &&
		val[0] == '[' && val[n-1] == ']' && val[pe.N-1] == ','
	if appends {
		h.Write(val[:pe.N-1])
		appends = hexSum(h) == pe.P
		h.Write(val[pe.N-1 : n-1])
	} else {
		h.Write(val[:n-1])
	}
	e := Entry{K: key, N: n, P: hexSum(h)}
	h.Write(val[n-1:])
	e.ID = hexSum(h)[:32]
	switch {
	case e.ID == pe.ID && n == pe.N:
		return pe, nil
	case appends:
		e.D, e.R = pe.D+1, pe.Root()
		return e, &Blob{ID: e.ID, Base: pe.ID, Data: val[pe.N : n-1], Root: e.R, Depth: e.D}
	}
	return e, &Blob{ID: e.ID, Data: val, Root: e.ID}
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// ParseManifest reads a stored manifest.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("checkpoint manifest: %w", err)
	}
	return &m, nil
}

// Refs lists the blob IDs a manifest references directly.
func (m *Manifest) Refs() []string {
	var out []string
	for _, e := range m.Ch {
		if e.ID != "" {
			out = append(out, e.ID)
		}
	}
	return out
}

// ErrBroken is a chain that does not end in a whole value, or a value
// whose length is not the manifest's.
var ErrBroken = errors.New("checkpoint values: broken blob chain")

// Materialize builds a value from its chain, newest blob first, ending in
// the whole value (as an adapter's chain query returns it).
func Materialize(chain []Blob) ([]byte, error) {
	if len(chain) == 0 || len(chain) > maxLinks+1 || chain[len(chain)-1].Base != "" {
		return nil, ErrBroken
	}
	base := chain[len(chain)-1].Data
	size := len(base)
	for _, b := range chain[:len(chain)-1] {
		size += len(b.Data) + 1
	}
	if len(chain) == 1 {
		return base, nil
	}
	if len(base) < 2 || base[len(base)-1] != ']' {
		return nil, ErrBroken
	}
	out := make([]byte, 0, size)
	out = append(out, base[:len(base)-1]...)
	for i := len(chain) - 2; i >= 0; i-- {
		if chain[i].Base != chain[i+1].ID {
			return nil, ErrBroken
		}
		out = append(append(out, ','), chain[i].Data...)
	}
	return append(out, ']'), nil
}

// Decode gives back the bytes that were encoded: head with the values of
// m, each blob value read through value(id).
func Decode(head []byte, m *Manifest, value func(id string) ([]byte, error)) ([]byte, error) {
	if m.At < 0 || m.At > len(head) {
		return nil, ErrBroken
	}
	vals := make([][]byte, len(m.Ch))
	size := len(head) + 2
	for i, e := range m.Ch {
		v := []byte(e.V)
		if e.ID != "" {
			var err error
			if v, err = value(e.ID); err != nil {
				return nil, err
			}
			if len(v) != e.N {
				return nil, ErrBroken
			}
		}
		vals[i] = v
		size += len(e.K) + 2 + len(v)
	}
	out := make([]byte, 0, size)
	out = append(append(out, head[:m.At]...), '{')
	for i, e := range m.Ch {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, e.K...), ':'), vals[i]...)
	}
	return append(append(out, '}'), head[m.At:]...), nil
}

// valuesSpan finds the value of the top-level member "values" when data
// is a compact JSON object and that value an object: [start, end).
func valuesSpan(data []byte) (int, int, bool) {
	if len(data) < 2 || data[0] != '{' {
		return 0, 0, false
	}
	i := 1
	for i < len(data) && data[i] != '}' {
		ks := i
		ke, ok := skip(data, i)
		if !ok || data[ks] != '"' || ke >= len(data) || data[ke] != ':' {
			return 0, 0, false
		}
		vs := ke + 1
		ve, ok := skip(data, vs)
		if !ok {
			return 0, 0, false
		}
		if string(data[ks:ke]) == `"values"` {
			if data[vs] != '{' {
				return 0, 0, false
			}
			return vs, ve, true
		}
		i = ve
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
	return 0, 0, false
}

type member struct{ key, val []byte }

// objectMembers splits a compact JSON object into its members.
func objectMembers(obj []byte) ([]member, bool) {
	var out []member
	i := 1
	for i < len(obj)-1 {
		ke, ok := skip(obj, i)
		if !ok || obj[i] != '"' || ke >= len(obj) || obj[ke] != ':' {
			return nil, false
		}
		ve, ok := skip(obj, ke+1)
		if !ok || ve >= len(obj) || ve == ke+1 {
			return nil, false
		}
		out = append(out, member{key: obj[i:ke], val: obj[ke+1 : ve]})
		switch obj[ve] {
		case ',':
			i = ve + 1
		case '}':
			if ve != len(obj)-1 {
				return nil, false
			}
			i = ve
		default:
			return nil, false
		}
	}
	return out, i == len(obj)-1 && obj[i] == '}'
}

// skip returns the end of the compact JSON value starting at i: a string,
// an object or array (brackets balanced outside strings), or a literal or
// number (up to the next ',', '}', ']' or ':'). It does not validate.
func skip(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		// The next quote not escaped by an odd run of backslashes ends it
		// (IndexByte: most of a conversation's bytes are in strings).
		for j := i + 1; j < len(b); {
			q := bytes.IndexByte(b[j:], '"')
			if q < 0 {
				return 0, false
			}
			q += j
			esc := 0
			for k := q - 1; k > i && b[k] == '\\'; k-- {
				esc++
			}
			if esc%2 == 0 {
				return q + 1, true
			}
			j = q + 1
		}
		return 0, false
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := skip(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ':' {
		j++
	}
	return j, j > i
}

// compactJSON: b is valid JSON that compacting leaves as it is, so it can
// sit in the manifest as a raw value and come back byte for byte.
func compactJSON(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return false
	}
	return bytes.Equal(buf.Bytes(), b)
}

// SameValues reports whether data, a checkpoint's bytes, is the checkpoint
// stored as head and m, without reading m's blobs: data's head is head and
// each of its channels has m's key and inline value, or m's length and id
// (the value's content address, which is what the store shares blobs by).
// False when data is not split the same way (say, stored whole): the
// caller then reads the values.
func SameValues(data, head []byte, m *Manifest) bool {
	if m == nil || m.At < 0 || m.At > len(head) {
		return false
	}
	vs, ve, ok := valuesSpan(data)
	if !ok || vs != m.At || len(data)-(ve-vs) != len(head) ||
		!bytes.Equal(data[:vs], head[:vs]) || !bytes.Equal(data[ve:], head[vs:]) {
		return false
	}
	members, ok := objectMembers(data[vs:ve])
	if !ok || len(members) != len(m.Ch) {
		return false
	}
	for i, mem := range members {
		e := m.Ch[i]
		if !bytes.Equal(mem.key, e.K) {
			return false
		}
		if e.ID == "" {
			if !bytes.Equal(mem.val, e.V) {
				return false
			}
			continue
		}
		if len(mem.val) != e.N {
			return false
		}
		h := sha256.Sum256(mem.val)
		if hex.EncodeToString(h[:])[:32] != e.ID {
			return false
		}
	}
	return true
}
