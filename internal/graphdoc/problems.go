package graphdoc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one broken rule, named by place: the file, a JSON Pointer into
// it, and the rule.
type Problem struct {
	// File is the file as the graph config names it ("graphs/agent.yaml"),
	// or "describe" for a config a runtime described.
	File string `json:"file"`
	// Path is a JSON Pointer ("/nodes/llm/temperature"); "" is the whole file.
	Path string `json:"path"`
	// Rule says what is wrong ("must be <= 2").
	Rule string `json:"rule"`
}

// String reads "graphs/agent.yaml: /nodes/llm/temperature: must be <= 2".
func (p Problem) String() string {
	path := p.Path
	if path == "" {
		path = "/"
	}
	return p.File + ": " + path + ": " + p.Rule
}

// ValidationError lists every problem of a graph config and its documents.
// Its message is one problem per line, sorted; it never contains a secret
// value.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems; the zero value is ready to use.
type problems struct {
	list []Problem
}

func (ps *problems) add(file, path, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: file, Path: path, Rule: fmt.Sprintf(format, args...)})
}

// err returns nil or a *ValidationError with the problems sorted and unique.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortFunc(list, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Rule, b.Rule))
	})
	return &ValidationError{Problems: slices.Compact(list)}
}

// pointer appends tokens to a JSON Pointer, escaping ~ and /.
func pointer(base string, tokens ...string) string {
	var b strings.Builder
	b.WriteString(base)
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
