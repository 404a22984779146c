package git

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"gopkg.in/yaml.v3"

	"github.com/stepgraph/stepgraph/internal/sources"
)

const (
	// DefaultTimeout bounds a whole check when Checker.Timeout is zero.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxBytes bounds what one check reads from the network when
	// Checker.MaxBytes is zero.
	DefaultMaxBytes = 200 << 20
	// DefaultMaxObjectBytes bounds one object (a file) of a fetched
	// repository, inflated, when Checker.MaxObjectBytes is zero.
	DefaultMaxObjectBytes = 64 << 20
	// DefaultMaxConcurrent bounds the checks running at once when
	// Checker.MaxConcurrent is zero.
	DefaultMaxConcurrent = 4
	// MaxConfigSize is the largest graph config file Check accepts.
	MaxConfigSize = 1 << 20

	maxSymlinkHops = 8
	maxTagDepth    = 16
)

// Checker checks hosted repositories. The zero value is usable: https://
// only, through the SSRF-guarded client, within the default limits.
//
// A Checker must not be copied after its first use (it holds the slots of
// MaxConcurrent).
type Checker struct {
	// LocalDirs are the directories under which file:// URLs and absolute
	// local paths may be read (the -allow-local-repos flag). A repository,
	// its git directory and a work tree's common directory must each be
	// inside one of them once symbolic links are evaluated, and never in
	// /proc, /sys or /dev. Empty: local repositories are refused.
	LocalDirs []string
	// HTTPClient fetches https:// repositories. Roots pass the platform's
	// guarded client (weburl.GuardedClient), the one webhooks and deployed
	// graphs call through; nil: a guarded client that refuses private,
	// loopback, link-local and metadata addresses.
	HTTPClient *http.Client
	// MaxBytes bounds the bytes one check reads from the network — about
	// what it writes to disk; DefaultMaxBytes (200 MiB) when zero.
	MaxBytes int64
	// MaxObjectBytes bounds one object of a fetched repository (a file, a
	// tree), inflated: indexing a pack holds its largest object in memory,
	// and compressed bytes (MaxBytes) say little about it. A repository
	// with a larger file fails to build; DefaultMaxObjectBytes (64 MiB)
	// when zero.
	MaxObjectBytes int64
	// Timeout bounds a whole check, the fetch and the reads after it;
	// DefaultTimeout (2 minutes) when zero.
	Timeout time.Duration
	// MaxConcurrent bounds the checks running at once; DefaultMaxConcurrent
	// (4) when zero. A check waits for a slot before its Timeout starts,
	// for as long as its context lets it.
	MaxConcurrent int
	// TempDir is where fetched repositories are written, each in a
	// directory of its own removed when its check ends; os.TempDir() when
	// empty (on Lambda, /tmp: the only writable directory).
	TempDir string

	slotsOnce sync.Once
	slots     chan struct{}
}

func sourceErr(format string, args ...any) *sources.Error {
	return &sources.Error{Reason: fmt.Sprintf(format, args...)}
}

func (c *Checker) maxBytes() int64 {
	if c.MaxBytes > 0 {
		return c.MaxBytes
	}
	return DefaultMaxBytes
}

func (c *Checker) maxObjectBytes() int64 {
	if c.MaxObjectBytes > 0 {
		return c.MaxObjectBytes
	}
	return DefaultMaxObjectBytes
}

// acquire takes one of the MaxConcurrent slots, waiting as long as ctx lets it.
func (c *Checker) acquire(ctx context.Context) error {
	c.slotsOnce.Do(func() {
		n := c.MaxConcurrent
		if n <= 0 {
			n = DefaultMaxConcurrent
		}
		c.slots = make(chan struct{}, n)
	})
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Checker) release() { <-c.slots }

// CheckURL reports whether repoURL is a repository this checker may read,
// decided without reaching it (no network, no look at the file system):
// nil, or a *sources.Error whose Reason is the rule it breaks, phrased to
// follow the field's name ("must ..."). CheckFiles applies the same rule.
func (c *Checker) CheckURL(repoURL string) error {
	if _, rule := c.parseSource(repoURL); rule != "" {
		return &sources.Error{Reason: rule}
	}
	return nil
}

// Check resolves ref in the repository at repoURL and reads and parses the
// graph config at configPath from that commit.
func (c *Checker) Check(ctx context.Context, repoURL, ref, configPath string) (sources.Checkout, error) {
	return c.CheckFiles(ctx, repoURL, ref, configPath, nil)
}

