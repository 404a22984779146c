package graph

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// mixedGraph exercises most of the engine in one run: parallel nodes,
// reducers, a conditional loop, and a dynamic interrupt.
func mixedGraph() *Graph {
	return NewBuilder("mixed").
		AddChannel("log", Channel{Reducer: Append}).
		AddChannel("total", Channel{Reducer: Add, Default: 0}).
		AddChannel("answer", Channel{}).
		AddNode("left", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"log": "left", "total": 1.5}), nil
		}).
		AddNode("right", func(context.Context, map[string]any, *Runtime) (*Command, error) {
			return Update(map[string]any{"log": []any{"right", map[string]any{"n": 1}}, "total": 2}), nil
		}).
		AddNode("ask", func(_ context.Context, s map[string]any, rt *Runtime) (*Command, error) {
			return Update(map[string]any{"answer": rt.Interrupt(map[string]any{"total": s["total"]})}), nil
		}).
		AddEdge(Start, "left").AddEdge(Start, "right").
		AddConditionalEdges("left", func(s map[string]any) ([]string, error) {
			if total, _ := Float(s["total"]); total < 5 {
				return []string{"left"}, nil
			}
			return []string{"ask"}, nil
		}, "left", "ask").
		AddEdge("ask", End).
		MustCompile()
}

// comparable strips what legitimately differs between two executions of the
// same run: ids, parent ids and timestamps.
func comparable(t *testing.T, cps []Checkpoint) string {
	t.Helper()
	var out []map[string]any
	for _, cp := range cps {
		out = append(out, map[string]any{
			"values": cp.Values, "next": cp.Next, "metadata": cp.Metadata,
			"interrupts": len(cp.PendingInterrupts()), "tasks": len(cp.Tasks),
		})
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func roundTrip(t *testing.T, cp Checkpoint) Checkpoint {
	t.Helper()
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	var back Checkpoint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cp) {
		again, _ := json.Marshal(back)
		t.Fatalf("round trip changed the checkpoint:\n%s\n%s", b, again)
	}
	return back
}

// TestStepThroughJSON drives a run the way the Step Functions worker does,
// one Step per "invocation" with the checkpoint carried as JSON, and checks
// it against an uninterrupted Run.
func TestStepThroughJSON(t *testing.T) {
	g := mixedGraph()
	input := map[string]any{"log": "start"}
	resume := Command{Resume: "yes"}

	direct := &recorder{}
	cp, out, err := Run(context.Background(), g, nil, input, Options{}, direct.sink)
	if err != nil {
		t.Fatal(err)
	}
	assertStatus(t, out, Interrupted)
	final, out, err := Run(context.Background(), g, &cp, resume, Options{}, direct.sink)
	if err != nil {
		t.Fatal(err)
	}
	assertStatus(t, out, Done)
	assertJSON(t, final.Values, `{"answer":"yes","log":["start","left","right",{"n":1},"left"],"total":5}`)

	var stepped []Checkpoint
	cp, out = Begin(g, nil, input, Options{})
	stepped = append(stepped, cp)
	for inputs := []any{resume}; ; {
		for out.Status == Running {
			cp, out, err = Step(context.Background(), g, roundTrip(t, cp), Options{})
			if err != nil {
				t.Fatal(err)
			}
			stepped = append(stepped, cp)
		}
		if len(inputs) == 0 {
			break
		}
		cp, out = Begin(g, ptr(roundTrip(t, cp)), inputs[0], Options{})
		stepped = append(stepped, cp)
		inputs = inputs[1:]
	}
	assertStatus(t, out, Done)
	if got, want := comparable(t, stepped), comparable(t, direct.cps); got != want {
		t.Fatalf("stepping through JSON diverged:\n got %s\nwant %s", got, want)
	}
	roundTrip(t, cp)
}

func ptr[T any](v T) *T { return &v }

func TestCheckpointJSONShape(t *testing.T) {
	cp, _ := run(t, approvalGraph(), nil, map[string]any{"request": "x"}, Options{})
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	var shape map[string]any
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v", "id", "parent_id", "created_at", "values", "next", "tasks", "metadata", "run_start_step"} {
		if _, ok := shape[key]; !ok {
			t.Errorf("checkpoint JSON has no %q: %s", key, b)
		}
	}
	assertJSON(t, shape["metadata"], `{"source":"loop","step":0,"writes":{"__start__":{"request":"x"}},"parents":{}}`)
	task := shape["tasks"].([]any)[0].(map[string]any)
	if task["name"] != "ask" || len(task["interrupts"].([]any)) != 1 {
		t.Fatalf("task = %v", task)
	}
	if id, err := uuid.Parse(cp.ID); err != nil || id.Version() != 7 {
		t.Fatalf("id %q is not a uuid v7 (%v)", cp.ID, err)
	}
}

func TestCheckpointIDsAreTimeOrdered(t *testing.T) {
	r := &recorder{}
	if _, _, err := Run(context.Background(), counterGraph(), nil, map[string]any{"steps": 5}, Options{}, r.sink); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(r.cps); i++ {
		prev, cur := r.cps[i-1], r.cps[i]
		if cur.ParentID != prev.ID || cur.ID <= prev.ID || cur.Metadata.Step != prev.Metadata.Step+1 {
			t.Fatalf("checkpoint %d (%s, parent %s, step %d) does not follow %s (step %d)",
				i, cur.ID, cur.ParentID, cur.Metadata.Step, prev.ID, prev.Metadata.Step)
		}
	}
	if first := r.cps[0]; first.Metadata.Source != SourceInput || first.Metadata.Step != -1 || first.ParentID != "" {
		t.Fatalf("first checkpoint = %+v", first.Metadata)
	}
}

