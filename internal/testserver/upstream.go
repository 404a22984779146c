package testserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// UpstreamPendingPath lists the operations of upstream's document that
// stepgraph does not serve yet (see the file's header), relative to the
// repository root: the route walk of test/conformance lets exactly these go
// unrouted, and test/schemathesis leaves them out of its upstream run.
const UpstreamPendingPath = "test/conformance/upstream/pending.txt"

// UpstreamOperation is one operation of upstream's OpenAPI document.
type UpstreamOperation struct {
	Method, Path, ID string
}

func (o UpstreamOperation) String() string { return o.Method + " " + o.Path }

// Template is the operation with its path parameters' names erased
// ("GET /threads/{}"): stepgraph may name a parameter otherwise than
// upstream does.
func (o UpstreamOperation) Template() string {
	return o.Method + " " + PathParam.ReplaceAllString(o.Path, "{}")
}

// PathParam matches one path parameter of an OpenAPI path template.
var PathParam = regexp.MustCompile(`\{[^}/]+\}`)

// UpstreamOperations reads every operation of upstream's document
// (UpstreamOpenAPI), sorted by method and path.
func UpstreamOperations(root string) ([]UpstreamOperation, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(UpstreamOpenAPIPath)))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("upstream's openapi.json: %w", err)
	}
	var ops []UpstreamOperation
	for path, item := range doc.Paths {
		for method, raw := range item {
			switch m := strings.ToUpper(method); m {
			case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
				var op struct {
					OperationID string `json:"operationId"`
				}
				if err := json.Unmarshal(raw, &op); err != nil {
					return nil, fmt.Errorf("upstream's openapi.json: %s %s: %w", m, path, err)
				}
				ops = append(ops, UpstreamOperation{Method: m, Path: path, ID: op.OperationID})
			}
		}
	}
	slices.SortFunc(ops, func(a, b UpstreamOperation) int { return strings.Compare(a.String(), b.String()) })
	return ops, nil
}

// UpstreamPending reads UpstreamPendingPath: the set of the pending
// operations' templates (UpstreamOperation.Template).
func UpstreamPending(root string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(UpstreamPendingPath)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pending := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		method, path, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not \"METHOD /path\"", UpstreamPendingPath, line)
		}
		pending[UpstreamOperation{Method: method, Path: strings.TrimSpace(path)}.Template()] = true
	}
	return pending, sc.Err()
}
