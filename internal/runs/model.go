package runs

import (
	"encoding/json"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Assistant is the wire form of an assistant.
type Assistant struct {
	AssistantID string          `json:"assistant_id"`
	GraphID     string          `json:"graph_id"`
	Config      json.RawMessage `json:"config"`
	Context     json.RawMessage `json:"context"`
	CreatedAt   string          `json:"created_at"`
	UpdatedAt   string          `json:"updated_at"`
	Metadata    json.RawMessage `json:"metadata"`
	Version     int             `json:"version"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
}

// Thread is the wire form of a thread.
type Thread struct {
	ThreadID  string `json:"thread_id"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	// StateUpdatedAt is when the thread's state last changed: its
	// creation (or copy), a run's end, a state update.
	StateUpdatedAt string          `json:"state_updated_at"`
	Metadata       json.RawMessage `json:"metadata"`
	Status         string          `json:"status"`
	Config         json.RawMessage `json:"config"`
	Values         json.RawMessage `json:"values"`
	Interrupts     json.RawMessage `json:"interrupts"`
	// Error is the last run's error, null when it had none (as upstream).
	Error json.RawMessage `json:"error"`
}

// Run is the wire form of a run.
type Run struct {
	RunID             string          `json:"run_id"`
	ThreadID          string          `json:"thread_id"`
	AssistantID       string          `json:"assistant_id"`
	CreatedAt         string          `json:"created_at"`
	UpdatedAt         string          `json:"updated_at"`
	Status            string          `json:"status"`
	Metadata          json.RawMessage `json:"metadata"`
	Kwargs            json.RawMessage `json:"kwargs"`
	MultitaskStrategy string          `json:"multitask_strategy"`
}

// CheckpointRef names a checkpoint (LangGraph's CheckpointConfig).
type CheckpointRef struct {
	ThreadID     string `json:"thread_id"`
	CheckpointNS string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
	// CheckpointMap is left out of a thread's own checkpoints, as upstream
	// leaves it out; a subgraph state's carries it (LangGraph's config).
	CheckpointMap json.RawMessage `json:"checkpoint_map,omitempty"`
}

// ThreadTask is a task of a thread state.
type ThreadTask struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Path       []any             `json:"path"`
	Error      *string           `json:"error"`
	Interrupts []graph.Interrupt `json:"interrupts"`
	// Checkpoint names the subgraph a task runs ({thread_id,
	// checkpoint_ns}, as LangGraph's task state config), when not given
	// as State.
	Checkpoint *TaskCheckpoint `json:"checkpoint"`
	State      any             `json:"state"`
	Result     any             `json:"result"`
}

// TaskCheckpoint is the subgraph a task runs, as LangGraph names it.
type TaskCheckpoint struct {
	ThreadID     string `json:"thread_id"`
	CheckpointNS string `json:"checkpoint_ns"`
}

// ThreadState is the wire form of a checkpoint. A thread without
// checkpoints has null checkpoint, metadata, created_at and checkpoint_id,
// as upstream answers.
type ThreadState struct {
	Values             map[string]any    `json:"values"`
	Next               []string          `json:"next"`
	Tasks              []ThreadTask      `json:"tasks"`
	Checkpoint         *CheckpointRef    `json:"checkpoint"`
	Metadata           map[string]any    `json:"metadata"`
	CreatedAt          *string           `json:"created_at"`
	ParentCheckpoint   *CheckpointRef    `json:"parent_checkpoint"`
	Interrupts         []graph.Interrupt `json:"interrupts"`
	CheckpointID       *string           `json:"checkpoint_id"`
	ParentCheckpointID *string           `json:"parent_checkpoint_id"`
}

// emptyState is the state of a thread without checkpoints.
func emptyState() ThreadState {
	return ThreadState{Values: map[string]any{}, Next: []string{}, Tasks: []ThreadTask{}, Interrupts: []graph.Interrupt{}}
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func rawOr(b []byte, def string) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(def)
	}
	return json.RawMessage(b)
}

