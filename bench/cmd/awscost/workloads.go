package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/stepgraph/stepgraph/bench/cmd/awscost/internal/chatgraph"
)

// CounterSteps is the counter workload's steps, as in bench/cmd/loadgen.
const CounterSteps = 20

// A Workload is one iteration of bench/cmd/loadgen's workload of the same
// name, on the AWS path: the same requests (a thread is created first where
// loadgen creates one) and the same checks on the answers.
type Workload struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// AgentRuns is what LangSmith Deployment bills for one iteration: one
	// Agent Run per run, and a resume after an interrupt is a run of its
	// own.
	AgentRuns int `json:"agent_runs"`
	// Variant: not one of loadgen's workloads, a what-if for the design
	// notes (not used for the targets).
	Variant bool `json:"variant,omitempty"`
	// Do sends the iteration's requests through do.
	Do func(do doFunc, tag string) error `json:"-"`
}

type doFunc func(method, path string, body any) (Request, error)

var workloads = []*Workload{
	{Name: "echo", Title: "echo: stateless POST /runs/wait", AgentRuns: 1, Do: doEcho},
	{Name: "counter", Title: fmt.Sprintf("counter/%d: POST /threads, then POST /threads/{id}/runs/wait", CounterSteps), AgentRuns: 1, Do: doCounter},
	{Name: "approval", Title: "approval: POST /threads, runs/wait to the interrupt, runs/wait with command.resume", AgentRuns: 2, Do: doApproval},
	{Name: "counter-exit", Title: fmt.Sprintf("counter/%d with \"durability\": \"exit\" (variant: checkpoints written when the run ends)", CounterSteps),
		AgentRuns: 1, Variant: true, Do: func(do doFunc, tag string) error { return counter(do, "exit") }},
	{Name: "chat-50k", Title: "chat turn, three nodes, 50 KB of state: POST /threads, then one runs/wait on the three-node chat graph (context, respond, remember: three super-steps, three checkpoints) with a 25 KB message (issue 14's chat turn)",
		AgentRuns: 1, Variant: true, Do: func(do doFunc, tag string) error { return chat(do, chatgraph.Name, tag, 1, 25_000) }},
	{Name: "state-1mb", Title: "a run with 1 MB of state: POST /threads, then one runs/wait on echo with a 500 KB message (the message and its echo; variant: issue 14's realistic sizes, through the payload store)",
		AgentRuns: 1, Variant: true, Do: func(do doFunc, tag string) error { return chat(do, "echo", tag, 1, 500_000) }},
	{Name: "conversation-20", Title: "20-turn conversation on the three-node chat graph: POST /threads, then 20 runs/wait with 1.25 KB messages (50 KB of state at the end; issue 14's conversation)",
		AgentRuns: 20, Variant: true, Do: func(do doFunc, tag string) error { return chat(do, chatgraph.Name, tag, 20, 1_250) }},
}

// chat holds a conversation with assistant (echo, or the three-node chat
// graph, which answers as echo does) on a new thread: turns runs/wait,
// each with a user message of size bytes; the state grows by about twice
// size a turn (the message and its echo).
func chat(do doFunc, assistant, tag string, turns, size int) error {
	tid, err := createThread(do)
	if err != nil {
		return err
	}
	var want []any
	for i := range turns {
		content := fmt.Sprintf("%s %d ", tag, i)
		content += strings.Repeat("x", max(size-len(content), 0))
		r, err := do("POST", "/threads/"+tid+"/runs/wait", map[string]any{
			"assistant_id": assistant,
			"input":        map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}},
		})
		if err != nil {
			return err
		}
		want = append(want, map[string]any{"role": "user", "content": content},
			map[string]any{"role": "assistant", "content": "echo: " + content})
		if err := expectMessages(r.body, want); err != nil {
			return fmt.Errorf("chat turn %d: %w", i, err)
		}
	}
	return nil
}

// expectMessages checks the roles and contents of a state's messages (the
// messages reducer adds ids and types).
func expectMessages(body string, want []any) error {
	var got struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &got); err != nil || len(got.Messages) != len(want) {
		return fmt.Errorf("%w: %d messages in %s, want %d", errWrong, len(got.Messages), clip(body), len(want))
	}
	for i, w := range want {
		wm := w.(map[string]any)
		if got.Messages[i]["content"] != wm["content"] {
			return fmt.Errorf("%w: message %d differs", errWrong, i)
		}
	}
	return nil
}

func workloadByName(name string) *Workload {
	for _, w := range workloads {
		if w.Name == name {
			return w
		}
	}
	return nil
}

func doEcho(do doFunc, tag string) error {
	content := "hi " + tag
	r, err := do("POST", "/runs/wait", map[string]any{
		"assistant_id": "echo",
		"input":        map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}},
	})
	if err != nil {
		return err
	}
	return expect("echo", r.body, map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": content},
		map[string]any{"role": "assistant", "content": "echo: " + content},
	}})
}

func createThread(do doFunc) (string, error) {
	r, err := do("POST", "/threads", map[string]any{})
	if err != nil {
		return "", err
	}
	var t struct {
		ThreadID string `json:"thread_id"`
	}
	if json.Unmarshal([]byte(r.body), &t) != nil || t.ThreadID == "" {
		return "", fmt.Errorf("POST /threads: no thread_id in %s", clip(r.body))
	}
	return t.ThreadID, nil
}

func doCounter(do doFunc, _ string) error { return counter(do, "") }

// counter runs counter/20 on a new thread, with durability when not "".
func counter(do doFunc, durability string) error {
	tid, err := createThread(do)
	if err != nil {
		return err
	}
	body := map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": CounterSteps}}
	if durability != "" {
		body["durability"] = durability
	}
	r, err := do("POST", "/threads/"+tid+"/runs/wait", body)
	if err != nil {
		return err
	}
	return expect("counter", r.body, map[string]any{"count": CounterSteps, "steps": CounterSteps})
}

func doApproval(do doFunc, tag string) error {
	tid, err := createThread(do)
	if err != nil {
		return err
	}
	request, answer := "deploy "+tag, "yes "+tag
	path := "/threads/" + tid + "/runs/wait"
	r, err := do("POST", path, map[string]any{"assistant_id": "approval", "input": map[string]any{"request": request}})
	if err != nil {
		return err
	}
	var got struct {
		Request   string `json:"request"`
		Interrupt []struct {
			Value any `json:"value"`
		} `json:"__interrupt__"`
	}
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || got.Request != request || len(got.Interrupt) != 1 ||
		!jsonEqual(got.Interrupt[0].Value, map[string]any{"question": "approve " + request + "?"}) {
		return fmt.Errorf("approval interrupt: %w: %s", errWrong, clip(r.body))
	}
	r, err = do("POST", path, map[string]any{"assistant_id": "approval", "command": map[string]any{"resume": answer}})
	if err != nil {
		return err
	}
	return expect("approval resume", r.body, map[string]any{"request": request, "answer": answer})
}

func expect(what, body string, want any) error {
	var got any
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &got); err != nil || !jsonEqual(got, want) {
		w, _ := json.Marshal(want)
		return fmt.Errorf("%s: %w: got %s, want %s", what, errWrong, clip(body), w)
	}
	return nil
}

func jsonEqual(got, want any) bool {
	b, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var w any
	if json.Unmarshal(b, &w) != nil {
		return false
	}
	g, err := json.Marshal(got)
	if err != nil {
		return false
	}
	var gg any
	if json.Unmarshal(g, &gg) != nil {
		return false
	}
	return reflect.DeepEqual(gg, w)
}
