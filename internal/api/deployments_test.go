package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// gitRepo makes a real repository with a graph config on branch main and
// returns its file:// URL.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := repoDir(t)
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		wt.Add(name)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
	if _, err := wt.Commit("init", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}
	head, _ := repo.Head()
	if head.Name().Short() != "main" {
		// go-git's default branch is master; give the commit the name tests use.
		ref := head.Hash()
		wt.Checkout(&git.CheckoutOptions{Hash: ref, Branch: "refs/heads/main", Create: true})
	}
	return "file://" + dir
}

func repoDeployment(name, repoURL string) map[string]any {
	return map[string]any{
		"name":                   name,
		"source":                 "hosted_repo",
		"source_config":          map[string]any{"repo_url": repoURL},
		"source_revision_config": map[string]any{"repo_ref": "main", "graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": secret("sk-" + name + "-9Hq")}},
	}
}

func imageDeployment(name string) map[string]any {
	return map[string]any{
		"name":                   name,
		"source":                 "external_docker",
		"source_config":          map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "ghcr.io/acme/agent:1.2.3"},
	}
}

// waitFor polls the deployment until cond holds or fails the test after 20 s.
func (e *env) waitFor(key, path string, cond func(map[string]any) bool) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.must(200, "GET", path, key, nil)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("GET %s never reached the expected state; last: %v", path, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func status(want string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["status"] == want }
}

func TestDeploymentHostedRepoLifecycle(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig})
	body := repoDeployment("agent-one", repo)
	body["source"] = "github" // upstream alias
	sr := body["source_revision_config"].(map[string]any)
	delete(sr, "graph_config_path")
	sr["langgraph_config_path"] = "langgraph.json" // upstream alias
	d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
	if d["source"] != "hosted_repo" || d["status"] != "AWAITING_DATABASE" || d["active_revision_id"] != nil {
		t.Errorf("new deployment: %v", d)
	}
	if d["source_revision_config"].(map[string]any)["graph_config_path"] != "langgraph.json" {
		t.Errorf("alias not mapped: %v", d["source_revision_config"])
	}
	secrets := d["secrets"].([]any)
	if len(secrets) != 1 || secrets[0].(map[string]any)["value"] != "********" {
		t.Errorf("secrets not masked: %v", secrets)
	}
	id := d["id"].(string)
	ready := e.waitFor(e.keyA, "/v2/deployments/"+id, status("READY"))
	if ready["active_revision_id"] != d["latest_revision_id"] {
		t.Errorf("active %v, latest %v", ready["active_revision_id"], d["latest_revision_id"])
	}
	// The revision is active, then DEPLOYED (two records, two writes).
	rev := e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, d["latest_revision_id"]),
		func(m map[string]any) bool { return m["status"] != "DEPLOYING" })
	sha, _ := rev["source_revision_config"].(map[string]any)["repo_commit_sha"].(string)
	if rev["status"] != "DEPLOYED" || len(sha) != 40 {
		t.Errorf("revision: %v", rev)
	}
}

func TestDeploymentRevisionFailures(t *testing.T) {
	e := newEnv(t)
	good := gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig, "bad.json": `{"graphs": `})
	cases := []struct {
		name    string
		repo    string
		ref     string
		path    string
		reason  string
		failure []string
	}{
		{"missing repo", "file://" + repoRoot + "/nonexistent", "main", "langgraph.json", "not found", []string{"CREATE_FAILED", "BUILD_FAILED"}},
		{"missing ref", good, "nope", "langgraph.json", "nope", []string{"CREATE_FAILED", "BUILD_FAILED"}},
		{"missing config", good, "main", "missing.json", "missing.json", []string{"BUILD_FAILED"}},
		{"invalid config", good, "main", "bad.json", "bad.json", []string{"BUILD_FAILED"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := repoDeployment(fmt.Sprintf("fail-%d", i), c.repo)
			body["source_revision_config"] = map[string]any{"repo_ref": c.ref, "graph_config_path": c.path}
			d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
			path := fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"])
			rev := e.waitFor(e.keyA, path, func(m map[string]any) bool { return strings.HasSuffix(m["status"].(string), "FAILED") })
			if !contains(c.failure, rev["status"].(string)) {
				t.Errorf("status %v, want one of %v", rev["status"], c.failure)
			}
			if msg, _ := rev["status_message"].(string); !strings.Contains(msg, c.reason) {
				t.Errorf("status_message %q does not name %q", msg, c.reason)
			}
			if got := e.must(200, "GET", fmt.Sprintf("/v2/deployments/%s", d["id"]), e.keyA, nil); got["status"] != "AWAITING_DATABASE" {
				t.Errorf("deployment with a failed revision is %v", got["status"])
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestDeploymentExternalDockerCustomURL(t *testing.T) {
	e := newEnv(t)
	up := newLoopbackServer(t, http.StatusOK)
	body := imageDeployment("img-ok")
	body["source_config"] = map[string]any{"custom_url": up}
	d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
	e.waitFor(e.keyA, "/v2/deployments/"+d["id"].(string), status("READY"))

	down := imageDeployment("img-down")
	down["source_config"] = map[string]any{"custom_url": "http://127.0.0.1:1/"}
	d = e.must(201, "POST", "/v2/deployments", e.keyA, down)
	rev := e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"]), status("DEPLOY_FAILED"))
	if msg, _ := rev["status_message"].(string); !strings.Contains(msg, "custom_url") {
		t.Errorf("status_message %q", msg)
	}
}

// minimalGraphConfig is a graph config with one small graph, "noop": what a
// deployment needs to deploy.
const minimalGraphConfig = `{"graphs": {"noop": {"state": {"seen": {}},
	"nodes": {"mark": {"kind": "transform", "update": {"seen": true}}},
	"edges": [{"from": "__start__", "to": "mark"}, {"from": "mark", "to": "__end__"}]}}}`

// describeConfig answers a runtime's describe call with minimalGraphConfig.
func describeConfig(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || r.URL.Path != "/describe" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(minimalGraphConfig))
	return true
}

// newLoopbackServer is a runtime that describes minimalGraphConfig and
// answers anything else with code.
func newLoopbackServer(t *testing.T, code int) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !describeConfig(w, r) {
			w.WriteHeader(code)
		}
	})}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

