package graphdoc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// MaxFileBytes bounds a graph config or document file.
const MaxFileBytes = 1 << 20

// Config is a revision's graph config: its graphs by id, each a checked
// document. Build one with Load or ParseConfig, then Compile it.
type Config struct {
	file   string
	graphs map[string]*Document
}

// Graphs lists the config's graph ids, sorted.
func (c *Config) Graphs() []string { return sortedKeys(c.graphs) }

// Document returns the document of graph id.
func (c *Config) Document(id string) (*Document, bool) {
	d, ok := c.graphs[id]
	return d, ok
}

// Load reads the graph config at file in fsys (a repository checked out at
// the revision's commit, say) and every document it names, and checks them
// all. The error is a *ValidationError listing every problem, each naming
// its file, JSON path and rule.
func Load(fsys fs.FS, file string) (*Config, error) {
	data, err := readFile(fsys, file)
	if err != nil {
		return nil, &ValidationError{Problems: []Problem{{File: file, Rule: err.Error()}}}
	}
	return ParseConfig(file, data, fsys)
}

// ParseConfig checks a graph config held in data (YAML or JSON) and the
// documents it names. file names it in problems ("describe" for what a
// runtime described). Paths to documents are read from fsys relative to
// file's directory; with a nil fsys every document must be inline. The
// error is a *ValidationError.
func ParseConfig(file string, data []byte, fsys fs.FS) (*Config, error) {
	var ps problems
	v, err := decode(data)
	if err != nil {
		ps.add(file, "", "%v", err)
		return nil, ps.err()
	}
	validate(schemas().config, v, file, "", &ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	c := &Config{file: file, graphs: map[string]*Document{}}
	entries := v.(map[string]any)["graphs"].(map[string]any)
	for _, id := range sortedKeys(entries) {
		at := pointer("", "graphs", id)
		var d *Document
		switch entry := entries[id].(type) {
		case string:
			d = loadDocument(fsys, file, entry, at, &ps)
		case map[string]any:
			d = parseDocument(entry, file, at, &ps)
		}
		if d != nil {
			c.graphs[id] = d
		}
	}
	if len(ps.list) == 0 {
		c.checkSubgraphs(&ps)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// loadDocument reads the document at rel (relative to the config file).
func loadDocument(fsys fs.FS, configFile, rel, at string, ps *problems) *Document {
	if fsys == nil {
		ps.add(configFile, at, "must be an inline document: there are no files to read %s from", rel)
		return nil
	}
	name := path.Join(path.Dir(configFile), rel)
	if strings.HasPrefix(rel, "/") || !fs.ValidPath(name) {
		ps.add(configFile, at, "must be a path inside the repository, relative to %s", configFile)
		return nil
	}
	data, err := readFile(fsys, name)
	if err != nil {
		ps.add(configFile, at, "%s %v", name, err)
		return nil
	}
	v, err := decode(data)
	if err != nil {
		ps.add(name, "", "%v", err)
		return nil
	}
	return parseDocument(v, name, "", ps)
}

func readFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("does not exist")
	}
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("is larger than %d bytes", MaxFileBytes)
	}
	return data, nil
}

// checkSubgraphs checks subgraph nodes against the graphs they name: the
// graph exists, the input's keys are its channels, and no graph contains
// itself, directly or not.
func (c *Config) checkSubgraphs(ps *problems) {
	for _, id := range c.Graphs() {
		d := c.graphs[id]
		for _, name := range sortedKeys(d.spec.Nodes) {
			n := d.spec.Nodes[name]
			if n.Kind != "subgraph" {
				continue
			}
			at := pointer(d.base, "nodes", name)
			child, ok := c.graphs[n.Graph]
			if !ok {
				ps.add(d.file, pointer(at, "graph"), "no graph %q in the graph config (graphs: %v)", n.Graph, c.Graphs())
				continue
			}
			for key := range n.Input {
				if _, ok := child.spec.State[key]; !ok {
					ps.add(d.file, pointer(at, "input", key), "graph %q has no state channel %q", n.Graph, key)
				}
			}
			if cycle := c.cycleFrom(n.Graph, []string{id}, map[string]bool{}); cycle != nil {
				ps.add(d.file, pointer(at, "graph"), "subgraph cycle: %s", strings.Join(cycle, " → "))
			}
		}
	}
}

// cycleFrom returns a path of subgraph references from id back to stack[0],
// or nil. seen holds the graphs already explored from stack[0].
func (c *Config) cycleFrom(id string, stack []string, seen map[string]bool) []string {
	if id == stack[0] {
		return append(slices.Clone(stack), id)
	}
	if seen[id] {
		return nil
	}
	seen[id] = true
	d, ok := c.graphs[id]
	if !ok {
		return nil
	}
	for _, name := range sortedKeys(d.spec.Nodes) {
		if n := d.spec.Nodes[name]; n.Kind == "subgraph" {
			if cycle := c.cycleFrom(n.Graph, append(slices.Clone(stack), id), seen); cycle != nil {
				return cycle
			}
		}
	}
	return nil
}

// checkNesting refuses graphs whose subgraphs nest deeper than max: that
// depth is known from the documents alone, so such a graph is refused when
// it is deployed rather than failing each of its runs (the runs enforce the
// same limit, graph.Limits.MaxSubgraphDepth, for revisions deployed before
// the limit was lowered). The problem is placed on the first subgraph node
// of the deepest chain.
func (c *Config) checkNesting(max int, ps *problems) {
	memo := map[string][]string{}
	for _, id := range c.Graphs() {
		chain := c.deepest(id, memo)
		depth := (len(chain) - 1) / 2
		if depth <= max {
			continue
		}
		d := c.graphs[id]
		ps.add(d.file, pointer(d.base, "nodes", chain[1], "graph"),
			"subgraphs nest %d deep from graph %q (%s), more than the limit of %d nested subgraphs",
			depth, id, strings.Join(graphsOf(chain), " → "), max)
	}
}

// deepest returns the longest chain of subgraph nodes from graph id:
// id, node, graph, node, graph…, ending at a graph without subgraphs. The
// config has no subgraph cycles (checkSubgraphs).
func (c *Config) deepest(id string, memo map[string][]string) []string {
	if chain, ok := memo[id]; ok {
		return chain
	}
	best := []string{id}
	if d, ok := c.graphs[id]; ok {
		for _, name := range sortedKeys(d.spec.Nodes) {
			n := d.spec.Nodes[name]
			if n.Kind != "subgraph" {
				continue
			}
			if sub := c.deepest(n.Graph, memo); len(sub)+2 > len(best) {
				best = append([]string{id, name}, sub...)
			}
		}
	}
	memo[id] = best
	return best
}

// graphsOf keeps the graph ids of a chain (every other element).
func graphsOf(chain []string) []string {
	var out []string
	for i := 0; i < len(chain); i += 2 {
		out = append(out, chain[i])
	}
	return out
}
