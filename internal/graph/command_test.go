package graph

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCommandJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Command
		wantErr string
	}{
		{"update object", `{"update": {"b": 2, "a": 1}}`,
			Command{Update: Writes{{"a", json.Number("1")}, {"b", json.Number("2")}}}, ""},
		{"update pairs keep order and repeats", `{"update": [["log", "x"], ["log", "y"]]}`,
			Command{Update: Writes{{"log", "x"}, {"log", "y"}}}, ""},
		{"goto name", `{"goto": "a"}`, Command{Goto: []string{"a"}}, ""},
		{"goto list", `{"goto": ["a", "b"]}`, Command{Goto: []string{"a", "b"}}, ""},
		{"resume value", `{"resume": {"x": 1.5}}`, Command{Resume: map[string]any{"x": json.Number("1.5")}}, ""},
		{"nulls", `{"update": null, "goto": null, "resume": null}`, Command{}, ""},
		{"send is rejected", `{"goto": {"node": "a", "input": {}}}`, Command{}, "sends ({node, input}) are not supported"},
		{"bad pair", `{"update": [["a"]]}`, Command{}, "[key, value] pair"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Command
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestWritesJSONRoundTrip(t *testing.T) {
	ws := Writes{{"log", "x"}, {"log", []any{json.Number("1")}}, {"n", nil}}
	b, err := json.Marshal(ws)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `[["log","x"],["log",[1]],["n",null]]` {
		t.Fatalf("marshal = %s", b)
	}
	var back Writes
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ws) {
		t.Fatalf("round trip = %#v", back)
	}
}

func TestNodesJSON(t *testing.T) {
	for in, want := range map[string]Nodes{`"*"`: All, `["a","b"]`: {"a", "b"}, `null`: nil} {
		var got Nodes
		if err := json.Unmarshal([]byte(in), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s -> %v, %v; want %v", in, got, err, want)
		}
	}
}