func TestDeploymentCreateRules(t *testing.T) {
	e := newEnv(t)
	repo := "https://github.com/acme/agent.git"
	hosted := repoDeployment("rules", repo)
	image := imageDeployment("rules-img")
	rs := func(kv ...any) map[string]any {
		spec := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			spec[kv[i].(string)] = kv[i+1]
		}
		return spec
	}
	withConfig := func(base map[string]any, section string, kv ...any) map[string]any {
		out := with(base)
		cfg := map[string]any{}
		for k, v := range base[section].(map[string]any) {
			cfg[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == deleteField {
				delete(cfg, kv[i].(string))
				continue
			}
			cfg[kv[i].(string)] = kv[i+1]
		}
		out[section] = cfg
		return out
	}
	spec := func(s map[string]any) map[string]any { return withConfig(image, "source_config", "resource_spec", s) }
	cases := []struct {
		name   string
		body   any
		detail []string
	}{
		{"name missing", with(hosted, "name", deleteField), []string{"name: is required"}},
		{"name uppercase", with(hosted, "name", "MyAgent"), []string{"name:", "lowercase"}},
		{"name too long", with(hosted, "name", strings.Repeat("a", 64)), []string{"name:", "63"}},
		{"name leading hyphen", with(hosted, "name", "-agent"), []string{"name:", "hyphen"}},
		{"source missing", with(hosted, "source", deleteField), []string{"source: is required"}},
		{"source unknown", with(hosted, "source", "internal_docker"), []string{"source: value must be one of"}},
		{"source_config missing", with(hosted, "source_config", deleteField), []string{"source_config: is required"}},
		{"source_revision_config missing", with(hosted, "source_revision_config", deleteField), []string{"source_revision_config: is required"}},
		{"read-only id", with(hosted, "id", "00000000-0000-0000-0000-000000000000"), []string{"id:", "read-only"}},
		{"read-only status", with(hosted, "status", "READY"), []string{"status:", "read-only"}},
		{"read-only commit sha", withConfig(hosted, "source_revision_config", "repo_commit_sha", "abc"), []string{"source_revision_config.repo_commit_sha:", "read-only"}},
		{"hosted repo_url missing", withConfig(hosted, "source_config", "repo_url", deleteField), []string{"source_config.repo_url:", "required"}},
		{"hosted repo_ref missing", withConfig(hosted, "source_revision_config", "repo_ref", deleteField), []string{"source_revision_config.repo_ref:", "required"}},
		{"hosted graph_config_path missing", withConfig(hosted, "source_revision_config", "graph_config_path", deleteField), []string{"source_revision_config.graph_config_path:", "required"}},
		{"hosted image_uri forbidden", withConfig(hosted, "source_revision_config", "image_uri", "nginx:1"), []string{"source_revision_config.image_uri:"}},
		{"hosted build_on_push with tag", withConfig(withConfig(hosted, "source_config", "build_on_push", true), "source_revision_config", "repo_ref", "refs/tags/v1"), []string{"build_on_push:", "tag"}},
		{"hosted repo_url with credentials", withConfig(hosted, "source_config", "repo_url", "https://user:tok@github.com/a/b.git"), []string{"source_config.repo_url:", "credentials"}},
		{"docker image_uri missing", withConfig(image, "source_revision_config", "image_uri", deleteField), []string{"source_revision_config.image_uri:", "required"}},
		{"docker image_uri invalid", withConfig(image, "source_revision_config", "image_uri", "Not An Image"), []string{"source_revision_config.image_uri:"}},
		{"docker repo_url forbidden", withConfig(image, "source_config", "repo_url", repo), []string{"source_config.repo_url:"}},
		{"docker repo_ref forbidden", withConfig(image, "source_revision_config", "repo_ref", "main"), []string{"source_revision_config.repo_ref:"}},
		{"docker graph_config_path forbidden", withConfig(image, "source_revision_config", "graph_config_path", "g.json"), []string{"source_revision_config.graph_config_path:"}},
		{"docker build_on_push forbidden", withConfig(image, "source_config", "build_on_push", true), []string{"source_config.build_on_push:"}},
		{"docker install_command forbidden", withConfig(image, "source_config", "install_command", "npm i"), []string{"source_config.install_command:"}},
		{"docker build_command forbidden", withConfig(image, "source_config", "build_command", "make"), []string{"source_config.build_command:"}},
		{"negative cpu", spec(rs("cpu", -1)), []string{"source_config.resource_spec.cpu:"}},
		{"fractional scale", spec(rs("min_scale", 1.5)), []string{"source_config.resource_spec.min_scale:"}},
		{"min above max", spec(rs("min_scale", 3, "max_scale", 2)), []string{"source_config.resource_spec.min_scale:", "max_scale"}},
		{"queue min above max", spec(rs("queue_min_scale", 3, "queue_max_scale", 2)), []string{"queue_min_scale", "queue_max_scale"}},
		{"orchestrator min above max", spec(rs("orchestrator_min_scale", 3, "orchestrator_max_scale", 1)), []string{"orchestrator_min_scale"}},
		{"cpu above limit", spec(rs("cpu", 2, "cpu_limit", 1)), []string{"source_config.resource_spec.cpu:", "cpu_limit"}},
		{"memory above limit", spec(rs("memory_mb", 4096, "memory_limit_mb", 1024)), []string{"memory_mb", "memory_limit_mb"}},
		{"queue cpu above limit", spec(rs("queue_cpu", 2, "queue_cpu_limit", 1)), []string{"queue_cpu", "queue_cpu_limit"}},
		{"orchestrator memory above limit", spec(rs("orchestrator_memory_mb", 2, "orchestrator_memory_limit_mb", 1)), []string{"orchestrator_memory_mb"}},
		{"db memory above limit", spec(rs("db_memory_mb", 2, "db_memory_limit_mb", 1)), []string{"db_memory_mb"}},
		{"db cpu above limit", spec(rs("db_cpu", 2, "db_cpu_limit", 1)), []string{"db_cpu"}},
		{"volume without name", spec(rs("volumes", []any{map[string]any{"emptyDir": map[string]any{}}})), []string{"volumes[0].name"}},
		{"volume mount without name", spec(rs("volume_mounts", []any{map[string]any{"mountPath": "/x"}})), []string{"volume_mounts[0].name"}},
		{"sidecar without image", spec(rs("sidecars", []any{map[string]any{"name": "s"}})), []string{"sidecars[0].image"}},
		{"init container without name", spec(rs("init_containers", []any{map[string]any{"image": "busybox"}})), []string{"init_containers[0].name"}},
		{"pull secret without name", spec(rs("image_pull_secrets", []any{map[string]any{}})), []string{"image_pull_secrets[0].name"}},
		{"secret bad name", with(hosted, "secrets", []any{map[string]any{"name": "1BAD", "value": "x"}}), []string{"secrets[0].name:"}},
		{"secret reserved", with(hosted, "secrets", []any{map[string]any{"name": "POSTGRES_URI", "value": "x"}}), []string{"secrets[0].name:", "reserved"}},
		{"secret duplicate", with(hosted, "secrets", []any{map[string]any{"name": "A", "value": "x"}, map[string]any{"name": "A", "value": "y"}}), []string{"secrets[1].name:", "duplicate"}},
		{"secret value missing", with(hosted, "secrets", []any{map[string]any{"name": "A"}}), []string{"secrets[0].value"}},
		{"deployment_type unknown", withConfig(hosted, "source_config", "deployment_type", "huge"), []string{"source_config.deployment_type:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v2/deployments", e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			d := r.detail(t)
			for _, frag := range c.detail {
				if !strings.Contains(d, frag) {
					t.Errorf("detail %q does not contain %q", d, frag)
				}
			}
		})
	}
	if got := e.must(200, "GET", "/v2/deployments", e.keyA, nil); len(got["resources"].([]any)) != 0 {
		t.Errorf("rejected requests left records: %v", got)
	}
	// A complete, valid resource_spec round-trips.
	full := rs("min_scale", 1, "max_scale", 3, "cpu", 0.5, "cpu_limit", 1, "memory_mb", 512, "memory_limit_mb", 1024,
		"labels", map[string]any{"team": "a"}, "service_account_name", "sa",
		"volumes", []any{map[string]any{"name": "v", "emptyDir": map[string]any{}}},
		"sidecars", []any{map[string]any{"name": "s", "image": "busybox:1", "args": []any{"-v"}}})
	d := e.must(201, "POST", "/v2/deployments", e.keyA, spec(full))
	got := d["source_config"].(map[string]any)["resource_spec"].(map[string]any)
	for k, v := range full {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("resource_spec.%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestDeploymentNameConflictAndIsolation(t *testing.T) {
	e := newEnv(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("same"))
	r := e.do("POST", "/v2/deployments", e.keyA, imageDeployment("same"))
	if r.Status != http.StatusConflict || !strings.Contains(r.detail(t), "name") {
		t.Errorf("duplicate name: %d %s", r.Status, r.Body)
	}
	e.must(201, "POST", "/v2/deployments", e.keyB, imageDeployment("same"))

	id := d["id"].(string)
	rid := d["latest_revision_id"].(string)
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v2/deployments/" + id, nil},
		{"PATCH", "/v2/deployments/" + id, map[string]any{"source_config": map[string]any{"custom_url": "https://x.test"}}},
		{"DELETE", "/v2/deployments/" + id, nil},
		{"GET", "/v2/deployments/" + id + "/revisions", nil},
		{"POST", "/v2/deployments/" + id + "/revisions", map[string]any{}},
		{"GET", "/v2/deployments/" + id + "/revisions/" + rid, nil},
		{"POST", "/v2/deployments/" + id + "/revisions/" + rid + "/redeploy", nil},
	} {
		r := e.do(req.method, req.path, e.keyB, req.body)
		if r.Status != http.StatusNotFound || strings.Contains(string(r.Body), "ghcr.io") {
			t.Errorf("%s %s as another org: %d %s", req.method, req.path, r.Status, r.Body)
		}
	}
	list := e.must(200, "GET", "/v2/deployments", e.keyB, nil)
	for _, x := range list["resources"].([]any) {
		if x.(map[string]any)["id"] == id {
			t.Errorf("beta lists alpha's deployment")
		}
	}
	e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil)
}

