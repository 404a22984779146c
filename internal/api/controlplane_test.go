package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestDeploymentTypesAndExactName: the current upstream deployment types
// (the CLI's default serverless, and dedicated) are accepted and kept; the
// name filter matches whole names only (langgraph deploy finds a
// deployment by it).
func TestDeploymentTypesAndExactName(t *testing.T) {
	e := newEnv(t)
	repo := agentRepo(t, "http://127.0.0.1:9/")
	for _, typ := range []string{"serverless", "dedicated", "dev_free"} {
		body := agentDeployment("typed-"+strings.ReplaceAll(typ, "_", "-"), repo, "", secret("sk-typed-"+typ+"-4Rf"))
		cfg := body["source_config"].(map[string]any)
		delete(cfg, "custom_url")
		cfg["deployment_type"] = typ
		d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
		if got := d["source_config"].(map[string]any)["deployment_type"]; got != typ {
			t.Errorf("deployment_type %s answered as %v", typ, got)
		}
	}
	e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("typed"))
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"name=typed", []string{"typed"}},
		{"name=typed-serverless", []string{"typed-serverless"}},
		{"name=Typed", nil},
		{"name=typed-", nil},
		{"name_contains=typed-", []string{"typed-dev-free", "typed-dedicated", "typed-serverless"}},
	} {
		page := e.must(200, "GET", "/v2/deployments?"+tc.query, e.keyA, nil)
		var names []string
		for _, r := range page["resources"].([]any) {
			names = append(names, r.(map[string]any)["name"].(string))
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.query, names, tc.want)
		}
	}
	if page := e.must(200, "GET", "/v2/deployments?name=typed", e.keyB, nil); len(page["resources"].([]any)) != 0 {
		t.Errorf("another organization's deployment by name: %v", page)
	}
}
