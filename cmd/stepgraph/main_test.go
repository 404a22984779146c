package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/testserver"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stepgraph-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "stepgraph")
	root, err := testserver.RepoRoot()
	if err == nil {
		err = testserver.Build(context.Background(), root, binary)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build stepgraph:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running "stepgraph serve" process of a test.
type server struct {
	*testserver.Server
	t *testing.T
}

// startServer runs the binary with -log-json and the extra serve flags on a
// free loopback port with dataDir and waits until it listens. It is stopped
// (SIGTERM, then SIGKILL) at test cleanup.
func startServer(t *testing.T, dataDir string, extra ...string) *server {
	t.Helper()
	return start(t, testserver.Options{DataDir: dataDir, Args: append([]string{"-log-json"}, extra...)})
}

// startNew is startServer on a new data directory: it also waits for the
// first API key the server prints (FirstKey).
func startNew(t *testing.T, dataDir string, extra ...string) *server {
	t.Helper()
	return start(t, testserver.Options{DataDir: dataDir, WaitKey: true, Args: append([]string{"-log-json"}, extra...)})
}

// start runs the binary as opts say.
func start(t *testing.T, opts testserver.Options) *server {
	t.Helper()
	opts.Binary = binary
	return &server{Server: testserver.StartT(t, opts), t: t}
}

func (s *server) call(method, path, key, body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func createKey(t *testing.T, dataDir, org string) string {
	t.Helper()
	out, err := exec.Command(binary, "keys", "create", "--org", org, "--data", dataDir).Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	key := strings.TrimSpace(string(out))
	if !testserver.KeyPattern.MatchString(key) || key != testserver.KeyPattern.FindString(key) {
		t.Fatalf("keys create printed %q, want only a key", out)
	}
	return key
}

func TestFirstStartPrintsOneKeyOnce(t *testing.T) {
	dir := t.TempDir()
	s := startNew(t, dir)
	key := s.FirstKey()
	if key == "" {
		t.Fatalf("first start printed no key:\n%s", s.Logs())
	}
	if code, body := s.call("GET", "/v2/auth/providers", key, ""); code != 200 {
		t.Fatalf("printed key does not work: %d %s", code, body)
	}
	if strings.Contains(s.Stderr(), key) {
		t.Errorf("the key appears in the log stream")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("SIGTERM did not stop the server cleanly (%v):\n%s", err, s.Logs())
	}
	again := startServer(t, dir)
	if k := testserver.KeyPattern.FindString(again.Stdout()); k != "" {
		t.Errorf("second start printed a key again")
	}
	if code, _ := again.call("GET", "/v2/auth/providers", key, ""); code != 200 {
		t.Errorf("first key lost after restart: %d", code)
	}
	fi, err := os.Stat(dir)
	if err == nil && fi.Mode().Perm()&0o077 != 0 {
		t.Logf("data dir %s mode %v (created by the test, not the server)", dir, fi.Mode())
	}
}

func TestKeysCreateIsolatesOrganizations(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	a := createKey(t, dir, "acme")
	b := createKey(t, dir, "globex")
	a2 := createKey(t, dir, "acme")
	if a == a2 {
		t.Fatalf("two keys are equal")
	}
	body := `{"provider_id":"p1","name":"P","client_id":"c","client_secret":"s-p1","auth_url":"https://a.test/a","token_url":"https://a.test/t"}`
	if code, out := s.call("POST", "/v2/auth/providers", a, body); code != 200 {
		t.Fatalf("create: %d %s", code, out)
	}
	if code, _ := s.call("GET", "/v2/auth/providers/p1", a2, ""); code != 200 {
		t.Errorf("second key of the same org cannot read: %d", code)
	}
	if code, _ := s.call("GET", "/v2/auth/providers/p1", b, ""); code != 404 {
		t.Errorf("other org reads: %d", code)
	}
	if out, err := exec.Command(binary, "keys", "create", "--data", dir).CombinedOutput(); err == nil {
		t.Errorf("keys create without --org succeeded: %s", out)
	}
}

// Everything acknowledged survives a restart.
func TestRestartLosesNothing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := createKey(t, dir, "default")
	var acknowledged []string
	for i := range 20 {
		id := fmt.Sprintf("prov-%02d", i)
		body := fmt.Sprintf(`{"provider_id":%q,"name":"P%d","client_id":"c","client_secret":"s-%d","auth_url":"https://a.test/a","token_url":"https://a.test/t"}`, id, i, i)
		if code, out := s.call("POST", "/v2/auth/providers", key, body); code != 200 {
			t.Fatalf("create %s: %d %s", id, code, out)
		}
		acknowledged = append(acknowledged, id)
	}
	code, out := s.call("POST", "/v2/deployments", key, `{"name":"img","source":"external_docker",
		"source_config":{},"source_revision_config":{"image_uri":"ghcr.io/acme/agent:1.0"},
		"secrets":[{"name":"TOKEN","value":"t0k3n-value"}]}`)
	if code != 201 {
		t.Fatalf("create deployment: %d %s", code, out)
	}
	var dep struct{ ID string }
	json.Unmarshal([]byte(out), &dep)
	s.Stop()

	again := startServer(t, dir)
	for _, id := range acknowledged {
		if code, out := again.call("GET", "/v2/auth/providers/"+id, key, ""); code != 200 {
			t.Errorf("provider %s lost: %d %s", id, code, out)
		}
	}
	code, out = again.call("GET", "/v2/deployments/"+dep.ID, key, "")
	if code != 200 || !strings.Contains(out, `"name":"TOKEN"`) {
		t.Errorf("deployment lost: %d %s", code, out)
	}
}

// The README walk-through works when pasted into a shell against the server.
func TestReadmeWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- walkthrough:begin -->\n```sh\n(.*?)```\n<!-- walkthrough:end -->").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README has no walk-through block")
	}
	dir := t.TempDir()
	// The walk-through runs from the repository root, makes its repository
	// under local-repos and calls ./bin/stepgraph and the default address:
	// this test's server allows that directory, as `make run` does.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.MkdirAll(filepath.Join(root, "local-repos"), 0o755)
	os.Symlink(binary, filepath.Join(root, "bin", "stepgraph"))
	s := startServer(t, dir, "-allow-local-repos", filepath.Join(root, "local-repos"))
	script := strings.ReplaceAll(string(block[1]), "http://127.0.0.1:8080", s.URL())
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "STEPGRAPH_DATA_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("walk-through failed: %v\n%s\nserver:\n%s", err, out, s.Logs())
	}
	text := string(out)
	for _, want := range []string{`{"ok":true}`, `"provider_id":"github-dev"`, `provider_id: must be 1-64 characters`,
		`"status":"READY"`, `"value":"********"`, "204", `"content":"echo: hi"`, `{"count":5,"steps":5}`,
		`"__interrupt__":[{"id":`, `"answer":"yes"`, `{"__error__":{"error":"ValueError","message":"boom"}}`, `"created_by":"system"`} {
		if !strings.Contains(text, want) {
			t.Errorf("walk-through output lacks %q", want)
		}
	}
	for _, secret := range []string{"not-a-real-secret", "rotated-secret", "sk-not-real"} {
		if strings.Contains(text, secret) || strings.Contains(s.Logs(), secret) {
			t.Errorf("secret %q shown by the walk-through or the server logs", secret)
		}
	}
}

func TestKeysRevoke(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	doomed, kept := createKey(t, dir, "acme"), createKey(t, dir, "acme")
	if code, _ := s.call("GET", "/v2/auth/providers", doomed, ""); code != 200 {
		t.Fatalf("new key refused: %d", code)
	}
	out, err := exec.Command(binary, "keys", "revoke", "--data", dir, doomed).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "revoked" {
		t.Fatalf("keys revoke: %v %s", err, out)
	}
	if code, _ := s.call("GET", "/v2/auth/providers", doomed, ""); code != 401 {
		t.Errorf("revoked key answered %d, want 401 at once", code)
	}
	if code, _ := s.call("GET", "/v2/auth/providers", kept, ""); code != 200 {
		t.Errorf("the organization's other key: %d", code)
	}
	out, err = exec.Command(binary, "keys", "revoke", "--data", dir, doomed).CombinedOutput()
	if err == nil || strings.Contains(string(out), doomed) {
		t.Errorf("revoking twice: %v %s (must fail without echoing the key)", err, out)
	}
}