func TestDeploymentListPaging(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment(fmt.Sprintf("page-%d", i)))
	}
	e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("other"))
	page := e.must(200, "GET", "/v2/deployments?limit=2&name_contains=page", e.keyA, nil)
	res := page["resources"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["name"] != "page-4" || page["offset"] != float64(2) {
		t.Fatalf("first page: %v", page)
	}
	next := e.must(200, "GET", "/v2/deployments?limit=2&offset=4&name_contains=page", e.keyA, nil)
	if r := next["resources"].([]any); len(r) != 1 || r[0].(map[string]any)["name"] != "page-0" {
		t.Errorf("last page: %v", next)
	}
	e.waitFor(e.keyA, "/v2/deployments?status=READY&name_contains=page", func(m map[string]any) bool {
		return len(m["resources"].([]any)) == 5
	})
}

func TestDeploymentPatchAndRevisions(t *testing.T) {
	e := newEnv(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, with(imageDeployment("patchy"),
		"secrets", []any{map[string]any{"name": "KEEP", "value": secret("keep-8Jd")}, map[string]any{"name": "DROP", "value": secret("drop-3Kd")}}))
	id := d["id"].(string)
	first := d["latest_revision_id"]
	e.waitFor(e.keyA, "/v2/deployments/"+id, status("READY"))

	// custom_url changes in place: no new revision.
	up := newLoopbackServer(t, 204)
	p := e.must(200, "PATCH", "/v2/deployments/"+id, e.keyA, map[string]any{"source_config": map[string]any{"custom_url": up}})
	if p["latest_revision_id"] != first || p["source_config"].(map[string]any)["custom_url"] != up {
		t.Errorf("custom_url PATCH: %v", p)
	}
	// Secrets: mask keeps, null removes, new one added, unlisted ones carry over → new revision.
	p = e.must(200, "PATCH", "/v2/deployments/"+id, e.keyA, map[string]any{"secrets": []any{
		map[string]any{"name": "DROP", "value": nil},
		map[string]any{"name": "NEW", "value": secret("new-5Lq")},
	}})
	if p["latest_revision_id"] == first {
		t.Fatalf("secret change made no revision")
	}
	names := map[string]bool{}
	for _, s := range p["secrets"].([]any) {
		m := s.(map[string]any)
		names[m["name"].(string)] = true
		if m["value"] != "********" {
			t.Errorf("secret %v not masked", m)
		}
	}
	if !names["KEEP"] || !names["NEW"] || names["DROP"] {
		t.Errorf("secrets after PATCH: %v", names)
	}
	// Immutable fields.
	for _, body := range []map[string]any{
		{"name": "renamed"},
		{"source": "hosted_repo"},
	} {
		r := e.do("PATCH", "/v2/deployments/"+id, e.keyA, body)
		if r.Status != 422 || !strings.Contains(r.detail(t), "cannot be changed") {
			t.Errorf("PATCH %v: %d %s", body, r.Status, r.Body)
		}
	}
	// Explicit revision (201, always), then roll back to the first.
	rev := e.must(201, "POST", "/v2/deployments/"+id+"/revisions", e.keyA, map[string]any{
		"source_revision_config": map[string]any{"image_uri": "ghcr.io/acme/agent:2.0"}})
	if rev["id"] == nil || rev["source_revision_config"].(map[string]any)["image_uri"] != "ghcr.io/acme/agent:2.0" {
		t.Errorf("revision: %v", rev)
	}
	e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == rev["id"] })
	list := e.must(200, "GET", "/v2/deployments/"+id+"/revisions", e.keyA, nil)
	revs := list["resources"].([]any)
	if len(revs) < 3 || revs[0].(map[string]any)["id"] != rev["id"] || revs[len(revs)-1].(map[string]any)["id"] != first {
		t.Errorf("revisions not newest first: %v", revs)
	}
	back := e.must(200, "POST", fmt.Sprintf("/v2/deployments/%s/revisions/%s/redeploy", id, first), e.keyA, nil)
	if back["id"] != id {
		t.Errorf("redeploy answer: %v", back)
	}
	e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == first })
	e.must(404, "POST", fmt.Sprintf("/v2/deployments/%s/revisions/%s/redeploy", id, "00000000-0000-0000-0000-000000000000"), e.keyA, nil)
}

