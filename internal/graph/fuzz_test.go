package graph

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzRunInput runs every built-in graph on arbitrary JSON input and
// commands: the engine never panics, reports bad input as a failed outcome,
// and every checkpoint it hands out survives a JSON round trip unchanged.
func FuzzRunInput(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"hi"}]}`, `{"steps":5}`, `{"count":"x"}`,
		`{"steps":1e308}`, `{"request":{"a":[1,2]}}`, `[]`, `null`, `"s"`, `{"messages":"not a list"}`,
		`{"update":{"steps":3},"goto":["inc"]}`, `{"resume":"yes"}`, `{"update":[["count",-1]],"goto":"__end__"}`} {
		f.Add(uint8(0), []byte(s), false)
		f.Add(uint8(1), []byte(s), true)
		f.Add(uint8(2), []byte(s), true)
	}
	graphs := Builtins()
	f.Fuzz(func(t *testing.T, which uint8, raw []byte, asCommand bool) {
		g := graphs[int(which)%len(graphs)]
		var input any
		if asCommand {
			var cmd Command
			if json.Unmarshal(raw, &cmd) != nil {
				return
			}
			input = cmd
		} else if decodeJSON(raw, &input) != nil {
			return
		}
		var seen []Checkpoint
		sink := func(_ context.Context, cp Checkpoint) error {
			seen = append(seen, cp)
			return nil
		}
		cp, out, err := Run(context.Background(), g, nil, input, Options{RecursionLimit: 50}, sink)
		if err != nil {
			t.Fatalf("%s: engine error %v (only ctx or sink errors are allowed)", g.Name(), err)
		}
		if out.Status == Failed && out.Error == nil {
			t.Fatalf("%s: failed without an error", g.Name())
		}
		for _, c := range append(seen, cp) {
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatalf("%s: checkpoint does not encode: %v", g.Name(), err)
			}
			var back Checkpoint
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: checkpoint does not decode: %v", g.Name(), err)
			}
			if again, _ := json.Marshal(back); string(again) != string(b) {
				t.Fatalf("%s: checkpoint changed in a round trip:\n%s\n%s", g.Name(), b, again)
			}
		}
	})
}
