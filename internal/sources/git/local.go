package git

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// pseudoFS are the kernel's file systems. No repository lives there, and
// they reach other places: /proc/self/cwd is the server's working directory,
// /proc/1/root another process's whole tree. Never allowed, whatever the
// allowed directories say.
var pseudoFS = []string{"/proc", "/sys", "/dev"}

// within reports whether the clean absolute path p is dir or below it.
func within(p, dir string) bool {
	if dir == string(filepath.Separator) {
		return filepath.IsAbs(p)
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

func inPseudoFS(p string) bool {
	for _, d := range pseudoFS {
		if within(p, d) {
			return true
		}
	}
	return false
}

// ResolveLocalDirs checks the directories an operator allows local
// repositories under (the -allow-local-repos flag) and returns them
// absolute, with symbolic links evaluated. Each must exist and be a
// directory outside /proc, /sys and /dev. Its errors are for the operator:
// they name the directory and the system's reason.
func ResolveLocalDirs(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if strings.TrimSpace(d) == "" {
			return nil, errors.New("an empty directory name")
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		resolved, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		fi, err := os.Stat(resolved)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s: not a directory", d)
		}
		if inPseudoFS(abs) || inPseudoFS(resolved) {
			return nil, fmt.Errorf("%s: inside /proc, /sys or /dev, which hold no repositories", d)
		}
		out = append(out, resolved)
	}
	return out, nil
}

// localDir is an allowed directory as configured (absolute, clean) and
// with its symbolic links evaluated ("" when it cannot be: then nothing
// below it can be opened either).
type localDir struct{ given, resolved string }

func (c *Checker) localDirs() []localDir {
	out := make([]localDir, 0, len(c.LocalDirs))
	for _, d := range c.LocalDirs {
		abs, err := filepath.Abs(d)
		if err != nil || strings.TrimSpace(d) == "" {
			continue
		}
		r, err := filepath.EvalSymlinks(abs)
		if err != nil {
			r = ""
		}
		out = append(out, localDir{given: abs, resolved: r})
	}
	return out
}

// localRule is the rule for a local path decided without touching it (so
// that its answer says nothing about what exists on the host): "" when p is
// lexically inside an allowed directory, as configured or resolved.
func (c *Checker) localRule(p string) string {
	if len(c.LocalDirs) == 0 {
		return ruleLocalDisabled
	}
	if inPseudoFS(p) {
		return ruleLocalOutside
	}
	for _, d := range c.localDirs() {
		if within(p, d.given) || (d.resolved != "" && within(p, d.resolved)) {
			return ""
		}
	}
	return ruleLocalOutside
}

// insideResolved reports whether the resolved path p is inside a resolved
// allowed directory (and not in a pseudo file system).
func (c *Checker) insideResolved(p string) bool {
	if inPseudoFS(p) {
		return false
	}
	for _, d := range c.localDirs() {
		if d.resolved != "" && within(p, d.resolved) {
			return true
		}
	}
	return false
}

// maxGitFileSize bounds the .git file of a work tree and a commondir file.
const maxGitFileSize = 4096

// openLocal opens the repository at src.local read-only, in place. The
// repository directory, its git directory (.git, a directory, a symbolic
// link or a "gitdir:" file) and a work tree's common directory are each
// resolved with symbolic links evaluated and must be inside an allowed
// directory; below them every file is read through a file system bound to
// its directory, so a symbolic link or an alternates entry in the
// repository cannot reach out either.
//
// Every failure has the same message, whether the path is missing, not a
// directory, not readable, not a repository or outside the allowed
// directories: an answer that differs would tell a tenant what exists on
// the host.
func (c *Checker) openLocal(src *source) (*gogit.Repository, error) {
	unavailable := sourceErr("repository %q not found or not readable", src.display)
	root, err := filepath.EvalSymlinks(src.local)
	if err != nil || !c.insideResolved(root) {
		return nil, unavailable
	}
	gitDir, err := findGitDir(root)
	if err != nil || !c.insideResolved(gitDir) {
		return nil, unavailable
	}
	var dot billy.Filesystem = osfs.New(gitDir, osfs.WithBoundOS())
	common, err := commonDir(gitDir)
	if err != nil {
		return nil, unavailable
	}
	if common != "" {
		if !c.insideResolved(common) {
			return nil, unavailable
		}
		dot = dotgit.NewRepositoryFilesystem(dot, osfs.New(common, osfs.WithBoundOS()))
	}
	st := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRU(objectCacheSize),
		filesystem.Options{LargeObjectThreshold: MaxFileSize})
	repo, err := gogit.Open(st, nil)
	if err != nil {
		return nil, unavailable
	}
	return repo, nil
}

// findGitDir returns the git directory of the repository at root (resolved):
// root/.git, the directory a .git file names, or root itself (a bare
// repository).
func findGitDir(root string) (string, error) {
	dotGit := filepath.Join(root, ".git")
	fi, err := os.Lstat(dotGit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return root, nil
	case err != nil:
		return "", err
	case fi.Mode().IsRegular():
		line, err := readSmall(dotGit)
		if err != nil {
			return "", err
		}
		p, ok := strings.CutPrefix(line, "gitdir: ")
		if !ok {
			return "", errors.New(".git file without gitdir")
		}
		p = strings.TrimSpace(p)
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		return filepath.EvalSymlinks(p)
	default:
		return filepath.EvalSymlinks(dotGit)
	}
}

// commonDir returns the resolved common directory a work tree's git
// directory names in its commondir file, or "" when it has none.
func commonDir(gitDir string) (string, error) {
	line, err := readSmall(filepath.Join(gitDir, "commondir"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	p := strings.TrimSpace(line)
	if p == "" {
		return "", nil
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(gitDir, p)
	}
	return filepath.EvalSymlinks(p)
}

// readSmall returns the first line of a small file.
func readSmall(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxGitFileSize))
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line, nil
}