func TestDeploymentDelete(t *testing.T) {
	e := newEnv(t)
	d := e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("doomed"))
	id := d["id"].(string)
	r := e.do("DELETE", "/v2/deployments/"+id, e.keyA, nil)
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do("GET", "/v2/deployments/"+id, e.keyA, nil)
		if r.Status == 404 {
			break
		}
		if s := r.json(t)["status"]; r.Status != 200 || s != "AWAITING_DELETE" {
			t.Fatalf("while deleting: %d %v", r.Status, s)
		}
		if time.Now().After(deadline) {
			t.Fatal("deployment never went away")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The name is free again.
	e.must(201, "POST", "/v2/deployments", e.keyA, imageDeployment("doomed"))
}

func TestDeploymentIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	body := imageDeployment("idem")
	a := e.do("POST", "/v2/deployments", e.keyA, body, "Idempotency-Key", "dep-1")
	b := e.do("POST", "/v2/deployments", e.keyA, body, "Idempotency-Key", "dep-1")
	if a.Status != 201 || b.Status != 201 || a.json(t)["id"] != b.json(t)["id"] {
		t.Fatalf("retry created another: %s / %s", a.Body, b.Body)
	}
	c := e.do("POST", "/v2/deployments", e.keyA, with(body, "name", "idem-two"), "Idempotency-Key", "dep-1")
	if c.Status != 409 {
		t.Errorf("same key, other body: %d", c.Status)
	}
	list := e.must(200, "GET", "/v2/deployments", e.keyA, nil)
	if n := len(list["resources"].([]any)); n != 1 {
		t.Errorf("%d deployments, want 1", n)
	}
}

