package git

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/sources/gittest"
)

// CheckFiles hands read the commit's tree: files by path, symbolic links
// followed inside the tree only, the files of the commit asked for (not the
// work tree's), and read's error as the result.
func TestCheckFiles(t *testing.T) {
	f := newFixture(t)
	c := &Checker{LocalDirs: []string{f.dir}}
	for _, fromRemote := range []bool{false, true} {
		url := f.url
		if fromRemote {
			if !gitAvailable() {
				continue
			}
			srv := gittest.NewServer(t)
			c, url = &Checker{HTTPClient: srv.Client(true)}, srv.Add(t, "fixture", f.dir)
		}
		got := map[string]string{}
		co, err := c.CheckFiles(context.Background(), url, "v1", "langgraph.json", func(fsys fs.FS) error {
			for _, name := range []string{"config.yml", "nested/dir/langgraph.json", "link.json", "nested/up.json",
				"evil.json", "nested", "missing.yaml", "../x", ".git/config", "nested/dir/deep/escape.json"} {
				data, err := fs.ReadFile(fsys, name)
				if err != nil {
					got[name] = "error: " + err.Error()
					continue
				}
				got[name] = string(data)
			}
			return nil
		})
		if err != nil || co.CommitSHA != f.c1 {
			t.Fatalf("remote %v: %v %v", fromRemote, co, err)
		}
		want := map[string]string{
			"config.yml":                  "version: 1\n",
			"nested/dir/langgraph.json":   `{"version": 1, "nested": true}`,
			"link.json":                   `{"version": 1, "graphs": {"agent": "./agent.py:graph"}}`,
			"nested/up.json":              `{"version": 1, "graphs": {"agent": "./agent.py:graph"}}`,
			"evil.json":                   "error: open evil.json: is a symbolic link that points outside the repository",
			"nested":                      "error: open nested: is a directory, not a file",
			"missing.yaml":                "error: open missing.yaml: file does not exist",
			"../x":                        "error: open ../x: invalid argument",
			".git/config":                 "error: open .git/config: file does not exist",
			"nested/dir/deep/escape.json": "error: open nested/dir/deep/escape.json: is a symbolic link that points outside the repository",
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("remote %v: %s: %q, want %q", fromRemote, name, got[name], w)
			}
		}
	}

	c = &Checker{LocalDirs: []string{f.dir}}
	stop := errors.New("stop")
	_, err := c.CheckFiles(context.Background(), f.url, "main", "langgraph.json", func(fsys fs.FS) error {
		file, err := fsys.Open("langgraph.json")
		if err != nil {
			return err
		}
		defer file.Close()
		data, _ := io.ReadAll(file)
		if !strings.Contains(string(data), `"version": 2`) {
			t.Errorf("main's langgraph.json: %s", data)
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("read's error: %v", err)
	}
}
