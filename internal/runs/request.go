package runs

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
)

// RunRequest is the body of every run-creating operation (RunCreateStateful
// and RunCreateStateless). Unknown fields are ignored, as upstream.
type RunRequest struct {
	AssistantID       *string         `json:"assistant_id"`
	Checkpoint        *CheckpointRef  `json:"checkpoint"`
	CheckpointID      *string         `json:"checkpoint_id"`
	Input             json.RawMessage `json:"input"`
	Command           *CommandInput   `json:"command"`
	Metadata          json.RawMessage `json:"metadata"`
	Config            *RunConfig      `json:"config"`
	Context           json.RawMessage `json:"context"`
	Webhook           *string         `json:"webhook"`
	InterruptBefore   json.RawMessage `json:"interrupt_before"`
	InterruptAfter    json.RawMessage `json:"interrupt_after"`
	StreamMode        json.RawMessage `json:"stream_mode"`
	StreamSubgraphs   *bool           `json:"stream_subgraphs"`
	StreamResumable   *bool           `json:"stream_resumable"`
	OnDisconnect      *string         `json:"on_disconnect"`
	FeedbackKeys      []string        `json:"feedback_keys"`
	MultitaskStrategy *string         `json:"multitask_strategy"`
	IfNotExists       *string         `json:"if_not_exists"`
	OnCompletion      *string         `json:"on_completion"`
	AfterSeconds      *float64        `json:"after_seconds"`
	CheckpointDuring  *bool           `json:"checkpoint_during"`
	Durability        *string         `json:"durability"`

	// protocol marks a run started through the thread event protocol
	// (commands.go): its events go to the thread's event log.
	protocol bool
}

// RunConfig is a run's config; keys other than these are kept as given.
type RunConfig struct {
	Tags           []string       `json:"tags"`
	RecursionLimit *int           `json:"recursion_limit"`
	Configurable   map[string]any `json:"configurable"`
}

// CommandInput is a run's command; goto takes a node name or a list of them.
type CommandInput struct {
	Update json.RawMessage `json:"update"`
	Resume json.RawMessage `json:"resume"`
	Goto   json.RawMessage `json:"goto"`
}

// kwargs is what a run keeps of its request: everything the worker needs,
// and the rest of the request so the run record shows what was asked.
type kwargs struct {
	Input           json.RawMessage `json:"input"`
	Command         *CommandInput   `json:"command"`
	Config          map[string]any  `json:"config"`
	Context         json.RawMessage `json:"context"`
	StreamMode      []string        `json:"stream_mode"`
	InterruptBefore graph.Nodes     `json:"interrupt_before"`
	InterruptAfter  graph.Nodes     `json:"interrupt_after"`
	Webhook         *string         `json:"webhook"`
	FeedbackKeys    []string        `json:"feedback_keys"`
	Temporary       bool            `json:"temporary"`
	Subgraphs       bool            `json:"subgraphs"`
	Resumable       bool            `json:"resumable"`
	// Protocol: the run was started through the thread event protocol; its
	// stream is mapped to protocol events kept in the thread's event log.
	Protocol bool `json:"protocol,omitempty"`
	// ProtocolGraph is a protocol run's graph id, which its lifecycle
	// events name from the first (before the worker resolves the graph).
	ProtocolGraph  string `json:"protocol_graph,omitempty"`
	Durability     string `json:"durability"`
	CheckpointID   string `json:"checkpoint_id,omitempty"`
	OnDisconnect   string `json:"on_disconnect"`
	RecursionLimit int    `json:"recursion_limit,omitempty"`
	// GraphRevision is the deployment revision of a deployed graph's run:
	// the run executes on it, even after a redeploy.
	GraphRevision *GraphRevision `json:"graph_revision,omitempty"`
}

var (
	streamModes   = []string{"values", "messages", "messages-tuple", "updates", "events", "debug", "custom", "tasks", "checkpoints"}
	durabilities  = []string{"sync", "async", "exit"}
	maxAfterDelay = 7 * 24 * 3600.0
)

