package runs

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/store"
)

// AssistantPatch is PATCH /assistants/{id}: the fields given replace the
// current version's (metadata is merged into it, as upstream merges), and
// the result is stored as a new version that becomes current.
type AssistantPatch struct {
	GraphID     *string         `json:"graph_id"`
	Config      json.RawMessage `json:"config"`
	Context     json.RawMessage `json:"context"`
	Metadata    json.RawMessage `json:"metadata"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
}

// AssistantVersionsQuery is POST /assistants/{id}/versions.
type AssistantVersionsQuery struct {
	Metadata json.RawMessage `json:"metadata"`
	Limit    int             `json:"limit"`
	Offset   int             `json:"offset"`
}

// AssistantLatest is POST /assistants/{id}/latest.
type AssistantLatest struct {
	Version *int `json:"version"`
}

// AssistantCount filters the assistants to count.
type AssistantCount struct {
	GraphID  string          `json:"graph_id"`
	Name     string          `json:"name"`
	Metadata json.RawMessage `json:"metadata"`
}

// assistantFields are the fields an assistant search may select (upstream's
// ASSISTANT_FIELDS).
var assistantFields = []string{"assistant_id", "graph_id", "name", "description", "config", "context",
	"created_at", "updated_at", "metadata", "version"}

// isSystem reports an assistant the server made for a graph (created_by
// system): a graph name resolves to it, so it cannot be deleted.
func isSystem(a store.Assistant) bool {
	var meta struct {
		CreatedBy any `json:"created_by"`
	}
	_ = json.Unmarshal(a.Metadata, &meta)
	return meta.CreatedBy == "system" && (a.ID == DefaultAssistantID(a.GraphID) || a.ID == DeployedAssistantID(a.OrgID, a.GraphID))
}

// PatchAssistant stores a new version of the assistant from the fields
// given and makes it current.
func (s *Service) PatchAssistant(ctx context.Context, orgID, id string, in AssistantPatch) (Assistant, error) {
	var c fail.Checks
	checkObject(&c, "config", in.Config)
	checkObject(&c, "context", in.Context)
	checkMetadata(&c, "metadata", in.Metadata, s.Limits)
	c.Add(in.GraphID != nil && *in.GraphID == "", "graph_id", "must not be empty")
	if err := c.Err(); err != nil {
		return Assistant{}, err
	}
	a, err := s.resolveAssistant(ctx, orgID, id)
	if err != nil {
		return Assistant{}, err
	}
	if in.GraphID != nil && *in.GraphID != a.GraphID {
		if _, err := s.graphByID(ctx, orgID, *in.GraphID, "graph_id"); err != nil {
			return Assistant{}, err
		}
		a.GraphID = *in.GraphID
	}
	if len(in.Config) > 0 && string(in.Config) != "null" {
		a.Config = in.Config
	}
	if len(in.Context) > 0 && string(in.Context) != "null" {
		a.Context = in.Context
	}
	if len(in.Metadata) > 0 && string(in.Metadata) != "null" {
		merged, err := store.MergeObjects(a.Metadata, in.Metadata)
		if err != nil {
			return Assistant{}, err
		}
		if max := s.Limits.maxMetadataBytes(); len(merged) > max {
			return Assistant{}, fail.Invalid("metadata", "must be at most %d bytes of JSON once merged into the assistant's, would be %d", max, len(merged))
		}
		a.Metadata = merged
	}
	if in.Name != nil {
		a.Name = *in.Name
	}
	if in.Description != nil {
		a.Description = *in.Description
	}
	a.UpdatedAt = s.now()
	stored, err := s.Store.UpdateAssistant(ctx, a)
	if err != nil {
		return Assistant{}, notFoundAs(err, "assistant %s not found", id)
	}
	return assistantView(stored), nil
}

// AssistantVersions lists an assistant's versions, highest first.
func (s *Service) AssistantVersions(ctx context.Context, orgID, id string, in AssistantVersionsQuery) ([]Assistant, error) {
	var c fail.Checks
	c.Add(in.Limit < 0 || in.Limit > 1000, "limit", "must be between 1 and 1000")
	c.Add(in.Offset < 0, "offset", "must be >= 0")
	checkObject(&c, "metadata", in.Metadata)
	if err := c.Err(); err != nil {
		return nil, err
	}
	a, err := s.resolveAssistant(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	list, err := s.Store.AssistantVersions(ctx, orgID, a.ID, store.AssistantVersionFilter{
		Metadata: nullIsNil(in.Metadata), Limit: in.Limit, Offset: in.Offset})
	if err != nil {
		return nil, notFoundAs(err, "Assistant %s not found", id)
	}
	out := make([]Assistant, 0, len(list))
	for _, v := range list {
		out = append(out, assistantView(v))
	}
	return out, nil
}

// SetLatestAssistantVersion makes one of the assistant's versions current.
func (s *Service) SetLatestAssistantVersion(ctx context.Context, orgID, id string, in AssistantLatest) (Assistant, error) {
	var c fail.Checks
	c.Add(in.Version == nil, "version", "is required")
	c.Add(in.Version != nil && *in.Version < 1, "version", "must be >= 1")
	if err := c.Err(); err != nil {
		return Assistant{}, err
	}
	a, err := s.resolveAssistant(ctx, orgID, id)
	if err != nil {
		return Assistant{}, err
	}
	stored, err := s.Store.SetAssistantVersion(ctx, orgID, a.ID, *in.Version, s.now())
	if err != nil {
		return Assistant{}, notFoundAs(err, "version %d of assistant %s not found", *in.Version, id)
	}
	return assistantView(stored), nil
}

// CountAssistants counts the organization's assistants that match.
func (s *Service) CountAssistants(ctx context.Context, orgID string, in AssistantCount) (int, error) {
	var c fail.Checks
	checkObject(&c, "metadata", in.Metadata)
	if err := c.Err(); err != nil {
		return 0, err
	}
	if err := s.ensureDefaults(ctx, orgID); err != nil {
		return 0, err
	}
	return s.Store.CountAssistants(ctx, orgID, store.AssistantFilter{GraphID: in.GraphID, NameContains: in.Name,
		Metadata: nullIsNil(in.Metadata)})
}

// SearchAssistantsSelected is SearchAssistants with select applied.
func (s *Service) SearchAssistantsSelected(ctx context.Context, orgID string, in AssistantSearch) (any, error) {
	var c fail.Checks
	checkSelect(&c, in.Select, assistantFields)
	if err := c.Err(); err != nil {
		return nil, err
	}
	list, err := s.SearchAssistants(ctx, orgID, in)
	if err != nil {
		return nil, err
	}
	return project(list, in.Select)
}

// errSystemAssistant is the refusal to delete a graph's own assistant.
func errSystemAssistant(a store.Assistant) error {
	return fail.Conflict("assistant %s is the system assistant of graph %q (created_by system): a graph name resolves to it, so it cannot be deleted", a.ID, a.GraphID)
}

// AssistantSubgraphs answers GET /assistants/{id}/subgraphs[/{namespace}]
// as LangGraph's get_subgraphs: the schemas of the graph's subgraphs by
// namespace (node names joined with "|"): the direct ones, every nested
// one with recurse; with a namespace, that subgraph (and with recurse the
// ones below it).
func (s *Service) AssistantSubgraphs(ctx context.Context, orgID, id, namespace string, recurse bool) (map[string]SubgraphSchemas, error) {
	r, err := s.assistantRunnable(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	if fg := r.foreign(); fg != nil {
		// The compiled graph's own subgraphs (its shape here has none).
		if sg, ok := fg.(ForeignSubgraphs); ok {
			return sg.Subgraphs(ctx, namespace, recurse)
		}
	}
	out := map[string]SubgraphSchemas{}
	var walk func(prefix string, g *graph.Graph, depth int)
	walk = func(prefix string, g *graph.Graph, depth int) {
		for node, child := range g.Subgraphs() {
			ns := node
			if prefix != "" {
				ns = prefix + "|" + node
			}
			onPath := namespace != "" && strings.HasPrefix(namespace, ns+"|")
			below := namespace == "" || ns == namespace || strings.HasPrefix(ns, namespace+"|")
			if below && (recurse || ns == namespace || (namespace == "" && prefix == "")) {
				state := child.StateSchema()
				out[ns] = SubgraphSchemas{InputSchema: state, OutputSchema: state, StateSchema: state,
					ConfigSchema: emptySchema("Configurable"), ContextSchema: emptySchema("Context")}
			}
			// Subgraphs nest at most graphdoc's depth; 64 bounds a walk
			// whatever made the graph.
			if depth < 64 && (onPath || (recurse && below)) {
				walk(ns, child, depth+1)
			}
		}
	}
	walk("", r.g, 0)
	return out, nil
}

// SubgraphSchemas is LangGraph's GraphSchemaNoId: a subgraph's schemas.
type SubgraphSchemas struct {
	InputSchema   map[string]any `json:"input_schema"`
	OutputSchema  map[string]any `json:"output_schema"`
	StateSchema   map[string]any `json:"state_schema"`
	ConfigSchema  map[string]any `json:"config_schema"`
	ContextSchema map[string]any `json:"context_schema"`
}
