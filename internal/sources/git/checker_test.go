package git

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/stepgraph/stepgraph/internal/sources"
	"github.com/stepgraph/stepgraph/internal/sources/gittest"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// fixture is a real repository built with go-git:
//
//	main:    c0 ── c1 ── c2          (version 0, 1, 2 in langgraph.json)
//	feature:        └── c3           (version 3)
//	tags:    v1 → c1 (lightweight), v1-annotated → c1 (annotated),
//	         feature → c0 (lightweight, same short name as the branch)
type fixture struct {
	dir            string
	url            string // file:// URL of dir
	c0, c1, c2, c3 string
	annotatedTag   string // sha of the tag object itself
}

var sig = &object.Signature{Name: "Test", Email: "test@example.com", When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	repo, err := gogit.PlainInitWithOptions(dir, &gogit.PlainInitOptions{InitOptions: gogit.InitOptions{DefaultBranch: plumbing.Main}})
	must(t, err)
	wt, err := repo.Worktree()
	must(t, err)

	write := func(files map[string]string) {
		for name, content := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			if target, ok := strings.CutPrefix(content, "symlink:"); ok {
				must(t, os.Symlink(target, p))
			} else {
				must(t, os.WriteFile(p, []byte(content), 0o644))
			}
			_, err := wt.Add(name)
			must(t, err)
		}
	}
	commit := func(msg string, files map[string]string) string {
		write(files)
		h, err := wt.Commit(msg, &gogit.CommitOptions{Author: sig, Committer: sig})
		must(t, err)
		return h.String()
	}

	f := &fixture{dir: dir, url: "file://" + filepath.ToSlash(dir)}
	f.c0 = commit("c0", map[string]string{"langgraph.json": `{"version": 0}`})
	f.c1 = commit("c1", map[string]string{
		"langgraph.json":              `{"version": 1, "graphs": {"agent": "./agent.py:graph"}}`,
		"config.yaml":                 "version: 1\ngraphs:\n  agent: ./agent.py:graph\n1: one\nwhen: 2024-01-02T03:04:05Z\nlist: [a, 2]\n",
		"config.yml":                  "version: 1\n",
		"graph.conf":                  "version: 1\nstyle: yaml\n",
		"graph.txt":                   `{"version": 1, "style": "json"}`,
		"bad.json":                    "{\n  \"version\": 1,\n  \"graphs\": }\n",
		"bad.yaml":                    "version: [1\n",
		"bad.conf":                    `{"version": `,
		"list.json":                   `[1, 2]`,
		"scalar.yaml":                 "hello\n",
		"empty.yaml":                  "",
		"multi.yaml":                  "a: 1\n---\nb: 2\n",
		"nan.yaml":                    "x: .nan\n",
		"nested/dir/langgraph.json":   `{"version": 1, "nested": true}`,
		"link.json":                   "symlink:langgraph.json",
		"nested/up.json":              "symlink:../langgraph.json",
		"evil.json":                   "symlink:../../etc/passwd",
		"nested/dir/deep/x.yaml":      "version: 1\n",
		"nested/dir/deep/escape.json": "symlink:../../../../x.json",
	})
	_, err = repo.CreateTag("v1", plumbing.NewHash(f.c1), nil)
	must(t, err)
	tag, err := repo.CreateTag("v1-annotated", plumbing.NewHash(f.c1), &gogit.CreateTagOptions{Tagger: sig, Message: "release 1"})
	must(t, err)
	f.annotatedTag = tag.Hash().String()
	_, err = repo.CreateTag("feature", plumbing.NewHash(f.c0), nil)
	must(t, err)

	feature := plumbing.NewBranchReferenceName("feature")
	must(t, repo.Storer.SetReference(plumbing.NewHashReference(feature, plumbing.NewHash(f.c1))))
	must(t, wt.Checkout(&gogit.CheckoutOptions{Branch: feature}))
	f.c3 = commit("c3", map[string]string{"langgraph.json": `{"version": 3}`})
	must(t, wt.Checkout(&gogit.CheckoutOptions{Branch: plumbing.Main}))
	f.c2 = commit("c2", map[string]string{"langgraph.json": `{"version": 2}`})
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheckResolves(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, ref, path string
		wantSHA         string
		want            map[string]any // checked key by key
	}{
		{"branch", "main", "langgraph.json", f.c2, map[string]any{"version": 2.0}},
		{"other branch", "feature", "langgraph.json", f.c3, map[string]any{"version": 3.0}},
		{"full branch ref", "refs/heads/feature", "langgraph.json", f.c3, map[string]any{"version": 3.0}},
		{"HEAD", "HEAD", "langgraph.json", f.c2, map[string]any{"version": 2.0}},
		{"lightweight tag", "v1", "langgraph.json", f.c1, map[string]any{"version": 1.0, "graphs": map[string]any{"agent": "./agent.py:graph"}}},
		{"full tag ref", "refs/tags/v1", "langgraph.json", f.c1, map[string]any{"version": 1.0}},
		{"annotated tag", "v1-annotated", "langgraph.json", f.c1, map[string]any{"version": 1.0}},
		{"full annotated tag ref", "refs/tags/v1-annotated", "langgraph.json", f.c1, map[string]any{"version": 1.0}},
		{"branch wins over tag of same name", "feature", "langgraph.json", f.c3, map[string]any{"version": 3.0}},
		{"tag by full ref when a branch shares its name", "refs/tags/feature", "langgraph.json", f.c0, map[string]any{"version": 0.0}},
		{"sha at a branch tip", f.c2, "langgraph.json", f.c2, map[string]any{"version": 2.0}},
		{"sha at a tag only", f.c1, "langgraph.json", f.c1, map[string]any{"version": 1.0}},
		{"sha not at any tip", f.c0, "langgraph.json", f.c0, map[string]any{"version": 0.0}},
		{"uppercase sha", strings.ToUpper(f.c0), "langgraph.json", f.c0, map[string]any{"version": 0.0}},
		{"annotated tag object sha", f.annotatedTag, "langgraph.json", f.c1, map[string]any{"version": 1.0}},
		{"yaml", "v1", "config.yaml", f.c1, map[string]any{
			"version": 1.0, // numbers as JSON would decode them
			"graphs":  map[string]any{"agent": "./agent.py:graph"},
			"1":       "one",                  // non-string key converted
			"when":    "2024-01-02T03:04:05Z", // timestamp as its JSON string
			"list":    []any{"a", 2.0},
		}},
		{"yml", "v1", "config.yml", f.c1, map[string]any{"version": 1.0}},
		{"unknown extension, yaml content", "v1", "graph.conf", f.c1, map[string]any{"style": "yaml"}},
		{"unknown extension, json content", "v1", "graph.txt", f.c1, map[string]any{"style": "json"}},
		{"nested path", "v1", "nested/dir/langgraph.json", f.c1, map[string]any{"nested": true}},
		{"uncleaned path", "v1", "./nested/../nested/dir//langgraph.json", f.c1, map[string]any{"nested": true}},
		{"symlink", "v1", "link.json", f.c1, map[string]any{"version": 1.0}},
		{"symlink to parent dir", "v1", "nested/up.json", f.c1, map[string]any{"version": 1.0}},
	}
	modes := []struct {
		name    string
		checker *Checker
		url     string
	}{
		{"file URL", &Checker{LocalDirs: []string{f.dir}}, f.url},
		{"local path", &Checker{LocalDirs: []string{f.dir}}, f.dir},
	}
	if gitAvailable() { // the https server is git http-backend
		srv := gittest.NewServer(t)
		modes = append(modes, struct {
			name    string
			checker *Checker
			url     string
		}{"fetched over https", &Checker{HTTPClient: srv.Client(true)}, srv.Add(t, "fixture", f.dir)})
	}
	for _, m := range modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				co, err := m.checker.Check(context.Background(), m.url, tt.ref, tt.path)
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if co.CommitSHA != tt.wantSHA {
					t.Errorf("CommitSHA = %s, want %s", co.CommitSHA, tt.wantSHA)
				}
				for k, want := range tt.want {
					if got := co.Config[k]; !equal(got, want) {
						t.Errorf("Config[%q] = %#v (%T), want %#v (%T)", k, got, got, want, want)
					}
				}
			})
		}
	}
}

