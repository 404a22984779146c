package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/sources/gittest"
)

// F3: a plain `stepgraph serve` reads no local repository; with
// -allow-local-repos it reads those under the directories named, and
// nothing else (/proc among the rest), refused when the deployment is
// created.
func TestAllowLocalRepos(t *testing.T) {
	allowed := t.TempDir()
	repo := gittest.Repo(t, map[string][]byte{"langgraph.json": []byte(`{"graphs": {"hello": {"state": {"greeting": {}},
		"nodes": {"greet": {"kind": "transform", "update": {"greeting": "hi"}}},
		"edges": [{"from": "__start__", "to": "greet"}]}}}`)})
	inside := filepath.Join(allowed, "agent")
	if out, err := exec.Command("git", "clone", "-q", repo, inside).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v %s", err, out)
	}
	body := func(name, url string) string {
		return fmt.Sprintf(`{"name": %q, "source": "hosted_repo", "source_config": {"repo_url": %q},
			"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, name, url)
	}

	dir := t.TempDir()
	s := startServer(t, dir)
	key := createKey(t, dir, "default")
	code, out := s.call("POST", "/v2/deployments", key, body("off", "file://"+inside))
	if code != 422 || !strings.Contains(out, "source_config.repo_url: must be an https:// URL: local repositories (file:// URLs and local paths) are disabled on this server") {
		t.Errorf("without the flag: %d %s", code, out)
	}

	dir = t.TempDir()
	s = startServer(t, dir, "-allow-local-repos", allowed)
	key = createKey(t, dir, "default")
	for _, url := range []string{"file://" + repo, "file:///proc/self/cwd", "file:///etc"} {
		code, out := s.call("POST", "/v2/deployments", key, body("outside", url))
		if code != 422 || !strings.Contains(out, "source_config.repo_url: must name a repository inside the directories this server allows for local repositories") {
			t.Errorf("%s: %d %s", url, code, out)
		}
	}
	code, out = s.call("POST", "/v2/deployments", key, body("inside", "file://"+inside))
	if code != 201 {
		t.Fatalf("inside: %d %s", code, out)
	}
	var d struct {
		ID               string `json:"id"`
		LatestRevisionID string `json:"latest_revision_id"`
	}
	_ = json.Unmarshal([]byte(out), &d)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, out := s.call("GET", "/v2/deployments/"+d.ID+"/revisions/"+d.LatestRevisionID, key, "")
		if strings.Contains(out, `"status":"DEPLOYED"`) {
			break
		}
		if strings.Contains(out, `FAILED"`) || time.Now().After(deadline) {
			t.Fatalf("revision: %s", out)
		}
	}
}

// The flag's directories are checked at start: a typo stops the server
// with a message naming the flag, not a server that refuses every
// repository later.
func TestAllowLocalReposChecked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	writeTestFile(t, file, "x")
	for _, arg := range []string{filepath.Join(t.TempDir(), "missing"), file, "/proc", t.TempDir() + ",,"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, binary, "serve", "-data", t.TempDir(), "-addr", "127.0.0.1:0",
			"-allow-local-repos", arg).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "-allow-local-repos: ") {
			t.Errorf("-allow-local-repos %s: %v %s", arg, err, out)
		}
	}
}
