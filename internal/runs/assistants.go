package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// graphNamespace is the namespace of default assistant ids, as in both
// upstream servers: uuid5(graphNamespace, graph_id). It is not RFC 4122's
// NAMESPACE_URL (6ba7b811-...).
var graphNamespace = uuid.MustParse("6ba7b821-9dad-11d1-80b4-00c04fd430c8")

// DefaultAssistantID is the id of a graph's system assistant.
func DefaultAssistantID(graphID string) string {
	return uuid.NewSHA1(graphNamespace, []byte(graphID)).String()
}

// AssistantInput creates an assistant.
type AssistantInput struct {
	AssistantID *string         `json:"assistant_id"`
	GraphID     *string         `json:"graph_id"`
	Config      json.RawMessage `json:"config"`
	Context     json.RawMessage `json:"context"`
	Metadata    json.RawMessage `json:"metadata"`
	IfExists    *string         `json:"if_exists"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
}

// AssistantSearch filters assistants.
type AssistantSearch struct {
	GraphID  string          `json:"graph_id"`
	Name     string          `json:"name"`
	Metadata json.RawMessage `json:"metadata"`
	Limit    int             `json:"limit"`
	Offset   int             `json:"offset"`
	// Select names the fields of each assistant to answer (all when empty).
	Select []string `json:"select"`
}

// defaults remembers the organizations whose system assistants exist.
type defaults struct{ done sync.Map }

// ensureDefaults creates the system assistant of every registered graph in
// the organization, once per process (creation is idempotent across them).
func (s *Service) ensureDefaults(ctx context.Context, orgID string) error {
	names := s.Graphs.Names()
	key := orgID + "|" + strings.Join(names, ",")
	if _, ok := s.defaults.done.Load(key); ok {
		return nil
	}
	now := s.now()
	for _, name := range names {
		a := store.Assistant{
			ID: DefaultAssistantID(name), OrgID: orgID, GraphID: name, Name: name,
			Config: []byte("{}"), Context: []byte("{}"), Metadata: []byte(`{"created_by":"system"}`),
			Version: 1, CreatedAt: now, UpdatedAt: now,
		}
		if g, ok := s.Graphs.Get(name); ok {
			a.Description = g.Description()
		}
		if err := s.Store.CreateAssistant(ctx, a); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	s.defaults.done.Store(key, true)
	return nil
}

// CreateAssistant stores a new assistant of a registered graph.
func (s *Service) CreateAssistant(ctx context.Context, orgID string, in AssistantInput) (Assistant, error) {
	var c fail.Checks
	c.Add(in.GraphID == nil || *in.GraphID == "", "graph_id", "is required")
	if in.GraphID != nil && *in.GraphID != "" {
		_, ok := s.Graphs.Get(*in.GraphID)
		if !ok {
			deployed, err := s.isDeployed(ctx, orgID, *in.GraphID)
			if err != nil {
				return Assistant{}, err
			}
			ok = deployed
		}
		if !ok {
			names, err := s.graphNames(ctx, orgID)
			if err != nil {
				return Assistant{}, err
			}
			c.Add(true, "graph_id", "must be one of the registered graphs: %s", strings.Join(names, ", "))
		}
	}
	id := uuid.NewString()
	if in.AssistantID != nil {
		_, err := uuid.Parse(*in.AssistantID)
		c.Add(err != nil, "assistant_id", "must be a UUID")
		id = strings.ToLower(*in.AssistantID)
	}
	ifExists := deref(in.IfExists, "raise")
	c.Add(ifExists != "raise" && ifExists != "do_nothing", "if_exists", "must be one of raise, do_nothing")
	checkObject(&c, "config", in.Config)
	checkObject(&c, "context", in.Context)
	checkMetadata(&c, "metadata", in.Metadata, s.Limits)
	if err := c.Err(); err != nil {
		return Assistant{}, err
	}
	if err := s.ensureDefaults(ctx, orgID); err != nil {
		return Assistant{}, err
	}
	now := s.now()
	a := store.Assistant{ID: id, OrgID: orgID, GraphID: *in.GraphID, Name: deref(in.Name, "Untitled"),
		Description: deref(in.Description, ""), Config: objectOr(in.Config), Context: objectOr(in.Context),
		Metadata: objectOr(in.Metadata), Version: 1, CreatedAt: now, UpdatedAt: now}
	err := s.Store.CreateAssistant(ctx, a)
	if errors.Is(err, store.ErrConflict) {
		if ifExists == "do_nothing" {
			return s.GetAssistant(ctx, orgID, id)
		}
		return Assistant{}, fail.Conflict("assistant %s already exists", id)
	}
	if err != nil {
		return Assistant{}, err
	}
	return assistantView(a), nil
}

// GetAssistant returns an assistant by id or graph name.
func (s *Service) GetAssistant(ctx context.Context, orgID, id string) (Assistant, error) {
	a, err := s.resolveAssistant(ctx, orgID, id)
	if err != nil {
		return Assistant{}, err
	}
	return assistantView(a), nil
}

// SearchAssistants lists assistants, newest first.
func (s *Service) SearchAssistants(ctx context.Context, orgID string, in AssistantSearch) ([]Assistant, error) {
	var c fail.Checks
	c.Add(in.Limit < 0 || in.Limit > 1000, "limit", "must be between 1 and 1000")
	c.Add(in.Offset < 0, "offset", "must be >= 0")
	checkObject(&c, "metadata", in.Metadata)
	if err := c.Err(); err != nil {
		return nil, err
	}
	if err := s.ensureDefaults(ctx, orgID); err != nil {
		return nil, err
	}
	list, err := s.Store.SearchAssistants(ctx, orgID, store.AssistantFilter{
		GraphID: in.GraphID, NameContains: in.Name, Metadata: nullIsNil(in.Metadata), Limit: in.Limit, Offset: in.Offset})
	if err != nil {
		return nil, err
	}
	out := make([]Assistant, 0, len(list))
	for _, a := range list {
		out = append(out, assistantView(a))
	}
	return out, nil
}

// DeleteAssistant removes an assistant.
func (s *Service) DeleteAssistant(ctx context.Context, orgID, id string) error {
	a, err := s.resolveAssistant(ctx, orgID, id)
	if err != nil {
		return err
	}
	if isSystem(a) {
		return errSystemAssistant(a)
	}
	if err := s.Store.DeleteAssistant(ctx, orgID, a.ID); err != nil {
		return notFoundAs(err, "assistant %s not found", id)
	}
	return nil
}

// AssistantGraph returns the drawing of an assistant's graph (as a new run
// would execute it).
// xray is upstream's (false, true or a depth: subgraphs drawn inside their
// nodes): the graphs of LangGraph apps are drawn by LangGraph with it; the
// engine's drawing has none.
func (s *Service) AssistantGraph(ctx context.Context, orgID, id string, xray any) (graph.Info, error) {
	r, err := s.assistantRunnable(ctx, orgID, id)
	if err != nil {
		return graph.Info{}, err
	}
	if fg := r.foreign(); fg != nil {
		info, _, err := fg.Info(ctx, xray)
		return info, err
	}
	return r.g.Info(), nil
}

// GraphSchemas is LangGraph's GraphSchema: the JSON Schemas of an
// assistant's graph.
type GraphSchemas struct {
	GraphID       string         `json:"graph_id"`
	InputSchema   map[string]any `json:"input_schema"`
	OutputSchema  map[string]any `json:"output_schema"`
	StateSchema   map[string]any `json:"state_schema"`
	ConfigSchema  map[string]any `json:"config_schema"`
	ContextSchema map[string]any `json:"context_schema"`
}

// AssistantSchemas returns the schemas of an assistant's graph: the state's
// (every channel, as JSON Schema), the input's (a deployed document's
// input_schema, else the state's) and the output's (the state's).
func (s *Service) AssistantSchemas(ctx context.Context, orgID, id string) (GraphSchemas, error) {
	r, err := s.assistantRunnable(ctx, orgID, id)
	if err != nil {
		return GraphSchemas{}, err
	}
	if fg := r.foreign(); fg != nil {
		// The compiled graph's own schemas, as LangGraph answers them.
		_, sc, err := fg.Info(ctx, false)
		return sc, err
	}
	state := r.g.StateSchema()
	out := GraphSchemas{GraphID: r.g.Name(), InputSchema: state, OutputSchema: state, StateSchema: state,
		ConfigSchema: emptySchema("Configurable"), ContextSchema: emptySchema("Context")}
	if r.deployed != nil && r.deployed.InputSchema != nil {
		out.InputSchema = r.deployed.InputSchema
	}
	return out, nil
}

func (s *Service) assistantRunnable(ctx context.Context, orgID, id string) (runnable, error) {
	a, err := s.resolveAssistant(ctx, orgID, id)
	if err != nil {
		return runnable{}, err
	}
	r, err := s.currentGraph(ctx, orgID, a.GraphID)
	if fail.KindOf(err) == fail.KindNotFound {
		return runnable{}, fail.NotFound("graph %q of assistant %s is not registered", a.GraphID, a.ID)
	}
	return r, err
}

// resolveAssistant finds an assistant by uuid or graph name (a built-in
// graph's, or one of the organization's deployed graphs); anything else is
// a 422 naming the registered graphs (the Python server's rule).
func (s *Service) resolveAssistant(ctx context.Context, orgID, idOrGraph string) (store.Assistant, error) {
	id := idOrGraph
	deployed := false
	if _, ok := s.Graphs.Get(idOrGraph); ok {
		id = DefaultAssistantID(idOrGraph)
	} else if _, err := uuid.Parse(idOrGraph); err != nil {
		found, err := s.isDeployed(ctx, orgID, idOrGraph)
		if err != nil {
			return store.Assistant{}, err
		}
		if !found {
			names, err := s.graphNames(ctx, orgID)
			if err != nil {
				return store.Assistant{}, err
			}
			return store.Assistant{}, fail.Invalid("assistant_id", "Invalid assistant: '%s'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: %s",
				idOrGraph, strings.Join(names, ", "))
		}
		id, deployed = DeployedAssistantID(orgID, idOrGraph), true
	}
	if err := s.ensureDefaults(ctx, orgID); err != nil {
		return store.Assistant{}, err
	}
	a, err := s.Store.Assistant(ctx, orgID, strings.ToLower(id))
	if deployed && errors.Is(err, store.ErrNotFound) {
		// Published with the revision; made here when that went missing.
		description := ""
		if r, cerr := s.currentGraph(ctx, orgID, idOrGraph); cerr == nil {
			description = r.g.Description()
		}
		if err := s.EnsureDeployedAssistant(ctx, orgID, idOrGraph, description); err != nil {
			return store.Assistant{}, err
		}
		a, err = s.Store.Assistant(ctx, orgID, id)
	}
	return a, notFoundAs(err, "assistant %s not found", idOrGraph)
}

func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return fail.NotFound(format, args...)
	}
	return err
}

func deref(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// checkObject: a JSON value that must be an object (or absent/null).
func checkObject(c *fail.Checks, field string, raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var m map[string]any
	c.Add(json.Unmarshal(raw, &m) != nil, field, "must be an object")
}

// checkMetadata checks a metadata object: an object (or null), at most
// limits' size, so that no record grows without bound through it.
func checkMetadata(c *fail.Checks, field string, raw json.RawMessage, limits Limits) {
	checkObject(c, field, raw)
	if max := limits.maxMetadataBytes(); len(raw) > max {
		c.Add(true, field, "must be at most %d bytes of JSON, got %d", max, len(raw))
	}
}

func objectOr(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}")
	}
	return raw
}

func nullIsNil(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("runs: encode %T: %v", v, err))
	}
	return b
}

// emptySchema is the schema of a graph's configurable or context when it
// declares none: an object of no known keys, as upstream answers it (the
// schemas are present, never null, in its document).
func emptySchema(title string) map[string]any {
	return map[string]any{"title": title, "type": "object", "properties": map[string]any{}}
}