// secretList is n secrets named S0..S(n-1) with value v.
func secretList(n int, v any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("S%d", i), "value": v}
	}
	return out
}

// bigResourceSpec is a valid resource_spec whose JSON is over 64 KiB.
func bigResourceSpec() map[string]any {
	args := make([]any, 70)
	for i := range args {
		args[i] = strings.Repeat("a", 1000)
	}
	return map[string]any{"sidecars": []any{map[string]any{"name": "s", "image": "busybox:1", "args": args}}}
}

func manyLabels(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "v"
	}
	return m
}

// Create refuses edge values: reserved, empty, non-string, masked, oversized
// or too many secrets; two different config paths under both spellings; an
// unknown deployment_type; resource specs that are too large, hold numbers
// out of range, or too many or too long labels. No detail leaks Go
// internals. Exactly 100 secrets, and one path under both spellings, are
// accepted.
func TestDeploymentCreateEdgeValueRules(t *testing.T) {
	e := newEnv(t)
	image := imageDeployment("review")
	hosted := repoDeployment("review-repo", "https://github.com/acme/agent.git")
	sec := func(list ...any) map[string]any { return with(image, "secrets", list) }
	one := func(name string, value any) any { return map[string]any{"name": name, "value": value} }
	spec := func(s map[string]any) map[string]any {
		return with(image, "source_config", map[string]any{"resource_spec": s})
	}
	cases := []struct {
		name   string
		body   any
		detail []string
	}{
		{"secret LSD_ prefix", sec(one("LSD_TOKEN", "x")), []string{"secrets[0].name:", "reserved"}},
		{"secret empty value", sec(one("A", "")), []string{"secrets[0].value: must not be empty"}},
		{"secret number value", sec(one("A", 5)), []string{"secrets[0].value:", "want string"}},
		{"secret object value", sec(one("A", map[string]any{"v": "x"})), []string{"secrets[0].value:", "want string"}},
		{"secret null value", sec(one("A", nil)), []string{"secrets[0].value: is required"}},
		{"secret mask on create", sec(one("A", "********")), []string{"secrets[0].value:", "not the mask"}},
		{"too many secrets", with(image, "secrets", secretList(101, "x")), []string{"secrets: must have at most 100 entries"}},
		{"secret value too long", sec(one("A", strings.Repeat("v", 64<<10+1))), []string{"secrets[0].value: must be at most 65536 bytes"}},
		{"both config path spellings", with(hosted, "source_revision_config", map[string]any{
			"repo_ref": "main", "graph_config_path": "a.json", "langgraph_config_path": "b.json"}), []string{"langgraph_config_path", "graph_config_path"}},
		{"resource_spec too large", spec(bigResourceSpec()), []string{"source_config.resource_spec:", "64 KiB"}},
		{"resource_spec cpu huge", spec(map[string]any{"cpu": json.RawMessage("1e400")}), []string{"source_config.resource_spec.cpu: maximum: got a number out of range, want 1000000"}},
		{"resource_spec count huge", spec(map[string]any{"max_scale": 2000000}), []string{"source_config.resource_spec.max_scale: maximum: got 2000000, want 1000000"}},
		{"resource_spec cpu above bound", spec(map[string]any{"cpu": 1000000.5}), []string{"source_config.resource_spec.cpu: maximum: got 1000000.5, want 1000000"}},
		{"deployment_type unknown", with(image, "source_config", map[string]any{"deployment_type": "huge"}), []string{"source_config.deployment_type: value must be one of 'dev_free', 'dev', 'prod', 'serverless', 'dedicated'"}},
		{"resource_spec unknown number out of range", spec(map[string]any{"custom_thing": json.RawMessage("1e400")}),
			[]string{"source_config.resource_spec.custom_thing: must be a number within range"}},
		{"resource_spec nested number out of range", spec(map[string]any{"custom": map[string]any{"x": []any{1, json.RawMessage("-1e999")}}}),
			[]string{"source_config.resource_spec.custom.x[1]: must be a number within range"}},
		{"too many labels", spec(map[string]any{"labels": manyLabels(65)}), []string{"source_config.resource_spec.labels: maxProperties: got 65, want 64"}},
		{"label too long", spec(map[string]any{"annotations": map[string]any{"a": strings.Repeat("x", 1025)}}), []string{"source_config.resource_spec.annotations.a:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v2/deployments", e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %.300s", r.Status, r.Body)
			}
			d := r.detail(t)
			for _, frag := range c.detail {
				if !strings.Contains(d, frag) {
					t.Errorf("detail %q does not contain %q", d, frag)
				}
			}
			for _, noise := range []string{"float64", "want null", "<nil>", "×10"} {
				if strings.Contains(d, noise) {
					t.Errorf("detail %q contains %q", d, noise)
				}
			}
		})
	}
	// Exactly 100 secrets and the same path under both spellings are fine.
	e.must(201, "POST", "/v2/deployments", e.keyA, with(image, "name", "hundred", "secrets", secretList(100, secret("hundred-Zp4"))))
	e.must(201, "POST", "/v2/deployments", e.keyA, with(hosted, "name", "both-same", "source_revision_config", map[string]any{
		"repo_ref": "main", "graph_config_path": "a.json", "langgraph_config_path": "a.json"}))
}

// deployReady creates a deployment and waits until it is READY.
func (e *env) deployReady(body map[string]any) (id, rev string) {
	e.t.Helper()
	d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
	id = d["id"].(string)
	e.waitFor(e.keyA, "/v2/deployments/"+id, status("READY"))
	return id, d["latest_revision_id"].(string)
}