// CheckFiles is Check, and then, when read is not nil, calls read with the
// commit's tree as a read-only fs.FS (see Files), within the same time
// bound; read's error is CheckFiles' error. The fs.FS is valid only during
// the call: read copies what it needs.
func (c *Checker) CheckFiles(ctx context.Context, repoURL, ref, configPath string, read func(fs.FS) error) (sources.Checkout, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	src, rule := c.parseSource(repoURL)
	if rule != "" {
		if src == nil {
			return sources.Checkout{}, sourceErr("repository URL %s", rule)
		}
		return sources.Checkout{}, sourceErr("repository URL %q %s", src.display, rule)
	}
	want, err := parseRef(ref)
	if err != nil {
		return sources.Checkout{}, err
	}
	cfg, err := parseConfigPath(configPath)
	if err != nil {
		return sources.Checkout{}, err
	}

	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	parent := ctx
	if err := c.acquire(parent); err != nil {
		return sources.Checkout{}, contextError(parent, parent, src, timeout)
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()

	// go-git honours ctx for network I/O but not everywhere (object decoding,
	// local reads); running the work aside keeps CheckFiles itself bounded.
	// The goroutine owns its temporary directory and its slot: both are
	// given back when the work really ends, not when CheckFiles gives up
	// waiting for it.
	type result struct {
		co  sources.Checkout
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.release()
		co, err := c.check(ctx, src, want, cfg, read)
		done <- result{co, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() != nil {
			return sources.Checkout{}, contextError(parent, ctx, src, timeout)
		}
		return r.co, r.err
	case <-ctx.Done():
		return sources.Checkout{}, contextError(parent, ctx, src, timeout)
	}
}

func contextError(parent, ctx context.Context, src *source, timeout time.Duration) error {
	err := ctx.Err()
	if parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return &sources.Error{Reason: fmt.Sprintf("checking repository %q timed out after %s (this server's time limit for a check)", src.display, timeout), Cause: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &sources.Error{Reason: fmt.Sprintf("checking repository %q timed out", src.display), Cause: err}
	}
	return &sources.Error{Reason: fmt.Sprintf("checking repository %q was canceled", src.display), Cause: err}
}

func (c *Checker) check(ctx context.Context, src *source, want *refWant, cfg *configPath, read func(fs.FS) error) (sources.Checkout, error) {
	var (
		objects storer.EncodedObjectStorer
		target  plumbing.Hash
		err     error
	)
	if src.local != "" {
		repo, oerr := c.openLocal(src)
		if oerr != nil {
			return sources.Checkout{}, oerr
		}
		if cl, ok := repo.Storer.(io.Closer); ok {
			defer cl.Close()
		}
		objects = repo.Storer
		target, err = resolveLocal(repo, src, want)
	} else {
		dir, derr := os.MkdirTemp(c.TempDir, "stepgraph-git-")
		if derr != nil {
			// The server's disk, not the source: an error to retry, not a
			// reason to fail the revision.
			return sources.Checkout{}, fmt.Errorf("git: temporary directory for a fetch: %w", derr)
		}
		defer os.RemoveAll(dir)
		m := &meter{limit: c.maxBytes()}
		objects, target, err = c.fetchRemote(ctx, src, want, dir, m)
		if cl, ok := objects.(io.Closer); ok {
			defer cl.Close() // deferred after RemoveAll, so it runs before it
		}
	}
	if err != nil {
		return sources.Checkout{}, err
	}
	if err := ctx.Err(); err != nil {
		return sources.Checkout{}, err
	}

	commit, err := peelToCommit(objects, target, want, src)
	if err != nil {
		return sources.Checkout{}, err
	}
	data, name, err := readConfig(objects, commit, cfg, want, src)
	if err != nil {
		return sources.Checkout{}, err
	}
	conf, err := parseConfig(cfg.raw, name, data)
	if err != nil {
		return sources.Checkout{}, err
	}
	if read != nil {
		tree, err := commit.Tree()
		if err != nil {
			return sources.Checkout{}, sourceErr("reading the tree of ref %q failed: %s", want.raw, src.sanitize(err.Error()))
		}
		if err := read(&treeFS{objects: objects, tree: tree, src: src}); err != nil {
			return sources.Checkout{}, err
		}
	}
	return sources.Checkout{CommitSHA: commit.Hash.String(), Config: conf}, nil
}

// --- repository URL ---------------------------------------------------------

// The rules of a repository URL, phrased to follow the field's name.
const (
	ruleHTTPS         = "must be an https:// URL"
	ruleHTTPSOrLocal  = "must be an https:// URL, or a file:// URL inside the directories this server allows for local repositories"
	ruleLocalDisabled = "must be an https:// URL: local repositories (file:// URLs and local paths) are disabled on this server"
	ruleLocalOutside  = "must name a repository inside the directories this server allows for local repositories"
	ruleNoQuery       = "must not contain a query string or a fragment (a token there would be stored and shown with the URL)"
)

type source struct {
	raw     string // as given (may hold credentials; never printed)
	display string // credentials, query and fragment redacted; used in every message
	local   string // filesystem path when the repository is opened in place
	url     string // URL handed to go-git (credentials removed) otherwise
	auth    transport.AuthMethod
	secrets []string
}

// parseSource reads a repository URL; a non-empty rule is the rule it
// breaks (src is nil only when the URL is empty).
func (c *Checker) parseSource(raw string) (*source, string) {
	if strings.TrimSpace(raw) == "" {
		return nil, "is required"
	}
	src := &source{raw: raw, display: redactRaw(raw)}
	if strings.ContainsAny(raw, "\x00\r\n\t") {
		return src, "must not contain control characters"
	}
	scheme := ruleHTTPS
	if len(c.LocalDirs) > 0 {
		scheme = ruleHTTPSOrLocal
	}

	if filepath.IsAbs(raw) || strings.HasPrefix(raw, "/") {
		src.local = filepath.Clean(raw)
		return src, c.localRule(src.local)
	}
	if !strings.Contains(raw, "://") {
		return src, scheme
	}
	u, err := url.Parse(raw)
	if err != nil {
		return src, "must be a valid URL"
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return src, ruleNoQuery
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		if u.Host == "" || u.Opaque != "" || u.Hostname() == "" {
			return src, "must name a host"
		}
		if u.User != nil {
			name := u.User.Username()
			pass, _ := u.User.Password()
			src.auth = &githttp.BasicAuth{Username: name, Password: pass}
			src.secrets = secretForms(u.User.String(), name, pass)
		}
		clean := *u
		clean.User = nil
		src.url = clean.String()
		return src, ""
	case "file":
		if len(c.LocalDirs) == 0 {
			return src, ruleLocalDisabled
		}
		if u.User != nil || (u.Host != "" && !strings.EqualFold(u.Host, "localhost")) {
			return src, "must name a local path (file:///path)"
		}
		p := filepath.FromSlash(u.Path)
		if u.Path == "" || !filepath.IsAbs(p) {
			return src, "must name an absolute path"
		}
		src.local = filepath.Clean(p)
		return src, c.localRule(src.local)
	default:
		return src, scheme
	}
}

// redactRaw replaces the userinfo of a URL-ish string (everything before the
// last '@' of its authority) with "***", and its query and fragment too. It
// works on strings url.Parse rejects and on scp-like forms, so a message can
// always show what was given.
func redactRaw(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i+1] + "***"
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + 3
	}
	end := len(raw)
	if i := strings.IndexAny(raw[start:], "/?#"); i >= 0 {
		end = start + i
	}
	at := strings.LastIndex(raw[start:end], "@")
	if at < 0 {
		return raw
	}
	return raw[:start] + "***" + raw[start+at:]
}

