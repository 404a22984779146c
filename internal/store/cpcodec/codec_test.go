package cpcodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// mem is an in-memory blob table: what an adapter's chain query reads.
type mem map[string]Blob

func (s mem) put(e Encoded) {
	for _, b := range e.Blobs {
		if _, ok := s[b.ID]; !ok {
			s[b.ID] = b
		}
	}
}

func (s mem) value(id string) ([]byte, error) {
	var chain []Blob
	for id != "" {
		b, ok := s[id]
		if !ok {
			return nil, fmt.Errorf("no blob %s", id)
		}
		chain = append(chain, b)
		id = b.Base
	}
	return Materialize(chain)
}

func roundTrip(t testing.TB, s mem, data []byte, parent *Manifest) Encoded {
	t.Helper()
	e := Encode(data, parent)
	s.put(e)
	if e.M == nil {
		if !bytes.Equal(e.Head, data) {
			t.Fatalf("whole data changed")
		}
		return e
	}
	m, err := ParseManifest(e.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(e.Head, m, s.value)
	if err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("round trip:\n got %s\nwant %s", got, data)
	}
	return e
}

func checkpoint(t testing.TB, values map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"v": 1, "id": "x", "values": values, "tasks": []any{}, "metadata": map[string]any{"step": 1}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestShapes(t *testing.T) {
	big := strings.Repeat("x", 1000)
	for _, tc := range []struct {
		name  string
		data  string
		split bool
	}{
		{"engine checkpoint", string(checkpoint(t, map[string]any{"a": big, "b": 1, "c": []any{big}})), true},
		{"no values", `{"v":1,"id":"x"}`, false},
		{"values not an object", `{"values":[1,2]}`, false},
		{"empty values", `{"values":{}}`, true},
		{"whitespace at the top", `{ "values":{"a":1}}`, false},
		{"whitespace in values' members", `{"values":{"a": 1}}`, true},
		{"whitespace inside a small value", `{"values":{"a":[1, 2]}}`, true},
		{"nested whitespace in a large value", `{"values":{"a":[1, "` + big + `"]}}`, true},
		{"escaped quotes", `{"values":{"a\"}":"` + big + `\"}]"}}`, true},
		{"not json", `abc`, false},
		{"truncated", `{"values":{"a":[1,2`, false},
		{"empty", ``, false},
		{"values twice", `{"values":{"a":1},"values":{"b":2}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := roundTrip(t, mem{}, []byte(tc.data), nil)
			if (e.M != nil) != tc.split {
				t.Fatalf("split = %v, want %v", e.M != nil, tc.split)
			}
		})
	}
}

// A growing conversation writes each message once: every step's blobs
// are what it appended, and reads give back every step exactly.
func TestAppendsAreDeltas(t *testing.T) {
	s := mem{}
	var msgs []any
	var parent *Manifest
	var stored [][]byte
	var encs []Encoded
	for turn := 0; turn < 50; turn++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": strings.Repeat("m", 1000) + fmt.Sprint(turn)})
		data := checkpoint(t, map[string]any{"messages": msgs, "count": turn})
		e := roundTrip(t, s, data, parent)
		if turn > 1 && e.Bytes() > 3*len(checkpoint(t, map[string]any{"messages": msgs[len(msgs)-1:]})) {
			t.Fatalf("turn %d wrote %d bytes for a state of %d", turn, e.Bytes(), len(data))
		}
		if turn > 1 && (len(e.Blobs) != 1 || e.Blobs[0].Base == "") {
			t.Fatalf("turn %d: blobs %+v, want one append", turn, e.Blobs)
		}
		parent = e.M
		stored = append(stored, data)
		encs = append(encs, e)
	}
	// Every earlier checkpoint still reads exactly (history).
	for i, e := range encs {
		got, err := Decode(e.Head, e.M, s.value)
		if err != nil || !bytes.Equal(got, stored[i]) {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
	}
	// A fork from an old checkpoint that appends something else.
	fork := append(append([]any{}, msgs[:10]...), map[string]any{"role": "user", "content": strings.Repeat("f", 500)})
	e := roundTrip(t, s, checkpoint(t, map[string]any{"messages": fork, "count": 3}), encs[9].M)
	if len(e.Blobs) != 1 || e.Blobs[0].Base != encs[9].M.Ch[1].ID {
		t.Fatalf("fork: blobs %+v, want one append to checkpoint 9's version", e.Blobs)
	}
	// A rewrite that is not an append (an edited message) is written whole.
	edited := append([]any{map[string]any{"role": "user", "content": strings.Repeat("e", 500)}}, msgs[1:]...)
	e = roundTrip(t, s, checkpoint(t, map[string]any{"messages": edited, "count": 3}), parent)
	if len(e.Blobs) != 1 || e.Blobs[0].Base != "" {
		t.Fatalf("edit: blobs %+v, want one whole value", e.Blobs)
	}
	// An unchanged channel writes no blob.
	e = roundTrip(t, s, checkpoint(t, map[string]any{"messages": msgs, "count": 99}), parent)
	if len(e.Blobs) != 0 {
		t.Fatalf("unchanged: blobs %+v", e.Blobs)
	}
}

// The chain is bounded: past MaxDepth appends the value is written whole.
func TestDepthIsBounded(t *testing.T) {
	s := mem{}
	msgs := []any{strings.Repeat("z", 300)}
	var parent *Manifest
	whole := 0
	for i := 0; i < MaxDepth+5; i++ {
		msgs = append(msgs, i)
		e := roundTrip(t, s, checkpoint(t, map[string]any{"messages": msgs}), parent)
		if e.M.Ch[0].D > MaxDepth {
			t.Fatalf("depth %d", e.M.Ch[0].D)
		}
		if e.Blobs[0].Base == "" {
			whole++
		}
		parent = e.M
	}
	if whole != 2 {
		t.Fatalf("%d whole writes, want 2 (the first and after MaxDepth appends)", whole)
	}
}

func TestMaterializeRejectsBrokenChains(t *testing.T) {
	for _, chain := range [][]Blob{
		nil,
		{{ID: "b", Base: "a", Data: []byte("1")}},
		{{ID: "b", Base: "x", Data: []byte("1")}, {ID: "a", Data: []byte("[0]")}},
		{{ID: "b", Base: "a", Data: []byte("1")}, {ID: "a", Data: []byte("{}")}},
	} {
		if _, err := Materialize(chain); err == nil {
			t.Fatalf("%+v: no error", chain)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(`{"values":{"a":[1,2,3]}}`), []byte(`{"values":{"a":[1,2,3,4]}}`))
	f.Add(checkpoint(f, map[string]any{"m": []any{strings.Repeat("q", 300)}}), checkpoint(f, map[string]any{"m": []any{strings.Repeat("q", 300), 1}}))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		s := mem{}
		e := roundTrip(t, s, a, nil)
		roundTrip(t, s, b, e.M)
	})
}

// A thread's values or a run's result, encoded against the checkpoint
// that holds the same state, write no value again and read back exactly.
func TestEncodeObject(t *testing.T) {
	s := mem{}
	msgs := []any{strings.Repeat("v", 1000), 2}
	e := roundTrip(t, s, checkpoint(t, map[string]any{"messages": msgs, "n": 1}), nil)
	for _, doc := range []string{`{"messages":["` + strings.Repeat("v", 1000) + `",2],"n":1}`, `{}`, `[1]`, `{"a":1} `, `"x"`, ``} {
		o := EncodeObject([]byte(doc), e.M)
		s.put(o)
		if o.M == nil {
			if !bytes.Equal(o.Head, []byte(doc)) {
				t.Fatalf("%q: whole data changed", doc)
			}
			continue
		}
		if len(o.Head) != 0 || (strings.HasPrefix(doc, `{"messages"`) && len(o.Blobs) != 0) {
			t.Fatalf("%q: head %q, blobs %d", doc, o.Head, len(o.Blobs))
		}
		got, err := Decode(o.Head, o.M, s.value)
		if err != nil || !bytes.Equal(got, []byte(doc)) {
			t.Fatalf("%q: got %q, %v", doc, got, err)
		}
	}
}

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		in  string
		end int
		ok  bool
	}{
		{`"abc",`, 5, true},
		{`"a\"b",`, 6, true},
		{`"a\\",`, 5, true},
		{`"a\\\"b",`, 8, true},
		{`"abc`, 0, false},
		{`{"a":"}"},`, 9, true},
		{`[1,[2,"]"]],`, 11, true},
		{`123,`, 3, true},
		{`true}`, 4, true},
	} {
		end, ok := skip([]byte(tc.in), 0)
		if end != tc.end || ok != tc.ok {
			t.Errorf("skip(%s) = %d %v, want %d %v", tc.in, end, ok, tc.end, tc.ok)
		}
	}
}
