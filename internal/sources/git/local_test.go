package git

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Local repositories are read only inside the allowed directories, with
// symbolic links evaluated, and never from /proc, /sys or /dev. What a URL
// may name is decided without the file system (CheckURL); what it reaches
// is checked again when it is opened, and every failure there reads the
// same, so that a tenant learns nothing about the host's files.
func TestLocalDirs(t *testing.T) {
	inside := newFixture(t)  // a repository in an allowed directory
	outside := newFixture(t) // one outside every allowed directory
	allowed := t.TempDir()   // a second allowed directory, holding links
	link := func(name, target string) string {
		p := filepath.Join(allowed, name)
		must(t, os.Symlink(target, p))
		return p
	}
	toOutside := link("to-outside", outside.dir)
	toInside := link("to-inside", inside.dir)
	toProc := link("to-proc", "/proc/self/cwd")
	// A work tree whose .git points at a repository outside.
	dotGitOut := filepath.Join(allowed, "dotgit-out")
	must(t, os.Mkdir(dotGitOut, 0o755))
	must(t, os.Symlink(filepath.Join(outside.dir, ".git"), filepath.Join(dotGitOut, ".git")))
	gitFileOut := filepath.Join(allowed, "gitfile-out")
	must(t, os.Mkdir(gitFileOut, 0o755))
	must(t, os.WriteFile(filepath.Join(gitFileOut, ".git"), []byte("gitdir: "+filepath.Join(outside.dir, ".git")+"\n"), 0o644))
	// A work tree whose .git file points inside: still readable.
	gitFileIn := filepath.Join(allowed, "gitfile-in")
	must(t, os.Mkdir(gitFileIn, 0o755))
	must(t, os.WriteFile(filepath.Join(gitFileIn, ".git"), []byte("gitdir: "+filepath.Join(inside.dir, ".git")+"\n"), 0o644))
	notDir := filepath.Join(allowed, "file")
	must(t, os.WriteFile(notDir, []byte("x"), 0o644))
	emptyDir := filepath.Join(allowed, "empty")
	must(t, os.Mkdir(emptyDir, 0o755))
	// Objects borrowed from outside through alternates are not read.
	alt := filepath.Join(allowed, "alternates")
	must(t, os.MkdirAll(filepath.Join(alt, "objects", "info"), 0o755))
	must(t, os.MkdirAll(filepath.Join(alt, "refs", "heads"), 0o755))
	must(t, os.WriteFile(filepath.Join(alt, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(alt, "config"), []byte("[core]\n\tbare = true\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(alt, "refs", "heads", "main"), []byte(outside.c2+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(alt, "objects", "info", "alternates"), []byte(filepath.Join(outside.dir, ".git", "objects")+"\n"), 0o644))

	// A bare repository whose objects directory is a link to outside.
	objLink := filepath.Join(allowed, "objects-link")
	must(t, os.MkdirAll(filepath.Join(objLink, "refs", "heads"), 0o755))
	must(t, os.WriteFile(filepath.Join(objLink, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(objLink, "config"), []byte("[core]\n\tbare = true\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(objLink, "refs", "heads", "main"), []byte(outside.c2+"\n"), 0o644))
	must(t, os.Symlink(filepath.Join(outside.dir, ".git", "objects"), filepath.Join(objLink, "objects")))

	c := &Checker{LocalDirs: []string{inside.dir, allowed}}
	unavailable := func(url string) string { return `repository "` + url + `" not found or not readable` }
	tests := []struct {
		name     string
		checker  *Checker
		url      string
		urlRule  string // CheckURL's answer ("" accepts)
		checkErr string // CheckFiles' whole message ("" succeeds)
	}{
		{"inside, file URL", c, inside.url, "", ""},
		{"inside, local path", c, inside.dir, "", ""},
		{"inside through a link to inside", c, "file://" + toInside, "", ""},
		{"work tree whose .git file points inside", c, gitFileIn, "", ""},
		{"outside", c, outside.url, ruleLocalOutside, `repository URL "` + outside.url + `" ` + ruleLocalOutside},
		{"outside by ..", c, "file://" + allowed + "/../" + filepath.Base(outside.dir), ruleLocalOutside, ""},
		{"/etc/passwd", c, "file:///etc/passwd", ruleLocalOutside, `repository URL "file:///etc/passwd" ` + ruleLocalOutside},
		{"/proc, even when / is allowed", &Checker{LocalDirs: []string{"/"}}, "file:///proc/self/cwd", ruleLocalOutside, ""},
		{"/proc by path", &Checker{LocalDirs: []string{"/"}}, "/proc/1/root", ruleLocalOutside, ""},
		{"disabled", &Checker{}, inside.url, ruleLocalDisabled, ""},
		// Below: the URL is fine, what it reaches is not; one message for all.
		{"link to outside", c, "file://" + toOutside, "", unavailable("file://" + toOutside)},
		{"link to /proc", c, toProc, "", unavailable(toProc)},
		{".git linked outside", c, dotGitOut, "", unavailable(dotGitOut)},
		{".git file pointing outside", c, gitFileOut, "", unavailable(gitFileOut)},
		{"missing", c, filepath.Join(allowed, "missing"), "", unavailable(filepath.Join(allowed, "missing"))},
		{"a file", c, notDir, "", unavailable(notDir)},
		{"not a repository", c, emptyDir, "", unavailable(emptyDir)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.checker.CheckURL(tt.url)
			switch {
			case tt.urlRule == "" && err != nil:
				t.Fatalf("CheckURL(%q) = %v, want nil", tt.url, err)
			case tt.urlRule != "":
				if err == nil || err.Error() != tt.urlRule {
					t.Fatalf("CheckURL(%q) = %v, want %q", tt.url, err, tt.urlRule)
				}
			}
			co, err := tt.checker.Check(context.Background(), tt.url, "main", "langgraph.json")
			switch {
			case tt.urlRule == "" && tt.checkErr == "":
				if err != nil || co.CommitSHA != inside.c2 {
					t.Fatalf("Check = %v, %v; want %s", co, err, inside.c2)
				}
			case tt.checkErr != "":
				if err == nil || err.Error() != tt.checkErr {
					t.Fatalf("Check = %v, want %q", err, tt.checkErr)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tt.urlRule) {
					t.Fatalf("Check = %v, want the rule %q", err, tt.urlRule)
				}
			}
		})
	}

	// Inside the git directory, links and alternates do not reach out: the
	// ref resolves, its commit (outside) is not there.
	for name, repo := range map[string]string{"alternates outside": alt, "objects linked outside": objLink} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Check(context.Background(), repo, "main", "langgraph.json")
			if err == nil || err.Error() != `ref "main" not found in repository` {
				t.Fatalf("Check = %v, want the commit not found", err)
			}
		})
	}

	t.Run("unreadable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads everything")
		}
		locked := filepath.Join(allowed, "locked")
		must(t, os.Mkdir(locked, 0o000))
		t.Cleanup(func() { os.Chmod(locked, 0o755) })
		_, err := c.Check(context.Background(), locked, "main", "langgraph.json")
		if err == nil || err.Error() != unavailable(locked) {
			t.Fatalf("Check = %v, want %q", err, unavailable(locked))
		}
	})
}

func TestResolveLocalDirs(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	must(t, os.Symlink(dir, filepath.Join(dir, "self")))
	real, err := filepath.EvalSymlinks(dir)
	must(t, err)
	got, err := ResolveLocalDirs([]string{filepath.Join(dir, "self")})
	if err != nil || len(got) != 1 || got[0] != real {
		t.Errorf("a link to a directory: %v %v, want [%s]", got, err, real)
	}
	for _, bad := range [][]string{{filepath.Join(dir, "missing")}, {filepath.Join(dir, "f")}, {"/proc"}, {"/proc/self"}, {"/dev"}, {" "}} {
		if got, err := ResolveLocalDirs(bad); err == nil {
			t.Errorf("ResolveLocalDirs(%q) = %v, want an error", bad, got)
		}
	}
}