func secretForms(values ...string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, v := range values {
		add(v)
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// sanitize makes an underlying error message safe to show: the URL as given
// becomes its redacted form and every credential is masked.
func (s *source) sanitize(msg string) string {
	if s.raw != s.display {
		msg = strings.ReplaceAll(msg, s.raw, s.display)
	}
	for _, secret := range s.secrets {
		msg = strings.ReplaceAll(msg, secret, "***")
	}
	return msg
}

func (s *source) repoError(err error) error {
	switch {
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return sourceErr("repository %q is empty (it has no commits)", s.display)
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, gogit.ErrRepositoryNotExists),
		errors.Is(err, os.ErrNotExist):
		return sourceErr("repository %q not found or not readable", s.display)
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return sourceErr("repository %q not found or not readable: authentication required", s.display)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return sourceErr("repository %q not found or not readable: authorization failed", s.display)
	}
	return sourceErr("repository %q not found or not readable: %s", s.display, s.sanitize(err.Error()))
}

// --- ref --------------------------------------------------------------------

type refWant struct {
	raw  string
	hash plumbing.Hash // set when raw is a full commit sha
	// candidates are the full ref names raw may stand for, in order.
	candidates []plumbing.ReferenceName
}

func parseRef(ref string) (*refWant, error) {
	w := &refWant{raw: ref}
	switch {
	case ref == "":
		return nil, sourceErr("ref is required (a branch, a tag, a full ref or a 40-hex commit sha)")
	case isFullSHA(ref):
		w.hash = plumbing.NewHash(strings.ToLower(ref))
		return w, nil
	case ref == "HEAD":
		w.candidates = []plumbing.ReferenceName{plumbing.HEAD}
	case strings.HasPrefix(ref, "refs/"):
		w.candidates = []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	default:
		w.candidates = []plumbing.ReferenceName{
			plumbing.NewBranchReferenceName(ref),
			plumbing.NewTagReferenceName(ref),
		}
	}
	for _, name := range w.candidates {
		if err := name.Validate(); err != nil {
			return nil, sourceErr("ref %q is not a valid git ref name", ref)
		}
	}
	return w, nil
}

func isFullSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func isHex(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')
}

func (w *refWant) notFound() error {
	hint := ""
	if n := len(w.raw); n >= 4 && n < 40 && strings.IndexFunc(w.raw, func(r rune) bool { return r > 0x7f || !isHex(byte(r)) }) < 0 {
		hint = " (abbreviated commit shas are not supported: use the full 40-character sha)"
	}
	return sourceErr("ref %q not found in repository%s", w.raw, hint)
}

// --- local repositories -----------------------------------------------------

func resolveLocal(repo *gogit.Repository, src *source, want *refWant) (plumbing.Hash, error) {
	if !want.hash.IsZero() {
		return want.hash, nil
	}
	for _, name := range want.candidates {
		ref, err := repo.Reference(name, true)
		if err == nil {
			return ref.Hash(), nil
		}
		if !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return plumbing.ZeroHash, sourceErr("reading ref %q from repository %q failed: %s", want.raw, src.display, src.sanitize(err.Error()))
		}
	}
	return plumbing.ZeroHash, want.notFound()
}