// parsed is a validated run request.
type parsed struct {
	kw           kwargs
	input        any // state object, *graph.Command or nil
	metadata     map[string]any
	multitask    string
	ifNotExists  string
	onCompletion string
	afterSeconds float64
}

// parse applies every request rule that does not need the store. stateless
// selects the rules of POST /runs/*.
func parse(req RunRequest, stateless bool, limits Limits) (parsed, error) {
	var c fail.Checks
	p := parsed{kw: kwargs{Durability: "async", OnDisconnect: "continue", StreamMode: []string{"values"}}}
	c.Add(req.AssistantID == nil || *req.AssistantID == "", "assistant_id", "is required")
	checkMetadata(&c, "metadata", req.Metadata, limits)
	checkObject(&c, "context", req.Context)
	_ = json.Unmarshal(objectOr(req.Metadata), &p.metadata)

	p.multitask = oneOf(&c, "multitask_strategy", req.MultitaskStrategy, multitaskEnqueue, multitasks)
	p.kw.OnDisconnect = oneOf(&c, "on_disconnect", req.OnDisconnect, "continue", []string{"cancel", "continue"})
	if stateless {
		// A stateless run always creates its thread: "create" says so (the
		// Python server sets it on every stateless run, and RemoteGraph
		// sends it); "reject" cannot be honoured.
		c.Add(req.IfNotExists != nil && *req.IfNotExists != "create", "if_not_exists", "applies only to runs on a thread (a stateless run always creates its thread)")
		c.Add(req.Checkpoint != nil || req.CheckpointID != nil, "checkpoint", "applies only to runs on a thread")
		p.onCompletion = oneOf(&c, "on_completion", req.OnCompletion, "delete", []string{"delete", "keep"})
		p.kw.Temporary = p.onCompletion == "delete"
	} else {
		c.Add(req.OnCompletion != nil, "on_completion", "applies only to stateless runs (POST /runs/...)")
		p.ifNotExists = oneOf(&c, "if_not_exists", req.IfNotExists, "reject", []string{"create", "reject"})
	}
	if req.Durability != nil {
		p.kw.Durability = oneOf(&c, "durability", req.Durability, "async", durabilities)
	} else if req.CheckpointDuring != nil && !*req.CheckpointDuring {
		p.kw.Durability = "exit" // LangGraph's meaning of checkpoint_during=false
	}
	if req.AfterSeconds != nil {
		p.afterSeconds = *req.AfterSeconds
		c.Add(p.afterSeconds < 0 || p.afterSeconds > maxAfterDelay, "after_seconds", "must be between 0 and %v", maxAfterDelay)
	}
	p.kw.Webhook = req.Webhook
	p.kw.StreamMode = parseStreamMode(&c, req.StreamMode)
	p.kw.Subgraphs = req.StreamSubgraphs != nil && *req.StreamSubgraphs
	p.kw.Resumable = req.StreamResumable != nil && *req.StreamResumable
	p.kw.FeedbackKeys = req.FeedbackKeys
	p.kw.InterruptBefore = parseNodes(&c, "interrupt_before", req.InterruptBefore)
	p.kw.InterruptAfter = parseNodes(&c, "interrupt_after", req.InterruptAfter)
	p.kw.Context = nullIsNil(req.Context)
	p.kw.Config = map[string]any{}
	if cfg := req.Config; cfg != nil {
		if cfg.RecursionLimit != nil {
			// The engine's work grows with it: a server-side maximum keeps
			// one request from asking for unbounded steps.
			maxLimit := limits.maxRecursionLimit()
			c.Add(*cfg.RecursionLimit < 1 || *cfg.RecursionLimit > maxLimit, "config.recursion_limit",
				"must be between 1 and %d (this server's maximum), got %d", maxLimit, *cfg.RecursionLimit)
			p.kw.RecursionLimit = *cfg.RecursionLimit
			p.kw.Config["recursion_limit"] = *cfg.RecursionLimit
		}
		if cfg.Tags != nil {
			p.kw.Config["tags"] = cfg.Tags
		}
		if len(cfg.Configurable) > 0 {
			p.kw.Config["configurable"] = cfg.Configurable
			if len(p.kw.Context) > 0 && string(p.kw.Context) != "{}" {
				return p, fail.BadRequest("Cannot specify both configurable and context. Prefer setting context alone. Context was introduced in LangGraph 0.6.0 and is the long term planned replacement for configurable.")
			}
		}
	}
	p.kw.CheckpointID = checkpointID(&c, req)
	if err := c.Err(); err != nil {
		return p, err
	}

	if req.Command != nil {
		if stateless && len(req.Command.Resume) > 0 && string(req.Command.Resume) != "null" {
			return p, fail.BadRequest("You must provide a thread_id when resuming.")
		}
		cmd, err := parseCommand(*req.Command)
		if err != nil {
			return p, err
		}
		p.input = cmd
		p.kw.Command = req.Command
	} else if len(req.Input) > 0 && string(req.Input) != "null" {
		var in any
		if err := json.Unmarshal(req.Input, &in); err != nil {
			return p, fail.Invalid("input", "is not valid JSON")
		}
		p.input = in
		p.kw.Input = req.Input
	}
	return p, nil
}

