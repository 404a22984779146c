package api_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/sources/gittest"
)

// failedRevision creates a hosted_repo deployment from repoURL (201) and
// waits for its revision to fail; it returns the revision.
func (e *env) failedRevision(name, repoURL string) map[string]any {
	e.t.Helper()
	d := e.must(201, "POST", "/v2/deployments", e.keyA, repoDeployment(name, repoURL))
	path := fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"])
	return e.waitFor(e.keyA, path, func(m map[string]any) bool { return strings.HasSuffix(m["status"].(string), "FAILED") })
}

// deployedRevision creates a hosted_repo deployment and waits until its
// revision is DEPLOYED.
func (e *env) deployedRevision(name, repoURL string) map[string]any {
	e.t.Helper()
	d := e.must(201, "POST", "/v2/deployments", e.keyA, repoDeployment(name, repoURL))
	path := fmt.Sprintf("/v2/deployments/%s/revisions/%s", d["id"], d["latest_revision_id"])
	rev := e.waitFor(e.keyA, path, func(m map[string]any) bool {
		s := m["status"].(string)
		return s == "DEPLOYED" || strings.HasSuffix(s, "FAILED")
	})
	if rev["status"] != "DEPLOYED" {
		e.t.Fatalf("revision from %s: %v", repoURL, rev)
	}
	return rev
}

// F3, F18: a repo_url the server will not read is refused when the
// deployment is created, naming the field and the rule: local paths
// outside the allowed directories (another tenant's checkout, /etc,
// /proc/self/cwd), schemes other than https and file, and tokens in the
// query. Nothing of the refused URL's secrets is shown or kept (the
// suite's leak scan).
func TestRepoURLRefused(t *testing.T) {
	e := newEnv(t)
	elsewhere := gitRepoAt(t, t.TempDir()) // a real repository outside the allowed directory
	token := secret("QUERYT0KEN-7Hd2")
	const localRule = "source_config.repo_url: must name a repository inside the directories this server allows for local repositories"
	const schemeRule = "source_config.repo_url: must be an absolute https:// or file:// URL"
	tests := []struct {
		name, url, want string
	}{
		{"a repository outside the allowed directories", elsewhere, localRule},
		{"/etc", "file:///etc", localRule},
		{"/proc/self/cwd", "file:///proc/self/cwd", localRule},
		{"out of the allowed directory by ..", "file://" + repoRoot + "/../" + filepath.Base(elsewhere), localRule},
		{"ssh", "ssh://example.com/org/agent.git", schemeRule},
		{"git protocol", "git://example.com/org/agent.git", schemeRule},
		{"plain http", "http://example.com/org/agent.git", schemeRule},
		{"scp-like", "git@example.com:org/agent.git", schemeRule},
		{"a token in the query", "https://example.com/org/agent.git?access_token=" + token, "source_config.repo_url: must not contain a query string or a fragment"},
		{"a fragment", "https://example.com/org/agent.git#" + token, "source_config.repo_url: must not contain a query string or a fragment"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.do("POST", "/v2/deployments", e.keyA, repoDeployment(fmt.Sprintf("refused-%d", i), tt.url))
			if res.Status != 422 || !strings.Contains(res.detail(t), tt.want) {
				t.Fatalf("%d %s, want 422 with %q", res.Status, res.Body, tt.want)
			}
		})
	}
	if got := e.must(200, "GET", "/v2/deployments", e.keyA, nil)["resources"].([]any); len(got) != 0 {
		t.Errorf("refused deployments were stored: %v", got)
	}
}

// F3: local repositories are off unless the operator allows directories.
func TestLocalReposOffByDefault(t *testing.T) {
	e := newEnv(t, withSources(&git.Checker{}))
	repo := gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig})
	res := e.do("POST", "/v2/deployments", e.keyA, repoDeployment("local-off", repo))
	want := "source_config.repo_url: must be an https:// URL: local repositories (file:// URLs and local paths) are disabled on this server"
	if res.Status != 422 || !strings.Contains(res.detail(t), want) {
		t.Fatalf("%d %s, want 422 with %q", res.Status, res.Body, want)
	}
}

// F3: what a file:// URL inside the allowed directory reaches is checked
// when the revision is built: a link out of it fails the build, with the
// very message a missing path, a file or a directory that is not a
// repository gets — the status_message tells nothing about the host.
func TestLocalRepoConfined(t *testing.T) {
	e := newEnv(t)
	e.deployedRevision("inside", gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig}))

	dir := repoDir(t)
	outside := gitRepoAt(t, t.TempDir())
	link := filepath.Join(dir, "link-out")
	if err := os.Symlink(strings.TrimPrefix(outside, "file://"), link); err != nil {
		t.Fatal(err)
	}
	procLink := filepath.Join(dir, "link-proc")
	if err := os.Symlink("/proc/self/cwd", procLink); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{"link out": link, "link to /proc": procLink, "missing": filepath.Join(dir, "missing"),
		"a file": file, "not a repository": empty}
	i := 0
	for name, p := range paths {
		t.Run(name, func(t *testing.T) {
			i++
			rev := e.failedRevision(fmt.Sprintf("confined-%d", i), "file://"+p)
			msg, _ := rev["status_message"].(string)
			if want := `repository "file://` + p + `" not found or not readable`; rev["status"] != "BUILD_FAILED" || msg != want {
				t.Errorf("%v: %q, want BUILD_FAILED: %q", rev["status"], msg, want)
			}
		})
	}
}

