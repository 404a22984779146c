package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

// stepgraph dev [DIR]: the everyday loop of a LangGraph developer. The app
// in DIR (its langgraph.json) is served on the embedded store in
// DIR/.stepgraph (kept across restarts), as a hosted_repo deployment of a
// snapshot of DIR: a change to DIR's files is a new revision, whose runtime
// replaces the previous one (reload). The interpreter is DIR/.venv's, which
// stepgraph dev makes (the runtime's pins and the app's dependencies) and
// reuses while they are unchanged (pyapp.Venv); a .venv it did not make, or
// -python, is the developer's own and is used as is.

// devSkip are the directories of DIR that are not the app's.
var devSkip = map[string]bool{".stepgraph": true, ".venv": true, ".git": true, "__pycache__": true, "node_modules": true, ".langgraph_api": true}

func dev(args []string) error {
	fset := flag.NewFlagSet("dev", flag.ContinueOnError)
	addr := fset.String("addr", "127.0.0.1:2024", "listen address")
	python := fset.String("python", "", "the interpreter whose environment holds langgraph and the app's dependencies, used as is (default: DIR/.venv's, made when missing)")
	basePython := fset.String("base-python", "python3", "the interpreter that makes DIR/.venv (python -m venv)")
	findLinks := fset.String("find-links", "", "DIR: a wheelhouse pip installs the runtime's and the app's dependencies from")
	noIndex := fset.Bool("no-index", false, "install the dependencies only from -find-links, never from a package index")
	poll := fset.Duration("poll", time.Second, "how often to look for changed files")
	if err := fset.Parse(args); err != nil {
		return err
	}
	dir := "."
	if fset.NArg() > 0 {
		dir = fset.Arg(0)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := checkDevApp(dir); err != nil {
		return err
	}
	if *findLinks != "" {
		// The dependencies are installed in other directories.
		if *findLinks, err = filepath.Abs(*findLinks); err != nil {
			return err
		}
	}
	data := filepath.Join(dir, ".stepgraph")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	py, err := devPython(dir, data, *python, pyapp.Venv{Dir: filepath.Join(dir, ".venv"), BasePython: *basePython,
		Requirements: pyruntime.Requirements, FindLinks: *findLinks, NoIndex: *noIndex})
	if err != nil {
		return err
	}
	// The snapshot is the only repository the dev server may read.
	repo := filepath.Join(data, "dev", "repo")
	if _, err := snapshotApp(dir, repo); err != nil {
		return fmt.Errorf("snapshot the app: %w", err)
	}
	serveArgs := []string{"-addr", *addr, "-data", data, "-allow-local-repos", filepath.Dir(repo), "-langgraph-python", py}
	if *findLinks != "" {
		serveArgs = append(serveArgs, "-langgraph-find-links", *findLinks)
	}
	if *noIndex {
		serveArgs = append(serveArgs, "-langgraph-no-index")
	}
	cfg, err := parseServeFlags(serveArgs)
	if err != nil {
		return err
	}
	return serveWith(cfg, func(ctx context.Context, a *app, url string, log *slog.Logger) {
		if err := devLoop(ctx, a, url, dir, repo, data, *poll, log); err != nil && ctx.Err() == nil {
			log.Error("stepgraph dev", "error", err.Error())
		}
	})
}

// checkDevApp: DIR has a langgraph.json naming Python graphs.
func checkDevApp(dir string) error {
	path := filepath.Join(dir, "langgraph.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file: stepgraph dev serves a LangGraph app, whose langgraph.json names its graphs "+
			`({"graphs": {"agent": "./src/agent/graph.py:graph"}, "dependencies": ["."]})`, path)
	}
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%s: is not valid JSON: %v", path, err)
	}
	switch deployments.AppKind(data) {
	case "python":
		return nil
	case "js":
		return fmt.Errorf("%s: names JavaScript graphs: JavaScript LangGraph apps are not supported (only Python ones)", path)
	}
	return fmt.Errorf(`%s: /graphs: must name the app's Python graphs ("agent": "./src/agent/graph.py:graph")`, path)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// devPython is the interpreter of the app: -python, else DIR/.venv's, made
// or reused (the runtime written out under data reads the app's
// dependencies).
func devPython(dir, data, python string, venv pyapp.Venv) (string, error) {
	py := python
	if py == "" {
		rt, err := pyruntime.Extract(filepath.Join(data, "langgraph", "runtime"))
		if err != nil {
			return "", err
		}
		venv.RuntimeDir = rt
		if !fileExists(venv.Python()) {
			fmt.Fprintf(os.Stderr, "stepgraph dev: making %s (the runtime's and the app's dependencies)…\n", venv.Dir)
		}
		var outcome pyapp.VenvOutcome
		py, outcome, err = venv.Ensure(context.Background(), filepath.Join(dir, "langgraph.json"))
		if err != nil {
			return "", fmt.Errorf("the app's virtual environment %s: %w", venv.Dir, err)
		}
		fmt.Fprintf(os.Stderr, "stepgraph dev: %s: %s\n", venv.Dir, outcome)
		if outcome != pyapp.VenvOwn {
			return py, nil
		}
	}
	if out, err := exec.Command(py, "-c", "import langgraph, langchain_core").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s cannot import langgraph (%v): %s\nremove %s to let stepgraph dev make it, or pass -python",
			py, err, strings.TrimSpace(string(out)), filepath.Join(dir, ".venv"))
	}
	return py, nil
}