func assistantView(a store.Assistant) Assistant {
	var desc *string
	if a.Description != "" {
		d := a.Description
		desc = &d
	}
	return Assistant{
		AssistantID: a.ID, GraphID: a.GraphID, Config: rawOr(a.Config, "{}"), Context: rawOr(a.Context, "{}"),
		CreatedAt: formatTime(a.CreatedAt), UpdatedAt: formatTime(a.UpdatedAt), Metadata: rawOr(a.Metadata, "{}"),
		Version: a.Version, Name: a.Name, Description: desc,
	}
}

func threadView(t store.Thread) Thread {
	return Thread{
		ThreadID: t.ID, CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt),
		StateUpdatedAt: formatTime(t.StateUpdatedAt),
		Metadata:       rawOr(t.Metadata, "{}"), Status: t.Status, Config: rawOr(t.Config, "{}"),
		Values: rawOr(t.Values, "null"), Interrupts: rawOr(t.Interrupts, "{}"), Error: rawOr(t.Error, "null"),
	}
}

func runView(r store.Run) Run {
	return Run{
		RunID: r.ID, ThreadID: r.ThreadID, AssistantID: r.AssistantID,
		CreatedAt: formatTime(r.CreatedAt), UpdatedAt: formatTime(r.UpdatedAt), Status: r.Status,
		Metadata: rawOr(r.Metadata, "{}"), Kwargs: rawOr(r.Kwargs, "{}"), MultitaskStrategy: r.MultitaskStrategy,
	}
}

// stateView turns an engine checkpoint into the API's ThreadState.
func stateView(threadID string, cp graph.Checkpoint) ThreadState {
	ref := func(id string) *CheckpointRef { return &CheckpointRef{ThreadID: threadID, CheckpointID: id} }
	id := cp.ID
	st := ThreadState{
		Values: cp.Values, Next: cp.Next, Tasks: []ThreadTask{}, Checkpoint: ref(cp.ID),
		Metadata: checkpointMetadata(cp.Metadata, len(cp.Native) > 0), Interrupts: cp.PendingInterrupts(), CheckpointID: &id,
	}
	if st.Values == nil {
		st.Values = map[string]any{}
	}
	if st.Next == nil {
		st.Next = []string{}
	}
	if st.Interrupts == nil {
		st.Interrupts = []graph.Interrupt{}
	}
	created := formatTime(cp.CreatedAt)
	st.CreatedAt = &created
	if cp.ParentID != "" {
		st.ParentCheckpoint = ref(cp.ParentID)
		st.ParentCheckpointID = &cp.ParentID
	}
	for _, t := range cp.Tasks {
		task := ThreadTask{ID: t.ID, Name: t.Name, Path: []any{"__pregel_pull", t.Name}, Interrupts: t.Interrupts}
		if len(t.Path) > 0 {
			task.Path = t.Path
		}
		if t.CheckpointNS != "" {
			task.Checkpoint = &TaskCheckpoint{ThreadID: threadID, CheckpointNS: t.CheckpointNS}
		}
		if task.Interrupts == nil {
			task.Interrupts = []graph.Interrupt{}
		}
		if t.Error != nil {
			msg := t.Error.Kind + "(" + t.Error.Message + ")"
			task.Error = &msg
		}
		if t.Result != nil {
			task.Result = t.Result.Writes.Map()
		}
		st.Tasks = append(st.Tasks, task)
	}
	return st
}

// checkpointMetadata is a checkpoint's metadata as LangGraph shows it: the
// engine's keys, and those a client added (which never replace them). A
// LangGraph app's checkpoint (foreign) shows LangGraph's own: no writes
// (LangGraph 1.x keeps none), its parents (a subgraph's parent checkpoints).
func checkpointMetadata(m graph.Metadata, foreign bool) map[string]any {
	out := make(map[string]any, 4+len(m.Extra))
	for k, v := range m.Extra {
		out[k] = v
	}
	out["source"], out["step"], out["parents"] = m.Source, m.Step, map[string]any{}
	if !foreign {
		out["writes"] = m.Writes
	} else if m.Parents != nil {
		out["parents"] = m.Parents
	}
	return out
}
