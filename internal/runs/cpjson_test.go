package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

func msg(id, content string) map[string]any {
	return map[string]any{"id": id, "type": "human", "content": content}
}

// The encoder's bytes are json.Marshal's, step after step, whatever the
// values did since the previous checkpoint it encoded.
func TestCheckpointEncoderWritesWhatJSONMarshalWrites(t *testing.T) {
	m1, m2, m3 := msg("1", "hello <b>&</b>"), msg("2", "é\u2028\xff"), msg("3", `quote " back \ slash`)
	states := []struct {
		name   string
		values map[string]any
	}{
		{"first", map[string]any{"messages": []any{m1}, "count": json.Number("1")}},
		{"a message appended", map[string]any{"messages": []any{m1, m2}, "count": json.Number("1")}},
		{"two more, a counter changed", map[string]any{"messages": []any{m1, m2, m3, msg("4", "x")}, "count": json.Number("2")}},
		{"nothing changed", map[string]any{"messages": []any{m1, m2, m3, msg("4", "x")}, "count": json.Number("2")}},
		{"a message edited in the middle", map[string]any{"messages": []any{m1, msg("2", "edited"), m3, msg("4", "x")}, "count": json.Number("2")}},
		{"a message removed", map[string]any{"messages": []any{m1, m3, msg("4", "x")}, "count": json.Number("2")}},
		{"appended after an edit of the prefix", map[string]any{"messages": []any{msg("1", "other"), m3, msg("4", "x"), m2}, "count": json.Number("2")}},
		{"a channel added, keys to escape", map[string]any{"messages": []any{m1}, "count": json.Number("2"), "a<b>": "v", "\"q\"": nil}},
		{"types the engine does not produce", map[string]any{"messages": []any{m1, 2.5, 7}, "count": json.Number("2"), "s": struct{ A int }{1}}},
		{"nil list and map", map[string]any{"messages": []any(nil), "m": map[string]any(nil), "count": true}},
		{"empty list and map", map[string]any{"messages": []any{}, "m": map[string]any{}, "count": false}},
		{"a list grown from empty", map[string]any{"messages": []any{m1, m2}, "m": map[string]any{"k": []any{}}, "count": false}},
		{"a value changing type", map[string]any{"messages": "now a string", "m": map[string]any{"k": map[string]any{}}, "count": "false"}},
		{"no values", map[string]any{}},
		{"nil values", nil},
		{"again", map[string]any{"messages": []any{m1, m2, m3}}},
	}
	var enc cpEncoder
	parent := ""
	for i, st := range states {
		cp := graph.Checkpoint{V: 1, ID: fmt.Sprintf("cp-%d", i), ParentID: parent, CreatedAt: time.Date(2026, 11, 26, 12, 0, i, 0, time.UTC),
			Values: st.values, Next: []string{"echo"}, Tasks: []graph.Task{{ID: "t", Name: "echo"}},
			Metadata: graph.Metadata{Source: "loop", Step: i, Writes: map[string]any{"echo": map[string]any{"values": map[string]any{}}}}}
		parent = cp.ID
		want, err := json.Marshal(cp)
		if err != nil {
			t.Fatal(err)
		}
		before := enc.ch
		got, err := enc.marshal(cp)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s\nwant %s", st.name, got, want)
		}
		// A thread's values from the state after it, and from the state
		// before it (the encoder's before this step).
		for _, ch := range []map[string]chanJSON{enc.ch, before} {
			vals, err := valuesJSON(st.values, ch)
			if want, _ := json.Marshal(st.values); err != nil || !bytes.Equal(vals, want) {
				t.Fatalf("%s: values %s, want %s (%v)", st.name, vals, want, err)
			}
		}
	}
}

// An unchanged value's JSON is reused, a grown list's extended: the
// encoder does not serialize the state again.
func TestCheckpointEncoderReusesUnchangedChannels(t *testing.T) {
	big := msg("1", string(bytes.Repeat([]byte("a"), 1000)))
	var enc cpEncoder
	if _, err := enc.marshal(graph.Checkpoint{ID: "a", Values: map[string]any{"messages": []any{big}, "other": map[string]any{"k": "v"}}}); err != nil {
		t.Fatal(err)
	}
	before := enc.ch
	// A copy, as the engine's clone makes one.
	if _, err := enc.marshal(graph.Checkpoint{ID: "b", Values: map[string]any{"messages": []any{msg("1", big["content"].(string)), msg("2", "b")},
		"other": map[string]any{"k": "v"}}}); err != nil {
		t.Fatal(err)
	}
	if &enc.ch["other"].js[0] != &before["other"].js[0] {
		t.Error("an unchanged channel was serialized again")
	}
	if n := len(enc.ch["messages"].js) - len(before["messages"].js); n <= 0 || !bytes.HasPrefix(enc.ch["messages"].js, before["messages"].js[:len(before["messages"].js)-1]) {
		t.Errorf("the grown list is not the old one extended: %s", enc.ch["messages"].js)
	}
}