// gitRepoAt makes a repository with a graph config in dir (gitRepo makes
// one under the allowed directory) and returns its file:// URL.
func gitRepoAt(t *testing.T, dir string) string {
	t.Helper()
	src := strings.TrimPrefix(gitRepo(t, map[string]string{"langgraph.json": minimalGraphConfig}), "file://")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, dir); err != nil {
		t.Fatal(err)
	}
	return "file://" + dir
}

// F4: an https repository on a loopback address is refused by the SSRF
// guard when the revision is built, however the address is spelled; the
// status_message names the rule, not a network error (no port scanning).
func TestGitFetchGuarded(t *testing.T) {
	e := newEnv(t) // the harness's checker: the default guarded client
	srv := gittest.NewServer(t)
	srv.AddFiles(t, "agent", map[string][]byte{"langgraph.json": []byte(minimalGraphConfig)})
	port := strings.TrimPrefix(srv.URL, "https://127.0.0.1:")
	for i, host := range []string{"127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0"} {
		t.Run(host, func(t *testing.T) {
			url := "https://" + host + ":" + port + "/agent.git"
			rev := e.failedRevision(fmt.Sprintf("loopback-%d", i), url)
			msg, _ := rev["status_message"].(string)
			want := `repository "` + url + `" not reachable: its host is a private, loopback, link-local or metadata address, which this server does not call`
			if rev["status"] != "BUILD_FAILED" || msg != want {
				t.Errorf("%v: %q, want BUILD_FAILED: %q", rev["status"], msg, want)
			}
		})
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("the git server answered %d requests", n)
	}
	// Closed ports read the same: the guard answers before any connection.
	rev := e.failedRevision("loopback-closed", "https://127.0.0.1:1/agent.git")
	if msg, _ := rev["status_message"].(string); !strings.Contains(msg, "private, loopback, link-local or metadata address") {
		t.Errorf("closed port: %q", msg)
	}
}

// F4, F6: over https the revision builds within the limits (a server whose
// guard lets it reach the test's git host), and fails naming the limit
// past the bytes fetched, the size of one object, or the time.
func TestGitFetchLimits(t *testing.T) {
	srv := gittest.NewServer(t)
	config := []byte(minimalGraphConfig)
	small := srv.AddFiles(t, "small", map[string][]byte{"langgraph.json": config})
	noise := make([]byte, 3<<20)
	_, _ = rand.Read(noise) // incompressible: 3 MiB on the wire
	large := srv.AddFiles(t, "large", map[string][]byte{"langgraph.json": config, "data.bin": noise})
	zeros := srv.AddFiles(t, "zeros", map[string][]byte{"langgraph.json": config, "zeros.bin": make([]byte, 4<<20)})
	hanging := "https://" + hangingListener(t) + "/agent.git"

	// Each server's checker reaches the test's git host (loopback).
	checker := func(c *git.Checker) *git.Checker {
		c.HTTPClient = srv.Client(true)
		return c
	}
	t.Run("within the limits", func(t *testing.T) {
		e := newEnv(t, withSources(checker(&git.Checker{MaxBytes: 1 << 20})))
		rev := e.deployedRevision("small", small)
		if sha, _ := rev["source_revision_config"].(map[string]any)["repo_commit_sha"].(string); len(sha) != 40 {
			t.Errorf("revision: %v", rev)
		}
	})
	tests := []struct {
		name    string
		checker *git.Checker
		url     string
		want    string
	}{
		{"bytes fetched", checker(&git.Checker{MaxBytes: 1 << 20}), large,
			`repository "` + large + `" is larger than this server's fetch limit of 1 MiB (a shallow fetch of ref "main" read more)`},
		{"one object", checker(&git.Checker{MaxObjectBytes: 1 << 20}), zeros,
			`repository "` + zeros + `" cannot be fetched at ref "main": it holds a file or object of 4 MiB, larger than this server's limit of 1 MiB per object`},
		{"time", checker(&git.Checker{Timeout: 300 * time.Millisecond}), hanging,
			`checking repository "` + hanging + `" timed out after 300ms (this server's time limit for a check)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, withSources(tt.checker))
			rev := e.failedRevision("limited", tt.url)
			if msg, _ := rev["status_message"].(string); rev["status"] != "BUILD_FAILED" || msg != tt.want {
				t.Errorf("%v: %q, want BUILD_FAILED: %q", rev["status"], msg, tt.want)
			}
		})
	}
}

// hangingListener accepts connections on 127.0.0.1 and never answers: a
// TLS handshake with it waits until the client gives up.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
