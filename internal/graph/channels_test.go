package graph

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestReducers(t *testing.T) {
	n := func(s string) json.Number { return json.Number(s) }
	tests := []struct {
		name    string
		channel Channel
		cur     any
		has     bool
		writes  []any
		want    string // JSON of the result
		wantErr string
	}{
		{"last value replaces", Channel{}, "old", true, []any{"new"}, `"new"`, ""},
		{"last value from nothing", Channel{Reducer: LastValue}, nil, false, []any{n("1")}, `1`, ""},
		{"last value twice in a step", Channel{}, nil, false, []any{"a", "b"}, "", "Can receive only one value per step"},
		{"append list extends", Channel{Reducer: Append}, []any{"a"}, true, []any{[]any{"b", "c"}}, `["a","b","c"]`, ""},
		{"append single value", Channel{Reducer: Append}, []any{"a"}, true, []any{"b"}, `["a","b"]`, ""},
		{"append from nothing, in write order", Channel{Reducer: Append}, nil, false, []any{"x", []any{"y"}, "z"}, `["x","y","z"]`, ""},
		{"append to a non-list", Channel{Reducer: Append}, "s", true, []any{"b"}, "", "not a list"},
		{"add integers stays exact", Channel{Reducer: Add}, n("9007199254740993"), true, []any{n("1")}, `9007199254740994`, ""},
		{"add from nothing", Channel{Reducer: Add}, nil, false, []any{n("2"), n("3")}, `5`, ""},
		{"add floats", Channel{Reducer: Add}, n("0.5"), true, []any{n("1.5")}, `2`, ""},
		{"add mixed", Channel{Reducer: Add}, n("1"), true, []any{n("0.25")}, `1.25`, ""},
		{"add overflow falls back to float", Channel{Reducer: Add}, n("9223372036854775807"), true, []any{n("1")}, `9223372036854776000`, ""},
		{"add a string", Channel{Reducer: Add}, n("1"), true, []any{"x"}, "", "needs a number"},
		{"messages replace by id, append new", Channel{Reducer: Messages},
			[]any{map[string]any{"id": "1", "content": "a"}, map[string]any{"id": "2", "content": "b"}}, true,
			[]any{[]any{map[string]any{"id": "1", "content": "A"}, map[string]any{"id": "3", "content": "c"}}},
			`[{"id":"1","content":"A"},{"id":"2","content":"b"},{"id":"3","content":"c"}]`, ""},
		{"messages single message", Channel{Reducer: Messages}, nil, false,
			[]any{map[string]any{"id": "9", "content": "x"}}, `[{"id":"9","content":"x"}]`, ""},
		{"messages remove", Channel{Reducer: Messages},
			[]any{map[string]any{"id": "1"}, map[string]any{"id": "2"}}, true,
			[]any{map[string]any{"type": "remove", "id": "1"}}, `[{"id":"2"}]`, ""},
		{"messages remove unknown", Channel{Reducer: Messages}, []any{}, true,
			[]any{map[string]any{"type": "remove", "id": "1"}}, "", "no such message"},
		{"messages must be objects", Channel{Reducer: Messages}, nil, false, []any{"hi"}, "", "must be an object"},
		{"messages id must be a string", Channel{Reducer: Messages}, nil, false,
			[]any{map[string]any{"id": n("1")}}, "", "id must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.channel.reduce("k", tt.cur, tt.has, tt.writes)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || asError(err).Kind != KindInvalidUpdate {
					t.Fatalf("err = %v, want InvalidUpdateError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tt.want)
		})
	}
}

func TestMessagesAssignIDs(t *testing.T) {
	cur := []any{map[string]any{"content": "old"}}
	writes := []any{map[string]any{"content": "new"}}
	got, err := Channel{Reducer: Messages}.reduce("messages", cur, true, writes)
	if err != nil {
		t.Fatal(err)
	}
	list := got.([]any)
	if len(list) != 2 {
		t.Fatalf("got %v", list)
	}
	ids := map[string]bool{}
	for _, m := range list {
		id, _ := m.(map[string]any)["id"].(string)
		if len(id) != 36 {
			t.Fatalf("message %v has no uuid id", m)
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Fatalf("ids are not distinct: %v", list)
	}
	if _, has := writes[0].(map[string]any)["id"]; has {
		t.Fatal("the reducer changed the written message in place")
	}
}

func TestChannelDefaultsAndUnknownKeys(t *testing.T) {
	g := NewBuilder("d").
		AddChannel("count", Channel{Reducer: Add, Default: 0}).
		AddChannel("items", Channel{Reducer: Append, Default: []string{}}).
		AddChannel("name", Channel{}).
		AddNode("n", func(context.Context, map[string]any, *Runtime) (*Command, error) { return nil, nil }).
		AddEdge(Start, "n").MustCompile()
	cp, out := run(t, g, nil, map[string]any{}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"count":0,"items":[]}`)

	_, out = run(t, g, nil, map[string]any{"nope": 1}, Options{})
	assertError(t, out, KindInvalidUpdate, "")
	if !strings.Contains(out.Error.Message, "'nope'") {
		t.Errorf("message %q does not name the key", out.Error.Message)
	}

	_, err := NewBuilder("bad").AddChannel("c", Channel{Reducer: Add, Default: "x"}).
		AddNode("n", logNode("n")).AddEdge(Start, "n").Compile()
	if err == nil || !strings.Contains(err.Error(), "default does not suit") {
		t.Fatalf("err = %v", err)
	}
}
