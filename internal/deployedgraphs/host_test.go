package deployedgraphs

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets"
)

// fakeSource serves revisions made by deployments.DescribedRevisionGraphs.
type fakeSource struct {
	served map[string]deployments.ServedGraph
	revs   map[string]deployments.RevisionGraphs
	reads  int
}

func (f *fakeSource) ServedGraphs(context.Context, string) (map[string]deployments.ServedGraph, error) {
	return f.served, nil
}

func (f *fakeSource) RevisionGraphs(_ context.Context, _, deploymentID, revisionID string) (deployments.RevisionGraphs, error) {
	f.reads++
	rg, ok := f.revs[revisionID]
	if !ok {
		return rg, fail.NotFound("revision %s not found", revisionID)
	}
	return rg, nil
}

// memSecrets is a secrets.Store in memory.
type memSecrets struct {
	mu     sync.Mutex
	values map[string]string
	gets   int
}

func (m *memSecrets) Create(context.Context, string, []byte) (string, error) {
	return "", errors.New("not used")
}
func (m *memSecrets) Delete(context.Context, string) error { return nil }
func (m *memSecrets) Get(_ context.Context, ref string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	v, ok := m.values[ref]
	if !ok {
		return nil, secrets.ErrNotFound
	}
	return []byte(v), nil
}

const doc = `{"graphs": {"g": {
	"description": "D",
	"state": {"messages": {"reducer": "messages"}, "n": {}},
	"input_schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}, "messages": {"type": "array", "items": {"type": "object", "required": ["content"]}}}},
	"nodes": {"llm": {"kind": "chat_model", "base_url": "https://llm.example.com/v1", "model": "m", "api_key_secret": "KEY"},
		"fn": {"kind": "function"}},
	"edges": [{"from": "__start__", "to": "fn"}, {"from": "fn", "to": "llm"}]}}}`

func newHost(t *testing.T) (*Host, *fakeSource, *memSecrets) {
	src := &fakeSource{
		served: map[string]deployments.ServedGraph{"g": {GraphID: "g", DeploymentID: "d1", RevisionID: "r1"}},
		revs: map[string]deployments.RevisionGraphs{
			"r1": deployments.DescribedRevisionGraphs("org", "d1", "r1", "https://runtime.example.com", map[string]string{"KEY": "ref-key"}, []byte(doc)),
		},
	}
	sec := &memSecrets{values: map[string]string{"ref-key": "sk-value"}}
	return &Host{Source: src, Secrets: sec, HTTPClient: &http.Client{}, Builtins: func() []string { return []string{"echo"} }}, src, sec
}

// Current resolves the served revision; At compiles a revision once per
// runtime URL and keeps it; the input schema's problems name the fields.
func TestHostResolvesAndCaches(t *testing.T) {
	h, src, sec := newHost(t)
	ctx := context.Background()
	dg, err := h.Current(ctx, "org", "g")
	if err != nil {
		t.Fatal(err)
	}
	if dg.Graph.Name() != "g" || dg.Revision != (runs.GraphRevision{DeploymentID: "d1", RevisionID: "r1"}) || dg.Graph.Description() != "D" {
		t.Errorf("Current: %+v", dg)
	}
	err = dg.CheckInput(map[string]any{"messages": []any{map[string]any{}}, "n": "x"})
	if fail.KindOf(err) != fail.KindInvalid || err.Error() != "input.messages[0].content: is required; input.n: must be integer, not string" {
		t.Errorf("CheckInput: %v", err)
	}
	if err := dg.CheckInput(map[string]any{"n": 1}); err != nil {
		t.Errorf("CheckInput of a valid input: %v", err)
	}
	if _, err := h.At(ctx, "org", "g", runs.GraphRevision{DeploymentID: "d1", RevisionID: "r1"}); err != nil || sec.gets != 1 {
		t.Errorf("At: %v; %d secret reads, want 1 (cached)", err, sec.gets)
	}
	// A new runtime URL (a PATCHed custom_url) compiles again.
	rg := src.revs["r1"]
	src.revs["r1"] = deployments.DescribedRevisionGraphs("org", "d1", "r1", "https://elsewhere.example.com", rg.SecretRefs, []byte(doc))
	if _, err := h.At(ctx, "org", "g", runs.GraphRevision{DeploymentID: "d1", RevisionID: "r1"}); err != nil || sec.gets != 2 {
		t.Errorf("At after a runtime change: %v; %d secret reads, want 2", err, sec.gets)
	}
	for _, c := range []struct {
		graph, rev string
	}{{"nope", "r1"}, {"g", "r9"}} {
		if _, err := h.At(ctx, "org", c.graph, runs.GraphRevision{DeploymentID: "d1", RevisionID: c.rev}); fail.KindOf(err) != fail.KindNotFound {
			t.Errorf("At(%s, %s): %v, want NotFound", c.graph, c.rev, err)
		}
	}
	if _, err := h.Current(ctx, "org", "other"); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("Current of an unserved graph: %v", err)
	}
	if names, _ := h.Names(ctx, "org"); strings.Join(names, ",") != "g" {
		t.Errorf("Names: %v", names)
	}

	// The cache is bounded.
	h.CacheSize = 1
	h.keep(cacheKey{revisionID: "x"}, &compiled{})
	if len(h.cache) != 1 || len(h.order) != 1 {
		t.Errorf("cache holds %d entries, want 1", len(h.cache))
	}
}

// Check: a built-in graph's name, and documents that do not compile as
// they would be served (no runtime; a secret that is gone) are reasons.
func TestHostCheck(t *testing.T) {
	h, _, sec := newHost(t)
	ctx := context.Background()
	rg := deployments.DescribedRevisionGraphs("org", "d1", "r2", "https://runtime.example.com", map[string]string{"KEY": "ref-key"}, []byte(doc))
	if reason, err := h.Check(ctx, rg); reason != "" || err != nil {
		t.Errorf("Check of a valid revision: %q %v", reason, err)
	}
	builtin := deployments.DescribedRevisionGraphs("org", "d1", "r3", "", nil, []byte(strings.Replace(doc, `"g"`, `"echo"`, 1)))
	if reason, _ := h.Check(ctx, builtin); !strings.Contains(reason, `graph "echo" is the name of a built-in graph`) {
		t.Errorf("built-in name: %q", reason)
	}
	delete(sec.values, "ref-key")
	noRuntime := deployments.DescribedRevisionGraphs("org", "d1", "r4", "", map[string]string{"KEY": "ref-key"}, []byte(doc))
	reason, err := h.Check(ctx, noRuntime)
	for _, want := range []string{`describe: /graphs/g/nodes/fn: runs in the deployment's runtime, and this deployment has none`,
		`describe: /graphs/g/nodes/llm/api_key_secret: the deployment has no secret "KEY"`, "set source_config.custom_url"} {
		if !strings.Contains(reason, want) || err != nil {
			t.Errorf("reason %q (%v) does not name %q", reason, err, want)
		}
	}
}

func TestFieldName(t *testing.T) {
	for ptr, want := range map[string]string{"": "input", "/messages": "input.messages", "/messages/0/content": "input.messages[0].content",
		"/a~1b/c~0d": "input.a/b.c~d"} {
		if got := fieldName(ptr); got != want {
			t.Errorf("fieldName(%q) = %q, want %q", ptr, got, want)
		}
	}
}