func TestForkFromOlderCheckpoint(t *testing.T) {
	g := counterGraph()
	r := &recorder{}
	if _, _, err := Run(context.Background(), g, nil, map[string]any{"steps": 3}, Options{}, r.sink); err != nil {
		t.Fatal(err)
	}
	var older Checkpoint
	for _, cp := range r.cps {
		if cp.Metadata.Step == 1 {
			older = cp
		}
	}
	assertJSON(t, older.Values, `{"count":1,"steps":3}`)

	// Resuming an older checkpoint replays from there on a new branch.
	forked := &recorder{}
	cp, out, err := Run(context.Background(), g, &older, nil, Options{}, forked.sink)
	if err != nil {
		t.Fatal(err)
	}
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"count":3,"steps":3}`)
	if first := forked.cps[1]; first.ParentID != older.ID || first.Metadata.Step != 2 {
		t.Fatalf("fork's first new checkpoint: parent %s step %d", first.ParentID, first.Metadata.Step)
	}
	for _, c := range forked.cps[1:] {
		for _, o := range r.cps {
			if c.ID == o.ID {
				t.Fatalf("fork overwrote checkpoint %s", c.ID)
			}
		}
	}

	// A fork may change the state on the way.
	cp, out = run(t, g, &older, Command{Update: WritesOf(map[string]any{"steps": 5})}, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"count":5,"steps":5}`)
}

func TestUpdateState(t *testing.T) {
	g := counterGraph()
	done, _ := run(t, g, nil, map[string]any{"steps": 3}, Options{})

	// as_node inferred from the last step (inc), whose router now loops.
	cp, err := UpdateState(g, &done, map[string]any{"steps": 5}, "")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Metadata.Source != SourceUpdate || cp.ParentID != done.ID {
		t.Fatalf("metadata = %+v", cp.Metadata)
	}
	assertJSON(t, cp.Metadata.Writes, `{"inc":{"steps":5}}`)
	assertJSON(t, cp.Next, `["inc"]`)
	cp, out := run(t, g, &cp, nil, Options{})
	assertStatus(t, out, Done)
	assertJSON(t, cp.Values, `{"count":5,"steps":5}`)

	// Reducers apply; End leaves nothing to run.
	cp, err = UpdateState(g, &cp, map[string]any{"count": 10}, End)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, cp.Values, `{"count":15,"steps":5}`)
	assertJSON(t, cp.Next, `[]`)

	fresh, err := UpdateState(g, nil, map[string]any{"steps": 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, fresh.Next, `["inc"]`)

	tests := []struct {
		name   string
		from   *Checkpoint
		values any
		asNode string
		want   string
	}{
		{"unknown key", &done, map[string]any{"nope": 1}, "inc", "'nope'"},
		{"unknown node", &done, map[string]any{}, "zz", `no node "zz"`},
		{"not an object", &done, []any{1}, "inc", "Expected an object"},
		{"ambiguous", ptr(parallelDone(t)), map[string]any{}, "", "Ambiguous update"},
	}
	for _, tt := range tests {
		_, err := UpdateState(g, tt.from, tt.values, tt.asNode)
		if err == nil || !strings.Contains(err.Error(), tt.want) || asError(err).Kind != KindInvalidUpdate {
			t.Errorf("%s: err = %v, want InvalidUpdateError with %q", tt.name, err, tt.want)
		}
	}
}

// parallelDone is a counter-compatible checkpoint whose last step had two
// writers.
func parallelDone(t *testing.T) Checkpoint {
	cp, _ := run(t, counterGraph(), nil, map[string]any{"steps": 1}, Options{})
	cp.Metadata.Writes = map[string]any{"inc": nil, "__start__": nil}
	return cp
}

func TestCheckpointFromAnotherGraphIsRejected(t *testing.T) {
	cp, _ := run(t, approvalGraph(), nil, map[string]any{"request": "x"}, Options{})
	_, out, err := Step(context.Background(), counterGraph(), cp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	assertError(t, out, KindValue, "")
	_, out = Begin(counterGraph(), &cp, nil, Options{})
	assertError(t, out, KindValue, "")
	_, out, _ = Step(context.Background(), counterGraph(), Checkpoint{}, Options{})
	assertError(t, out, KindValue, "")
}

func TestStepDoesNotChangeItsInput(t *testing.T) {
	var calls atomic.Int32
	g := NewBuilder("q").AddChannel("answers", Channel{}).
		AddNode("ask", twoQuestions(&calls)).AddEdge(Start, "ask").MustCompile()
	cp, _ := Begin(g, nil, map[string]any{}, Options{})
	cp, _, _ = Step(context.Background(), g, cp, Options{})
	before, _ := json.Marshal(cp)
	next, out, _ := Step(context.Background(), g, cp, Options{})
	assertStatus(t, out, Interrupted)
	after, _ := json.Marshal(cp)
	if string(before) != string(after) || next.ID != cp.ID || !out.Changed {
		t.Fatalf("Step changed its input or lost the checkpoint id:\n%s\n%s", before, after)
	}
}
