package runs

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestThreadConfigAfterRun: upstream's layering (Runs.put of
// langgraph_runtime_inmem): assistant, then thread, then the run's config;
// configurable is the assistant's under the thread's, never the run's.
func TestThreadConfigAfterRun(t *testing.T) {
	assistant := []byte(`{"tags": ["a"], "recursion_limit": 5, "configurable": {"model": "m", "user_id": "u"}}`)
	for _, tc := range []struct {
		name, current string
		run           map[string]any
		want          string
	}{
		{"first run, nothing set", `{}`, map[string]any{}, `{"tags": ["a"], "recursion_limit": 5, "configurable": {"model": "m", "user_id": "u"}}`},
		{"the thread's keys over the assistant's", `{"tags": ["t"], "configurable": {"model": "n"}}`, map[string]any{},
			`{"tags": ["t"], "recursion_limit": 5, "configurable": {"model": "n", "user_id": "u"}}`},
		{"the run's keys over both, not its configurable", `{"tags": ["t"]}`,
			map[string]any{"recursion_limit": 9, "configurable": map[string]any{"model": "r"}},
			`{"tags": ["t"], "recursion_limit": 9, "configurable": {"model": "m", "user_id": "u"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := threadConfigAfterRun(assistant, tc.run)([]byte(tc.current))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("config %s, want %s", got, tc.want)
			}
		})
	}
	if got, _ := threadConfigAfterRun(nil, map[string]any{})(nil); string(got) != `{"configurable":{}}` {
		t.Errorf("no assistant config, no thread config: %s, want {\"configurable\":{}}", got)
	}
}
