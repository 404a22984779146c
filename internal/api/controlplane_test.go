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

// TestDeploymentLogs: the routes `langgraph deploy logs` reads answer a
// revision's provisioning log: the build stage of a failed build names the
// failure; a deployed revision's deploy log ends with DEPLOYED; order,
// limit, offset, level and query narrow it; another organization gets 404.
func TestDeploymentLogs(t *testing.T) {
	e := newEnv(t)
	repo := agentRepo(t, "http://127.0.0.1:9/")
	good := agentDeployment("logged", repo, newTestRuntime(t).url, secret("sk-logged-7Qe"))
	d := e.must(201, "POST", "/v2/deployments", e.keyA, good)
	dep, rev := d["id"].(string), d["latest_revision_id"].(string)
	// The revision is DEPLOYED (its last log entry written) after the
	// deployment is READY.
	e.waitFor(e.keyA, "/v2/deployments/"+dep+"/revisions/"+rev, status("DEPLOYED"))

	logs := func(key, path string, body any) []map[string]any {
		t.Helper()
		page := e.must(200, "POST", path, key, body)
		var out []map[string]any
		for _, l := range page["logs"].([]any) {
			out = append(out, l.(map[string]any))
		}
		return out
	}
	build := logs(e.keyA, "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", map[string]any{"order": "asc"})
	text := fmt.Sprint(build)
	if len(build) < 3 || !strings.Contains(text, "fetching "+repo) || !strings.Contains(text, "graph config agent/stepgraph.yaml checked") {
		t.Errorf("build log: %v", build)
	}
	deploy := logs(e.keyA, "/v1/projects/"+dep+"/deploy_logs", map[string]any{})
	if len(deploy) == 0 || !strings.HasPrefix(deploy[0]["message"].(string), "DEPLOYED") || deploy[0]["level"] != "INFO" {
		t.Errorf("deploy log, newest first: %v", deploy)
	}
	if again := logs(e.keyA, "/v1/projects/"+dep+"/revisions/"+rev+"/deploy_logs", map[string]any{}); fmt.Sprint(again) != fmt.Sprint(deploy) {
		t.Errorf("deploy log of the revision differs from the latest revision's")
	}
	first := e.must(200, "POST", "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", e.keyA, map[string]any{"order": "asc", "limit": 1})
	rest := logs(e.keyA, "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", map[string]any{"order": "asc", "offset": first["next_offset"]})
	if len(first["logs"].([]any)) != 1 || len(rest) != len(build)-1 || rest[0]["id"] != build[1]["id"] {
		t.Errorf("paging: first %v, then %d of %d", first, len(rest), len(build))
	}
	if got := logs(e.keyA, "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", map[string]any{"query": "FETCHING"}); len(got) != 1 {
		t.Errorf("query: %v", got)
	}

	bad := agentDeployment("broken", repo, "", secret("sk-broken-2Wd"))
	delete(bad["source_config"].(map[string]any), "custom_url")
	bad["source_revision_config"].(map[string]any)["graph_config_path"] = "missing.yaml"
	b := e.must(201, "POST", "/v2/deployments", e.keyA, bad)
	e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", b["id"], b["latest_revision_id"]), status("BUILD_FAILED"))
	errs := logs(e.keyA, fmt.Sprintf("/v1/projects/%s/revisions/%s/build_logs", b["id"], b["latest_revision_id"]), map[string]any{"level": "error"})
	if len(errs) != 1 || !strings.Contains(errs[0]["message"].(string), "BUILD_FAILED") || !strings.Contains(errs[0]["message"].(string), "missing.yaml") {
		t.Errorf("failed build's error entries: %v", errs)
	}
	for _, body := range []any{map[string]any{"order": "sideways"}, map[string]any{"limit": 0}, map[string]any{"offset": "x"}, map[string]any{"start_time": "yesterday"}} {
		if r := e.do("POST", "/v1/projects/"+dep+"/deploy_logs", e.keyA, body); r.Status != 422 {
			t.Errorf("logs %v: %d %s", body, r.Status, r.Body)
		}
	}
	if r := e.do("POST", "/v1/projects/"+dep+"/deploy_logs", e.keyB, map[string]any{}); r.Status != 404 {
		t.Errorf("another organization's logs: %d", r.Status)
	}
	if r := e.do("POST", "/v1/projects/"+dep+"/revisions/"+b["latest_revision_id"].(string)+"/build_logs", e.keyA, map[string]any{}); r.Status != 404 {
		t.Errorf("another deployment's revision: %d %s", r.Status, r.Body)
	}
}