func TestDeploymentPatchRules(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig})
	hostedID, hostedRev := e.deployReady(repoDeployment("patch-hosted", repo))
	imageID, imageRev := e.deployReady(with(imageDeployment("patch-image"),
		"secrets", []any{map[string]any{"name": "KEEP", "value": secret("keep-Rv2")}}))
	sc := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return map[string]any{"source_config": m}
	}
	cases := []struct {
		name   string
		id     string
		body   any
		detail []string
	}{
		{"repo_url", hostedID, sc("repo_url", "https://github.com/acme/other.git"), []string{"source_config.repo_url: cannot be changed"}},
		{"integration_id", hostedID, sc("integration_id", "int-1"), []string{"source_config.integration_id: cannot be changed"}},
		{"deployment_type", hostedID, sc("deployment_type", "prod"), []string{"source_config.deployment_type: cannot be changed"}},
		{"listener_id", imageID, sc("listener_id", "listener-1"), []string{"source_config.listener_id: cannot be changed"}},
		{"name", imageID, map[string]any{"name": "other"}, []string{"name: cannot be changed"}},
		{"read-only id", imageID, map[string]any{"id": imageID}, []string{"id: is read-only"}},
		{"read-only status", imageID, map[string]any{"status": "READY"}, []string{"status: is read-only"}},
		{"read-only latest_revision_id", imageID, map[string]any{"latest_revision_id": imageRev}, []string{"latest_revision_id: is read-only"}},
		{"read-only created_at", imageID, map[string]any{"created_at": "2024-01-01T00:00:00Z"}, []string{"created_at: is read-only"}},
		{"read-only repo_commit_sha", hostedID, map[string]any{"source_revision_config": map[string]any{"repo_commit_sha": "abc"}}, []string{"source_revision_config.repo_commit_sha:", "read-only"}},
		{"build_on_push with tag ref", hostedID, map[string]any{
			"source_config": map[string]any{"build_on_push": true}, "source_revision_config": map[string]any{"repo_ref": "refs/tags/v1"}},
			[]string{"source_config.build_on_push: cannot be true when repo_ref is a tag"}},
		{"both config path spellings", hostedID, map[string]any{"source_revision_config": map[string]any{
			"graph_config_path": "a.json", "langgraph_config_path": "b.json"}}, []string{"langgraph_config_path", "graph_config_path"}},
		{"resource_spec cpu string", imageID, sc("resource_spec", map[string]any{"cpu": "1"}), []string{"source_config.resource_spec.cpu: got string, want number"}},
		{"resource_spec too large", imageID, sc("resource_spec", bigResourceSpec()), []string{"source_config.resource_spec:", "64 KiB"}},
		{"resource_spec number out of range", imageID, sc("resource_spec", map[string]any{"extra": json.RawMessage("1e400")}), []string{"source_config.resource_spec.extra: must be a number within range"}},
		{"build_on_push type", hostedID, sc("build_on_push", "yes"), []string{"source_config.build_on_push: got string, want boolean"}},
		{"secret mask for a missing secret", imageID, map[string]any{"secrets": []any{map[string]any{"name": "NOPE", "value": "********"}}}, []string{"secrets[0].value:", "no secret NOPE"}},
		{"secret LSD_ prefix", imageID, map[string]any{"secrets": []any{map[string]any{"name": "LSD_X", "value": "v"}}}, []string{"secrets[0].name:", "reserved"}},
		{"secret empty", imageID, map[string]any{"secrets": []any{map[string]any{"name": "A", "value": ""}}}, []string{"secrets[0].value: must not be empty"}},
		{"secret value missing", imageID, map[string]any{"secrets": []any{map[string]any{"name": "A"}}}, []string{"secrets[0].value: is required"}},
		{"too many secrets", imageID, map[string]any{"secrets": secretList(101, "x")}, []string{"secrets: must have at most 100 entries"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("PATCH", "/v2/deployments/"+c.id, e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %.300s", r.Status, r.Body)
			}
			d := r.detail(t)
			for _, frag := range c.detail {
				if !strings.Contains(d, frag) {
					t.Errorf("detail %q does not contain %q", d, frag)
				}
			}
			if strings.Contains(d, "want null") || strings.Contains(d, "float64") {
				t.Errorf("detail %q has noise", d)
			}
		})
	}
	for id, rev := range map[string]string{hostedID: hostedRev, imageID: imageRev} {
		if got := e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil); got["latest_revision_id"] != rev {
			t.Errorf("a rejected PATCH made a revision: %v", got)
		}
	}
	// A tag ref without build_on_push is fine; then build_on_push cannot be turned on.
	tagged := repoDeployment("patch-tag", repo)
	tagged["source_revision_config"] = map[string]any{"repo_ref": "refs/tags/v1", "graph_config_path": "langgraph.json"}
	d := e.must(201, "POST", "/v2/deployments", e.keyA, tagged)
	r := e.do("PATCH", "/v2/deployments/"+d["id"].(string), e.keyA, sc("build_on_push", true))
	if r.Status != 422 || !strings.Contains(r.detail(t), "source_config.build_on_push: cannot be true when repo_ref is a tag") {
		t.Errorf("build_on_push on a tag ref: %d %s", r.Status, r.Body)
	}
}