func oneOf(c *fail.Checks, field string, v *string, def string, allowed []string) string {
	if v == nil {
		return def
	}
	c.Add(!slices.Contains(allowed, *v), field, "must be one of %s", strings.Join(allowed, ", "))
	return *v
}

func parseStreamMode(c *fail.Checks, raw json.RawMessage) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{"values"}
	}
	var modes []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		modes = []string{one}
	} else if json.Unmarshal(raw, &modes) != nil {
		c.Add(true, "stream_mode", "must be a stream mode or a list of them")
		return nil
	}
	for _, m := range modes {
		c.Add(!slices.Contains(streamModes, m), "stream_mode", "%q is not one of %s", m, strings.Join(streamModes, ", "))
	}
	if len(modes) == 0 {
		modes = []string{"values"}
	}
	return modes
}

func parseNodes(c *fail.Checks, field string, raw json.RawMessage) graph.Nodes {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n graph.Nodes
	if err := json.Unmarshal(raw, &n); err != nil {
		c.Add(true, field, `must be "*" or a list of node names`)
	}
	return n
}

func checkpointID(c *fail.Checks, req RunRequest) string {
	id := ""
	if req.CheckpointID != nil {
		id = *req.CheckpointID
	}
	if req.Checkpoint != nil && req.Checkpoint.CheckpointID != "" {
		id = req.Checkpoint.CheckpointID
	}
	if id != "" {
		_, err := uuid.Parse(id)
		c.Add(err != nil, "checkpoint_id", "Invalid checkpoint ID: must be a UUID")
	}
	return id
}

// parseCommand maps the API's command onto the engine's: goto as a name or
// a list of names (Send objects are not supported), update as an object or
// a list of [key, value] pairs.
func parseCommand(in CommandInput) (*graph.Command, error) {
	var c fail.Checks
	cmd := &graph.Command{}
	if len(in.Update) > 0 && string(in.Update) != "null" {
		c.Add(json.Unmarshal(in.Update, &cmd.Update) != nil, "command.update", "must be an object or a list of [key, value] pairs")
	}
	if len(in.Goto) > 0 && string(in.Goto) != "null" {
		var one string
		if json.Unmarshal(in.Goto, &one) == nil {
			cmd.Goto = []string{one}
		} else {
			c.Add(json.Unmarshal(in.Goto, &cmd.Goto) != nil, "command.goto", "must be a node name or a list of node names (Send objects are not supported)")
		}
	}
	if len(in.Resume) > 0 && string(in.Resume) != "null" {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(in.Resume)))
		dec.UseNumber()
		c.Add(dec.Decode(&v) != nil, "command.resume", "is not valid JSON")
		cmd.Resume = v
	}
	return cmd, c.Err()
}
