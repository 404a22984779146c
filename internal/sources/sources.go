// Package sources is the port through which deployments read the source of
// a hosted_repo revision: resolve a ref to a commit, read the graph config
// at that commit, and hand the commit's files to a callback. It owns the
// port's vocabulary (Checker, Checkout, Error) so that the deployments use
// case never imports an adapter; the go-git adapter is internal/sources/git,
// chosen by the composition roots.
package sources

import (
	"context"
	"io/fs"
	"strings"
)

// Checker reads hosted repositories.
type Checker interface {
	// CheckURL reports whether repoURL names a repository this checker may
	// read, decided without reaching it (no network, no look at the file
	// system, so its answer says nothing about what exists there): nil, or
	// an *Error whose Reason is the rule the URL breaks, phrased to follow
	// the field's name ("must ..."). Deployments apply it when a
	// deployment is created or changed, so that a source the server will
	// refuse is refused then, naming the field; CheckFiles applies it again.
	CheckURL(repoURL string) error
	// CheckFiles resolves a hosted repository's ref, reads its graph config
	// at configPath and, when read is not nil, calls read with the commit's
	// tree as a read-only fs.FS (valid only during the call; read's error
	// is CheckFiles' error). A source that cannot be used is an *Error.
	CheckFiles(ctx context.Context, repoURL, ref, configPath string, read func(fs.FS) error) (Checkout, error)
}

// Checkout is what a revision's source resolved to.
type Checkout struct {
	CommitSHA string         // full 40-hex sha of the ref
	Config    map[string]any // the parsed graph config file (JSON or YAML)
}

// Error reports why a revision's source cannot be used. Reason is safe to
// show to the deployment's author: it never contains credentials.
type Error struct {
	Reason string
	// Cause is context.Canceled or context.DeadlineExceeded for a check that
	// was canceled or timed out, nil otherwise: other causes may carry
	// details that are not safe to show.
	Cause error
}

func (e *Error) Error() string { return e.Reason }

// Unwrap exposes Cause.
func (e *Error) Unwrap() error { return e.Cause }

// IsTagRef reports whether ref is a full tag ref (refs/tags/...).
func IsTagRef(ref string) bool {
	return strings.HasPrefix(ref, "refs/tags/") && len(ref) > len("refs/tags/")
}
