package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

// TestUpstreamOperationsRouted walks every operation of upstream's OpenAPI
// document (langgraph-api at the version of upstream/langgraph-api.pin) and
// asks a real `stepgraph serve` for it, with its path parameters filled
// (fresh UUIDs, so nothing exists) and an empty JSON body. An operation is
// routed when the answer is neither 405 nor the 404 of an unknown route
// ("no route for ..."); a 404 naming a missing resource, a 422 for the empty
// body, a 200 are all the operation answering. The operations of
// testserver.UpstreamPendingPath must be unrouted, so that the list shrinks
// as they are built.
func TestUpstreamOperationsRouted(t *testing.T) {
	root, err := testserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testserver.CheckDeps(root, testserver.UpstreamOpenAPI); err != nil {
		t.Fatal(err)
	}
	ops, err := testserver.UpstreamOperations(root)
	if err != nil {
		t.Fatal(err)
	}
	// The pinned document has 64 operations; far fewer means it was not
	// read as a whole, and the walk would prove little.
	if len(ops) < 60 {
		t.Fatalf("upstream's openapi.json has %d operations; want the pinned document's 64", len(ops))
	}
	pending, err := testserver.UpstreamPending(root)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, op := range ops {
		known[op.Template()] = true
	}
	for tmpl := range pending {
		if !known[tmpl] {
			t.Errorf("%s lists %s, which is no operation of upstream's document", testserver.UpstreamPendingPath, tmpl)
		}
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "stepgraph")
	if err := testserver.Build(context.Background(), root, bin); err != nil {
		t.Fatal(err)
	}
	srv := testserver.StartT(t, testserver.Options{Binary: bin, Dir: tmp, WaitKey: true,
		DataDir: filepath.Join(tmp, "data"), Args: []string{"-rate-limit", "0"}})
	// A safety net only: every request here is answered at once (nothing it
	// names exists, so no stream or wait starts).
	client := &http.Client{Timeout: time.Minute}

	for _, op := range ops {
		routed, answer := probe(t, client, srv, op)
		switch {
		case pending[op.Template()] && routed:
			t.Errorf("%s is routed now (%s): remove it from %s", op, answer, testserver.UpstreamPendingPath)
		case !pending[op.Template()] && !routed:
			t.Errorf("%s is not routed: %s", op, answer)
		default:
			t.Logf("%-7s %-48s %s", op.Method, op.Path, answer)
		}
	}
}

// probe sends op to srv and reports whether a route took it, with a short
// account of the answer.
func probe(t *testing.T, client *http.Client, srv *testserver.Server, op testserver.UpstreamOperation) (bool, string) {
	t.Helper()
	path := testserver.PathParam.ReplaceAllStringFunc(op.Path, func(p string) string {
		if p == "{namespace}" { // a subgraph's namespace, not an id
			return "ns"
		}
		return uuid.NewString()
	})
	var body io.Reader
	if op.Method == "POST" || op.Method == "PUT" || op.Method == "PATCH" {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(op.Method, srv.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", srv.FirstKey())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	var detail struct {
		Detail any `json:"detail"`
	}
	_ = json.Unmarshal(data, &detail)
	answer := fmt.Sprintf("%d %v", res.StatusCode, detail.Detail)
	if detail.Detail == nil {
		answer = fmt.Sprintf("%d (%s)", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// The answers of an unknown route: 404 "no route for ..." and 405
	// "method ... not allowed on ..." (an operation may answer 405 itself:
	// MCP's GET, which opens no stream).
	d := fmt.Sprint(detail.Detail)
	unknown := res.StatusCode == http.StatusMethodNotAllowed && strings.HasPrefix(d, "method ") && strings.Contains(d, " not allowed on ") ||
		res.StatusCode == http.StatusNotFound && strings.HasPrefix(d, "no route for ")
	return !unknown, answer
}