func gitAvailable() bool {
	_, err := exec.LookPath("git")
	return err == nil
}

func equal(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k := range av {
			if !equal(av[k], bv[k]) {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !equal(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestCheckErrors(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	missingDir := filepath.Join(root, "nope")
	emptyDir := filepath.Join(root, "empty")
	must(t, os.Mkdir(emptyDir, 0o755))
	allow := &Checker{LocalDirs: []string{f.dir, root}}
	deny := &Checker{}
	var fetched *Checker
	fetchedURL := ""
	if gitAvailable() {
		srv := gittest.NewServer(t)
		fetched = &Checker{HTTPClient: srv.Client(true)}
		fetchedURL = srv.Add(t, "fixture", f.dir)
		_ = srv.AddFiles(t, "other", map[string][]byte{"x": []byte("x")})
	}

	tests := []struct {
		name           string
		checker        *Checker
		url, ref, path string
		want           []string // substrings of the message
		needsGit       bool
	}{
		// repository
		{name: "missing repo", checker: allow, url: "file://" + missingDir, ref: "main", path: "langgraph.json",
			want: []string{`repository "file://` + missingDir + `" not found or not readable`}},
		{name: "missing repo path", checker: allow, url: missingDir, ref: "main", path: "langgraph.json",
			want: []string{`repository "` + missingDir + `" not found or not readable`}},
		{name: "not a repository", checker: allow, url: emptyDir, ref: "main", path: "langgraph.json",
			want: []string{"not found or not readable"}},
		{name: "a file, not a directory", checker: allow, url: filepath.Join(f.dir, "langgraph.json"), ref: "main", path: "langgraph.json",
			want: []string{"not found or not readable"}},
		{name: "missing repo fetched", checker: fetched, url: strings.TrimSuffix(fetchedURL, "fixture.git") + "nope.git", ref: "main", path: "langgraph.json",
			want: []string{"not found or not readable"}, needsGit: true},
		{name: "empty URL", checker: allow, url: "", ref: "main", path: "langgraph.json", want: []string{"repository URL is required"}},

		// scheme rules
		{name: "http", checker: allow, url: "http://example.com/x.git", ref: "main", path: "langgraph.json",
			want: []string{`repository URL "http://example.com/x.git" must be an https:// URL, or a file:// URL inside the directories`}},
		{name: "ssh", checker: allow, url: "ssh://git@example.com/x.git", ref: "main", path: "langgraph.json",
			want: []string{"must be an https:// URL"}},
		{name: "scp-like", checker: deny, url: "git@github.com:org/x.git", ref: "main", path: "langgraph.json",
			want: []string{`"***@github.com:org/x.git" must be an https:// URL`}},
		{name: "git protocol", checker: deny, url: "git://example.com/x.git", ref: "main", path: "langgraph.json",
			want: []string{"must be an https:// URL"}},
		{name: "relative path", checker: allow, url: "repos/x", ref: "main", path: "langgraph.json",
			want: []string{"must be an https:// URL"}},
		{name: "https without host", checker: deny, url: "https:///x.git", ref: "main", path: "langgraph.json",
			want: []string{"must name a host"}},
		{name: "query string", checker: deny, url: "https://example.com/x.git?access_token=T0KEN", ref: "main", path: "langgraph.json",
			want: []string{`"https://example.com/x.git?***" must not contain a query string`}},
		{name: "fragment", checker: deny, url: "https://example.com/x.git#T0KEN", ref: "main", path: "langgraph.json",
			want: []string{`"https://example.com/x.git#***" must not contain a query string or a fragment`}},
		{name: "file URL with a host", checker: allow, url: "file://server/share/x", ref: "main", path: "langgraph.json",
			want: []string{"must name a local path"}},
		{name: "no LocalDirs rejects file URL", checker: deny, url: f.url, ref: "main", path: "langgraph.json",
			want: []string{"local repositories (file:// URLs and local paths) are disabled on this server"}},
		{name: "no LocalDirs rejects local path", checker: deny, url: f.dir, ref: "main", path: "langgraph.json",
			want: []string{"are disabled on this server"}},
		{name: "outside LocalDirs", checker: &Checker{LocalDirs: []string{root}}, url: f.url, ref: "main", path: "langgraph.json",
			want: []string{"must name a repository inside the directories this server allows for local repositories"}},

		// ref
		{name: "missing tag", checker: allow, url: f.url, ref: "v9", path: "langgraph.json", want: []string{`ref "v9" not found in repository`}},
		{name: "missing full ref", checker: allow, url: f.url, ref: "refs/heads/nope", path: "langgraph.json", want: []string{`ref "refs/heads/nope" not found`}},
		{name: "missing sha", checker: allow, url: f.url, ref: strings.Repeat("ab", 20), path: "langgraph.json", want: []string{"not found in repository"}},
		{name: "abbreviated sha", checker: allow, url: f.url, ref: f.c1[:7], path: "langgraph.json", want: []string{"not found", "full 40-character sha"}},
		{name: "invalid ref", checker: allow, url: f.url, ref: "a..b", path: "langgraph.json", want: []string{`ref "a..b" is not a valid git ref name`}},
		{name: "empty ref", checker: allow, url: f.url, ref: "", path: "langgraph.json", want: []string{"ref is required"}},
		{name: "missing tag fetched", checker: fetched, url: fetchedURL, ref: "v9", path: "langgraph.json", want: []string{`ref "v9" not found in repository`}, needsGit: true},
		{name: "missing sha fetched", checker: fetched, url: fetchedURL, ref: strings.Repeat("ab", 20), path: "langgraph.json", want: []string{"not found in repository"}, needsGit: true},

		// config file
		{name: "missing file", checker: allow, url: f.url, ref: "main", path: "missing.json", want: []string{`graph config "missing.json" not found at ref "main"`}},
		{name: "missing dir", checker: allow, url: f.url, ref: "main", path: "no/such/langgraph.json", want: []string{"not found at ref"}},
		{name: "file used as dir", checker: allow, url: f.url, ref: "main", path: "langgraph.json/x", want: []string{"not found at ref"}},
		{name: "file absent at older commit", checker: allow, url: f.url, ref: "refs/tags/feature", path: "config.yaml", want: []string{`graph config "config.yaml" not found at ref "refs/tags/feature"`}},
		{name: "missing file fetched", checker: fetched, url: fetchedURL, ref: "main", path: "missing.json", want: []string{"not found at ref"}, needsGit: true},
		{name: "directory", checker: allow, url: f.url, ref: "main", path: "nested", want: []string{"is a directory"}},
		{name: "invalid JSON", checker: allow, url: f.url, ref: "main", path: "bad.json", want: []string{`graph config "bad.json" is not valid JSON or YAML: line 3`, "invalid character"}},
		{name: "invalid YAML", checker: allow, url: f.url, ref: "main", path: "bad.yaml", want: []string{`graph config "bad.yaml" is not valid JSON or YAML: yaml:`}},
		{name: "invalid JSON-looking unknown extension", checker: allow, url: f.url, ref: "main", path: "bad.conf", want: []string{"is not valid JSON or YAML", "unexpected end of JSON input"}},
		{name: "array config", checker: allow, url: f.url, ref: "main", path: "list.json", want: []string{`graph config "list.json" must be an object, got an array`}},
		{name: "scalar config", checker: allow, url: f.url, ref: "main", path: "scalar.yaml", want: []string{"must be an object, got a string"}},
		{name: "empty config", checker: allow, url: f.url, ref: "main", path: "empty.yaml", want: []string{"must be an object, got null"}},
		{name: "several YAML documents", checker: allow, url: f.url, ref: "main", path: "multi.yaml", want: []string{"more than one document"}},
		{name: "value JSON cannot hold", checker: allow, url: f.url, ref: "main", path: "nan.yaml", want: []string{"cannot be represented as JSON"}},

		// config path
		{name: "path escape", checker: allow, url: f.url, ref: "main", path: "../etc/passwd", want: []string{`graph config path "../etc/passwd" escapes the repository`}},
		{name: "path escape after cleaning", checker: allow, url: f.url, ref: "main", path: "nested/../../x.json", want: []string{"escapes the repository"}},
		{name: "absolute path", checker: allow, url: f.url, ref: "main", path: "/etc/passwd", want: []string{"must be relative"}},
		{name: "backslashes", checker: allow, url: f.url, ref: "main", path: `..\x.json`, want: []string{"forward slashes"}},
		{name: "inside .git", checker: allow, url: f.url, ref: "main", path: ".git/config", want: []string{"must not be inside .git"}},
		{name: "repository root", checker: allow, url: f.url, ref: "main", path: "./", want: []string{"does not name a file"}},
		{name: "empty path", checker: allow, url: f.url, ref: "main", path: "", want: []string{"graph config path is required"}},
		{name: "symlink escape", checker: allow, url: f.url, ref: "main", path: "evil.json", want: []string{"symbolic link that points outside the repository"}},
		{name: "nested symlink escape", checker: allow, url: f.url, ref: "main", path: "nested/dir/deep/escape.json", want: []string{"points outside the repository"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needsGit && !gitAvailable() {
				t.Skip("git binary not available for the https server")
			}
			_, err := tt.checker.Check(context.Background(), tt.url, tt.ref, tt.path)
			assertSourceError(t, err, tt.want...)
		})
	}
}

func assertSourceError(t *testing.T, err error, want ...string) *sources.Error {
	t.Helper()
	if err == nil {
		t.Fatal("Check succeeded, want an error")
	}
	var se *sources.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %T %q is not a *sources.Error", err, err)
	}
	if se.Reason != err.Error() {
		t.Errorf("Error() = %q, Reason = %q", err.Error(), se.Reason)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	return se
}

func TestCredentialsRedacted(t *testing.T) {
	tests := []struct {
		name, url string
		secrets   []string
		want      []string
	}{
		{"user and password, loopback", "https://user:s3cr3t@127.0.0.1:1/x.git", []string{"s3cr3t", "user:"},
			[]string{`repository "https://***@127.0.0.1:1/x.git" not reachable`}},
		{"token as user name, loopback", "https://ghp_T0kenValue123@127.0.0.1:1/x.git", []string{"ghp_T0kenValue123"},
			[]string{`"https://***@127.0.0.1:1/x.git"`}},
		{"escaped password, loopback", "https://user:p%40ss%2Fw0rd@127.0.0.1:1/x.git", []string{"p%40ss%2Fw0rd", "p@ss/w0rd"},
			[]string{"not reachable"}},
		{"disallowed scheme", "http://user:s3cr3t@example.com/x.git", []string{"s3cr3t"},
			[]string{`"http://***@example.com/x.git" must be an https:// URL`}},
		{"unparseable URL", "https://user:s3cr3t@exa mple.com:xx/x.git", []string{"s3cr3t"}, []string{`"https://***@exa mple.com:xx/x.git" must be a valid URL`}},
		{"scp-like with password", "user:s3cr3t@example.com:x.git", []string{"s3cr3t"}, []string{"must be an https:// URL"}},
		{"query token", "https://example.com/x.git?access_token=s3cr3t&u=1", []string{"s3cr3t", "access_token"}, []string{`"https://example.com/x.git?***" must not contain a query string`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Checker{LocalDirs: []string{t.TempDir()}, Timeout: 20 * time.Second}
			_, err := c.Check(context.Background(), tt.url, "main", "langgraph.json")
			assertSourceError(t, err, tt.want...)
			for _, s := range tt.secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q leaks %q", err, s)
				}
			}
		})
	}
}

// hangingServer accepts TCP connections and never answers, so an https
// client blocks in the TLS handshake until its context ends.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestContext(t *testing.T) {
	f := newFixture(t)
	addr := hangingServer(t)
	hanging := "https://user:s3cr3t@" + addr + "/x.git"
	// The hanging server is on loopback: these checkers' guard allows it.
	private := weburl.GuardedClient(true, 0)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name    string
		checker *Checker
		url     string
		ctx     func() (context.Context, context.CancelFunc)
		wantIs  error
		want    []string
	}{
		{"already canceled", &Checker{LocalDirs: []string{f.dir}}, f.url,
			func() (context.Context, context.CancelFunc) { return canceled, func() {} },
			context.Canceled, []string{"was canceled"}},
		{"canceled while connecting", &Checker{HTTPClient: private}, hanging,
			func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)
				return ctx, cancel
			},
			context.Canceled, []string{"was canceled"}},
		{"caller deadline", &Checker{HTTPClient: private}, hanging,
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 150*time.Millisecond)
			},
			context.DeadlineExceeded, []string{"timed out"}},
		{"Checker.Timeout", &Checker{HTTPClient: private, Timeout: 150 * time.Millisecond}, hanging,
			func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			context.DeadlineExceeded, []string{"timed out after 150ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := tt.checker.Check(ctx, tt.url, "main", "langgraph.json")
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Check returned after %s", d)
			}
			assertSourceError(t, err, tt.want...)
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%q, %v) = false", err, tt.wantIs)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}