// --- commit and config ------------------------------------------------------

func peelToCommit(s storer.EncodedObjectStorer, h plumbing.Hash, want *refWant, src *source) (*object.Commit, error) {
	for i := 0; i < maxTagDepth; i++ {
		obj, err := object.GetObject(s, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, want.notFound()
		}
		if err != nil {
			return nil, sourceErr("reading ref %q from repository %q failed: %s", want.raw, src.display, src.sanitize(err.Error()))
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o, nil
		case *object.Tag:
			h = o.Target
		default:
			return nil, sourceErr("ref %q points to a %s, not a commit", want.raw, obj.Type())
		}
	}
	return nil, sourceErr("ref %q is a chain of more than %d tags", want.raw, maxTagDepth)
}

type configPath struct {
	raw   string // as given, for messages
	clean string // slash-separated, relative, inside the repository
}

func parseConfigPath(p string) (*configPath, error) {
	if strings.TrimSpace(p) == "" {
		return nil, sourceErr("graph config path is required")
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return nil, sourceErr("graph config path %q contains control characters", p)
		}
	}
	if strings.Contains(p, `\`) {
		return nil, sourceErr("graph config path %q must use forward slashes", p)
	}
	if path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "" {
		return nil, sourceErr("graph config path %q must be relative to the repository root", p)
	}
	clean := path.Clean(p)
	if escapes(clean) {
		return nil, sourceErr("graph config path %q escapes the repository", p)
	}
	if clean == "." {
		return nil, sourceErr("graph config path %q does not name a file", p)
	}
	for _, part := range strings.Split(clean, "/") {
		if strings.EqualFold(part, ".git") {
			return nil, sourceErr("graph config path %q must not be inside .git", p)
		}
	}
	return &configPath{raw: p, clean: clean}, nil
}

func escapes(clean string) bool {
	return clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "/")
}

// readConfig reads cfg from commit's tree, following symbolic links that stay
// inside the tree. It returns the content and the path finally read.
func readConfig(s storer.EncodedObjectStorer, commit *object.Commit, cfg *configPath, want *refWant, src *source) ([]byte, string, error) {
	tree, err := commit.Tree()
	if err != nil {
		return nil, "", sourceErr("reading the tree of ref %q failed: %s", want.raw, src.sanitize(err.Error()))
	}
	notFound := func() error {
		return sourceErr("graph config %q not found at ref %q", cfg.raw, want.raw)
	}
	p := cfg.clean
	for hops := 0; ; hops++ {
		entry, err := tree.FindEntry(p)
		if err != nil {
			switch {
			case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound),
				errors.Is(err, object.ErrFileNotFound), errors.Is(err, plumbing.ErrObjectNotFound):
				return nil, "", notFound()
			case strings.HasPrefix(err.Error(), "invalid path"):
				return nil, "", sourceErr("graph config path %q is not a valid repository path", cfg.raw)
			}
			return nil, "", sourceErr("reading graph config %q at ref %q failed: %s", cfg.raw, want.raw, src.sanitize(err.Error()))
		}
		switch entry.Mode {
		case filemode.Dir:
			return nil, "", sourceErr("graph config %q at ref %q is a directory, not a file", cfg.raw, want.raw)
		case filemode.Submodule:
			return nil, "", sourceErr("graph config %q at ref %q is a submodule, not a file", cfg.raw, want.raw)
		case filemode.Symlink:
			if hops >= maxSymlinkHops {
				return nil, "", sourceErr("graph config %q at ref %q: too many levels of symbolic links", cfg.raw, want.raw)
			}
			target, err := readBlob(s, entry.Hash, 4096)
			if err != nil {
				return nil, "", sourceErr("reading graph config %q at ref %q failed: %s", cfg.raw, want.raw, src.sanitize(err.Error()))
			}
			t := string(target)
			next := path.Join(path.Dir(p), t)
			if path.IsAbs(t) || escapes(next) {
				return nil, "", sourceErr("graph config %q at ref %q is a symbolic link that points outside the repository", cfg.raw, want.raw)
			}
			p = next
			continue
		}
		data, err := readBlob(s, entry.Hash, MaxConfigSize)
		if errors.Is(err, errTooLarge) {
			return nil, "", sourceErr("graph config %q at ref %q is larger than %d bytes", cfg.raw, want.raw, MaxConfigSize)
		}
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, "", notFound()
		}
		if err != nil {
			return nil, "", sourceErr("reading graph config %q at ref %q failed: %s", cfg.raw, want.raw, src.sanitize(err.Error()))
		}
		return data, p, nil
	}
}

var errTooLarge = errors.New("blob too large")

func readBlob(s storer.EncodedObjectStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	blob, err := object.GetBlob(s, h)
	if err != nil {
		return nil, err
	}
	if blob.Size > limit {
		return nil, errTooLarge
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// --- parsing ----------------------------------------------------------------

// parseConfig parses data by the extension of name (the path finally read);
// messages use display (the path as configured).
func parseConfig(display, name string, data []byte) (map[string]any, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var (
		v   any
		err error
	)
	switch strings.ToLower(path.Ext(name)) {
	case ".json":
		v, err = parseJSON(data)
	case ".yaml", ".yml":
		v, err = parseYAML(data)
	default:
		v, err = parseJSON(data)
		if err != nil {
			jerr := err
			v, err = parseYAML(data)
			if err != nil && looksLikeJSON(data) {
				err = jerr
			}
		}
	}
	if err != nil {
		return nil, sourceErr("graph config %q is not valid JSON or YAML: %s", display, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, sourceErr("graph config %q must be an object, got %s", display, kindOf(v))
	}
	return m, nil
}

func looksLikeJSON(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func parseJSON(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return nil, fmt.Errorf("line %d, column %d: %s", line, col, se.Error())
		}
		return nil, err
	}
	return v, nil
}

// position turns a byte offset just past an error into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	line, col = 1, 0
	for _, b := range data[:offset] {
		if b == '\n' {
			line, col = line+1, 0
			continue
		}
		col++
	}
	if col == 0 {
		col = 1
	}
	return line, col
}

// parseYAML decodes a single YAML document and normalises it to what the
// equivalent JSON would decode to.
func parseYAML(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty document
		}
		return nil, err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("yaml: more than one document (only a single document is allowed)")
	}
	v, err := stringKeys(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("yaml: value cannot be represented as JSON: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func stringKeys(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ks := keyString(k)
			if _, dup := out[ks]; dup {
				return nil, fmt.Errorf("yaml: mapping has two keys that both read as %q", ks)
			}
			c, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := stringKeys(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}

func keyString(k any) string {
	switch t := k.(type) {
	case string:
		return t
	case nil:
		return "null"
	case time.Time:
		return t.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(k)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