func TestDeploymentPatchRevisionRules(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig})
	hostedID, _ := e.deployReady(repoDeployment("rev-hosted", repo))
	imageID, _ := e.deployReady(with(imageDeployment("rev-image"),
		"secrets", []any{map[string]any{"name": "KEEP", "value": secret("keep-Tq8")}}))
	latest := func(id string) any {
		return e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil)["latest_revision_id"]
	}
	cases := []struct {
		name    string
		id      string
		body    map[string]any
		revises bool
	}{
		{"secret mask sent back", imageID, map[string]any{"secrets": []any{map[string]any{"name": "KEEP", "value": "********"}}}, false},
		{"null for a missing secret", imageID, map[string]any{"secrets": []any{map[string]any{"name": "NEVER", "value": nil}}}, false},
		{"empty secrets list", imageID, map[string]any{"secrets": []any{}}, false},
		{"empty body object", imageID, map[string]any{}, false},
		{"build_on_push", hostedID, map[string]any{"source_config": map[string]any{"build_on_push": true}}, false},
		{"install_command", hostedID, map[string]any{"source_config": map[string]any{"install_command": "pip install ."}}, false},
		{"new secret value", imageID, map[string]any{"secrets": []any{map[string]any{"name": "KEEP", "value": secret("keep-rotated-Wm3")}}}, true},
		{"secret removed", imageID, map[string]any{"secrets": []any{map[string]any{"name": "KEEP", "value": nil}}}, true},
		{"resource_spec", imageID, map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{"cpu": 1, "min_scale": 1}}}, true},
		{"source_revision_config image_uri", imageID, map[string]any{"source_revision_config": map[string]any{"image_uri": "ghcr.io/acme/agent:9"}}, true},
		{"source_revision_config repo_ref", hostedID, map[string]any{"source_revision_config": map[string]any{"repo_ref": "main"}}, true},
		{"langgraph_config_path alias", hostedID, map[string]any{"source_revision_config": map[string]any{"langgraph_config_path": "langgraph.json"}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := latest(c.id)
			got := e.must(200, "PATCH", "/v2/deployments/"+c.id, e.keyA, c.body)
			if revised := got["latest_revision_id"] != before; revised != c.revises {
				t.Errorf("new revision: %v, want %v (%v → %v)", revised, c.revises, before, got["latest_revision_id"])
			}
			if c.revises {
				rev := e.must(200, "GET", fmt.Sprintf("/v2/deployments/%s/revisions/%s", c.id, got["latest_revision_id"]), e.keyA, nil)
				if c.name == "resource_spec" && rev["resource_spec"].(map[string]any)["cpu"] != float64(1) {
					t.Errorf("revision resource_spec: %v", rev["resource_spec"])
				}
			}
		})
	}
	got := e.must(200, "GET", "/v2/deployments/"+hostedID, e.keyA, nil)
	if cfg := got["source_config"].(map[string]any); cfg["build_on_push"] != true || cfg["install_command"] != "pip install ." {
		t.Errorf("in-place changes lost: %v", cfg)
	}
}

func TestRevisionCreateRules(t *testing.T) {
	e := newEnv(t)
	id, rev := e.deployReady(imageDeployment("rev-rules"))
	cases := []struct {
		name   string
		body   any
		detail []string
	}{
		{"id", map[string]any{"id": rev}, []string{"id: is read-only"}},
		{"status", map[string]any{"status": "DEPLOYED"}, []string{"status: is read-only"}},
		{"tenant_id", map[string]any{"tenant_id": "t"}, []string{"tenant_id: is read-only"}},
		{"created_at", map[string]any{"created_at": "2024-01-01T00:00:00Z"}, []string{"created_at: is read-only"}},
		{"latest_revision_id", map[string]any{"latest_revision_id": rev}, []string{"latest_revision_id: is read-only"}},
		{"active_revision_id", map[string]any{"active_revision_id": rev}, []string{"active_revision_id: is read-only"}},
		{"image_version", map[string]any{"image_version": "1"}, []string{"image_version: is read-only"}},
		{"repo_commit_sha", map[string]any{"source_revision_config": map[string]any{"repo_commit_sha": "abc"}}, []string{"source_revision_config.repo_commit_sha:", "read-only"}},
		{"name", map[string]any{"name": "rev-rules"}, []string{"name:", "cannot be set on a revision"}},
		{"source", map[string]any{"source": "external_docker"}, []string{"source:", "cannot be set on a revision"}},
		{"source_config other than resource_spec", map[string]any{"source_config": map[string]any{"custom_url": "https://x.test"}}, []string{"source_config:", "only resource_spec"}},
		{"resource_spec cpu string", map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{"cpu": "1"}}}, []string{"source_config.resource_spec.cpu: got string, want number"}},
		{"secret mask on a missing secret", map[string]any{"secrets": []any{map[string]any{"name": "NOPE", "value": "********"}}}, []string{"secrets[0].value:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v2/deployments/"+id+"/revisions", e.keyA, c.body)
			if r.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			d := r.detail(t)
			for _, frag := range c.detail {
				if !strings.Contains(d, frag) {
					t.Errorf("detail %q does not contain %q", d, frag)
				}
			}
			if strings.Contains(d, "want null") {
				t.Errorf("detail %q has null-branch noise", d)
			}
		})
	}
	if got := e.must(200, "GET", "/v2/deployments/"+id, e.keyA, nil); got["latest_revision_id"] != rev {
		t.Errorf("a rejected revision request made a revision: %v", got)
	}
}