// devLoop deploys the app's snapshot, then redeploys it on every change.
func devLoop(ctx context.Context, a *app, url, dir, repo, data string, poll time.Duration, log *slog.Logger) error {
	svc := a.svc
	org, _, err := svc.Keys.EnsureOrganization(ctx, "default")
	if err != nil {
		return err
	}
	key, err := svc.Keys.Create(ctx, org.ID)
	if err != nil {
		return err
	}
	fmt.Printf("\nstepgraph dev: serving %s at %s\n  API key of this session: %s\n  console: %s/\n\n", dir, url, key, url)
	idFile := filepath.Join(data, "dev-deployment")
	depID := ""
	if b, err := os.ReadFile(idFile); err == nil {
		depID = strings.TrimSpace(string(b))
		if _, err := svc.Deployments.Get(ctx, org.ID, depID); err != nil {
			depID = ""
		}
	}
	src := deployments.SourceRevisionInput{SourceRevisionConfig: deployments.SourceRevisionConfig{RepoRef: ptr("main"), GraphConfigPath: ptr("langgraph.json")}}
	var revID string
	if depID == "" {
		d, err := svc.Deployments.Create(ctx, org.ID, deployments.CreateInput{Name: ptr("dev"), Source: ptr("hosted_repo"),
			SourceConfig: &deployments.SourceConfig{RepoURL: ptr("file://" + filepath.ToSlash(repo))}, SourceRevisionConfig: &src})
		if err != nil {
			return err
		}
		depID, revID = d.ID, deref(d.LatestRevisionID)
		if err := os.WriteFile(idFile, []byte(depID), 0o600); err != nil {
			return err
		}
	} else if revID, err = devRevision(ctx, a, org.ID, depID, src); err != nil {
		return err
	}
	report := func(rev string) { go devReport(ctx, a, org.ID, depID, rev, log) }
	report(revID)
	last, _ := fingerprint(dir)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		fp, err := fingerprint(dir)
		if err != nil || fp == last {
			continue
		}
		last = fp
		if err := checkDevApp(dir); err != nil {
			log.Error("not reloading", "error", err.Error())
			continue
		}
		changed, err := snapshotApp(dir, repo)
		if err != nil || !changed {
			continue
		}
		log.Info("the app changed: reloading")
		rev, err := devRevision(ctx, a, org.ID, depID, src)
		if err != nil {
			log.Error("reload", "error", err.Error())
			continue
		}
		report(rev)
	}
}

func devRevision(ctx context.Context, a *app, orgID, depID string, src deployments.SourceRevisionInput) (string, error) {
	r, err := a.svc.Deployments.CreateRevision(ctx, orgID, depID, deployments.RevisionInput{SourceRevisionConfig: &src})
	return r.ID, err
}

// devReport says when a revision is served, or why it failed (an import
// error with its traceback, a missing dependency).
func devReport(ctx context.Context, a *app, orgID, depID, revID string, log *slog.Logger) {
	for ctx.Err() == nil {
		r, err := a.svc.Deployments.Revision(ctx, orgID, depID, revID)
		if err != nil {
			return
		}
		switch r.Status {
		case "DEPLOYED":
			log.Info("the app is served", "revision_id", revID)
			return
		case "BUILD_FAILED", "DEPLOY_FAILED":
			msg := ""
			if r.StatusMessage != nil {
				msg = *r.StatusMessage
			}
			fmt.Fprintf(os.Stderr, "\nstepgraph dev: the app cannot be served (%s):\n%s\n\n", r.Status, msg)
			return
		case "SKIPPED":
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fingerprint sums the app's files' names, sizes and times.
func fingerprint(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != dir && devSkip[d.Name()] {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			fmt.Fprintf(h, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		}
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil)), err
}

// snapshotApp makes repo's work tree DIR's files (but devSkip's) and
// commits them on main when they changed.
func snapshotApp(dir, repo string) (bool, error) {
	r, err := git.PlainOpen(repo)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		r, err = git.PlainInitWithOptions(repo, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}})
	}
	if err != nil {
		return false, err
	}
	wt, err := r.Worktree()
	if err != nil {
		return false, err
	}
	entries, err := os.ReadDir(repo)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(repo, e.Name())); err != nil {
				return false, err
			}
		}
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if p != dir && devSkip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(d.Name(), ".pyc") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return false, err
	}
	sort.Strings(files)
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return false, err
	}
	st, err := wt.Status()
	if err != nil {
		return false, err
	}
	if st.IsClean() {
		return false, nil
	}
	sig := &object.Signature{Name: "stepgraph dev", Email: "dev@localhost", When: time.Now()}
	_, err = wt.Commit(fmt.Sprintf("snapshot of %d files", len(files)), &git.CommitOptions{Author: sig, All: true})
	return err == nil, err
}

func ptr[T any](v T) *T { return &v }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