func TestRevisionListPagingAndStatus(t *testing.T) {
	e := newEnv(t)
	id, first := e.deployReady(imageDeployment("rev-pages"))
	ids := []string{first}
	for i := range 3 {
		r := e.must(201, "POST", "/v2/deployments/"+id+"/revisions", e.keyA, map[string]any{
			"source_revision_config": map[string]any{"image_uri": fmt.Sprintf("ghcr.io/acme/agent:%d", i+2)}})
		ids = append(ids, r["id"].(string))
	}
	newest := ids[len(ids)-1]
	e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == newest })
	base := "/v2/deployments/" + id + "/revisions"
	// Every revision settles once the newest is active: none stays unsettled
	// after it was superseded (a revision overtaken while deploying is SKIPPED).
	e.waitFor(e.keyA, base+"?status=DEPLOYED,SKIPPED", func(m map[string]any) bool { return len(m["resources"].([]any)) == 4 })

	pageIDs := func(m map[string]any) []string {
		var out []string
		for _, r := range m["resources"].([]any) {
			out = append(out, r.(map[string]any)["id"].(string))
		}
		return out
	}
	p1 := e.must(200, "GET", base+"?limit=2", e.keyA, nil)
	if got := pageIDs(p1); len(got) != 2 || got[0] != ids[3] || got[1] != ids[2] || p1["offset"] != float64(2) {
		t.Errorf("first page: %v (offset %v), want %v", got, p1["offset"], []string{ids[3], ids[2]})
	}
	p2 := e.must(200, "GET", base+"?limit=2&offset=2", e.keyA, nil)
	if got := pageIDs(p2); len(got) != 2 || got[0] != ids[1] || got[1] != ids[0] || p2["offset"] != float64(4) {
		t.Errorf("second page: %v (offset %v)", got, p2["offset"])
	}
	p3 := e.must(200, "GET", base+"?limit=2&offset=4", e.keyA, nil)
	if got := pageIDs(p3); len(got) != 0 || p3["offset"] != float64(4) {
		t.Errorf("past the end: %v (offset %v)", got, p3["offset"])
	}
	deployed := e.must(200, "GET", base+"?status=DEPLOYED", e.keyA, nil)
	found := false
	for _, r := range deployed["resources"].([]any) {
		m := r.(map[string]any)
		if m["status"] != "DEPLOYED" {
			t.Errorf("status filter let through %v", m["status"])
		}
		found = found || m["id"] == newest
	}
	if !found {
		t.Errorf("status=DEPLOYED misses the active revision: %v", deployed)
	}
	if got := e.must(200, "GET", base+"?status=CREATE_FAILED", e.keyA, nil); len(got["resources"].([]any)) != 0 {
		t.Errorf("status=CREATE_FAILED: %v", got)
	}
	for _, q := range []struct{ query, detail string }{
		{"?status=BOGUS", "status:"},
		{"?status=DEPLOYED,nope", "status:"},
		{"?limit=0", "limit:"},
		{"?limit=101", "limit:"},
		{"?offset=-1", "offset:"},
		{"?limit=x", "limit:"},
	} {
		r := e.do("GET", base+q.query, e.keyA, nil)
		if r.Status != 422 || !strings.Contains(r.detail(t), q.detail) {
			t.Errorf("GET %s: %d %s", q.query, r.Status, r.Body)
		}
	}
	e.must(404, "GET", "/v2/deployments/00000000-0000-0000-0000-000000000000/revisions", e.keyA, nil)
}

func TestRedeployFailedRevision(t *testing.T) {
	e := newEnv(t)
	body := imageDeployment("redeploy-failed")
	body["source_config"] = map[string]any{"custom_url": "http://127.0.0.1:1/"}
	d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, rev), status("DEPLOY_FAILED"))
	r := e.do("POST", fmt.Sprintf("/v2/deployments/%s/revisions/%s/redeploy", id, rev), e.keyA, nil)
	if r.Status != http.StatusBadRequest || !strings.Contains(r.detail(t), "DEPLOY_FAILED") {
		t.Errorf("redeploy of a failed revision: %d %s", r.Status, r.Body)
	}
	if got := e.must(200, "GET", fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, rev), e.keyA, nil); got["status"] != "DEPLOY_FAILED" {
		t.Errorf("refused redeploy changed the revision: %v", got["status"])
	}
}

// newSlowServer is a runtime that describes minimalGraphConfig after delay.
func newSlowServer(t *testing.T, delay time.Duration) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		if !describeConfig(w, r) {
			w.WriteHeader(http.StatusOK)
		}
	})}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

func TestRevisionSupersededWhileDeployingIsSkipped(t *testing.T) {
	e := newEnv(t)
	body := imageDeployment("skipper")
	body["source_config"] = map[string]any{"custom_url": newSlowServer(t, time.Second)}
	d := e.must(201, "POST", "/v2/deployments", e.keyA, body)
	id, first := d["id"].(string), d["latest_revision_id"].(string)
	firstPath := fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, first)
	e.waitFor(e.keyA, firstPath, status("DEPLOYING"))
	second := e.must(201, "POST", "/v2/deployments/"+id+"/revisions", e.keyA, map[string]any{
		"source_revision_config": map[string]any{"image_uri": "ghcr.io/acme/agent:2"}})["id"].(string)

	skipped := e.waitFor(e.keyA, firstPath, func(m map[string]any) bool { return m["status"] != "DEPLOYING" })
	if skipped["status"] != "SKIPPED" {
		t.Fatalf("first revision ended %v, want SKIPPED", skipped["status"])
	}
	if msg, _ := skipped["status_message"].(string); !strings.Contains(msg, second) {
		t.Errorf("status_message %q does not name the newer revision %s", msg, second)
	}
	got := e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == second })
	if got["status"] != "READY" {
		t.Errorf("deployment: %v", got)
	}
	e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, second), status("DEPLOYED"))
	// A skipped revision never deployed; it can be redeployed (it is not failed).
	e.must(200, "POST", fmt.Sprintf("/v2/deployments/%s/revisions/%s/redeploy", id, first), e.keyA, nil)
	e.waitFor(e.keyA, "/v2/deployments/"+id, func(m map[string]any) bool { return m["active_revision_id"] == first })
}
