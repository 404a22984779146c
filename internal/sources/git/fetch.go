package git

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/stepgraph/stepgraph/internal/weburl"
)

const (
	// objectCacheSize bounds the decoded objects a check keeps in memory: it
	// reads a commit, a few trees and small files, nothing more.
	objectCacheSize = 8 * cache.MiByte
	// maxPackObjects bounds the objects of one fetch: the indexer keeps a
	// record of each in memory. A deployment's commit with this many files
	// is not a graph repository.
	maxPackObjects = 100_000
)

// --- the network ------------------------------------------------------------

// defaultClient is the client of checkers without one: the guard, refusing
// private addresses. One for the process, so that its connections are
// pooled, not left idle by every check.
var defaultClient = weburl.GuardedClient(false, 0)

// meter counts the bytes one check reads from the network against its
// limit, and remembers why the connection failed: go-git wraps transport
// errors in types that hide them, and the message must say what went wrong
// without the raw text (addresses, resolvers).
type meter struct {
	limit int64

	mu   sync.Mutex
	read int64
	over bool
	err  error // the first error of a round trip
}

var errFetchLimit = errors.New("repository larger than the fetch limit")

// add counts n more bytes; false once the limit is passed.
func (m *meter) add(n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read += int64(n)
	if m.read > m.limit {
		m.over = true
	}
	return !m.over
}

// fits reports whether n more bytes stay within the limit; when they do
// not, the limit counts as passed.
func (m *meter) fits(n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read+n > m.limit {
		m.over = true
	}
	return !m.over
}

func (m *meter) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

func (m *meter) state() (over bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.over, m.err
}

// meteredTransport is the check's client transport: every response body
// (redirects included) is counted, and reading stops with errFetchLimit past
// the limit, so what a check downloads — and writes to disk — is bounded
// however large the repository.
type meteredTransport struct {
	base http.RoundTripper
	m    *meter
}

func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		t.m.fail(err)
		return nil, err
	}
	if res.ContentLength > 0 && !t.m.fits(res.ContentLength) {
		// Announced too large: not a byte of it is read.
		res.Body.Close()
		return nil, errFetchLimit
	}
	res.Body = &meteredBody{ReadCloser: res.Body, m: t.m}
	return res, nil
}

type meteredBody struct {
	io.ReadCloser
	m *meter
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.m.add(n) {
		return 0, errFetchLimit
	}
	return n, err
}

// client is the go-git transport of one check: HTTPClient (the guarded
// client) behind the meter. It is made per check and passed to the session
// directly, not installed in go-git's process-wide protocol table
// (client.InstallProtocol), so checkers with different clients and limits
// never see each other's.
func (c *Checker) client(m *meter) transport.Transport {
	base := c.HTTPClient
	if base == nil {
		base = defaultClient
	}
	cl := *base
	rt := cl.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	cl.Transport = &meteredTransport{base: rt, m: m}
	return githttp.NewClient(&cl)
}

// --- fetching ----------------------------------------------------------------

// fetchRemote lists the remote's refs, picks the object ref stands for and
// fetches just enough to read it — depth 1 of one ref when it can — into
// filesystem storage in dir: the pack streams to disk, memory stays small
// however large the repository is.
func (c *Checker) fetchRemote(ctx context.Context, src *source, want *refWant, dir string, m *meter) (storer.EncodedObjectStorer, plumbing.Hash, error) {
	fail := func(err error) (storer.EncodedObjectStorer, plumbing.Hash, error) {
		return nil, plumbing.ZeroHash, c.fetchError(ctx, err, m, src, want)
	}
	ep, err := transport.NewEndpoint(src.url)
	if err != nil {
		return nil, plumbing.ZeroHash, sourceErr("repository URL %q must be a valid URL", src.display)
	}
	sess, err := c.client(m).NewUploadPackSession(ep, src.auth)
	if err != nil {
		return fail(err)
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return fail(err)
	}
	refs, err := ar.AllReferences()
	if err != nil {
		return fail(err)
	}
	advertised := map[plumbing.ReferenceName]*plumbing.Reference{}
	for name, r := range refs {
		advertised[name] = r
	}
	peeled := map[plumbing.ReferenceName]plumbing.Hash{}
	for name, h := range ar.Peeled {
		peeled[plumbing.ReferenceName(name)] = h
	}
	hashOf := func(name plumbing.ReferenceName) (plumbing.Hash, bool) {
		for i := 0; i < 8; i++ {
			r, ok := advertised[name]
			if !ok {
				return plumbing.ZeroHash, false
			}
			if r.Type() == plumbing.HashReference {
				return r.Hash(), true
			}
			name = r.Target()
		}
		return plumbing.ZeroHash, false
	}

	var target, tip plumbing.Hash
	if !want.hash.IsZero() {
		target = want.hash
		// A sha: fetch the branch or tag whose tip it is, if any (a server
		// always serves what it advertises).
		if name := tipRef(advertised, peeled, target); name != "" {
			tip, _ = hashOf(name)
		}
	} else {
		for _, name := range want.candidates {
			if h, ok := hashOf(name); ok {
				target, tip = h, h
				break
			}
		}
		if target.IsZero() {
			return nil, plumbing.ZeroHash, want.notFound()
		}
	}

	var shallows []plumbing.Hash
	fetch := func(depth int, wants []plumbing.Hash) error {
		req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
		req.Wants = wants
		if depth > 0 {
			req.Depth = packp.DepthCommits(depth)
			if err := req.Capabilities.Set(capability.Shallow); err != nil {
				return err
			}
		}
		if ar.Capabilities.Supports(capability.NoProgress) {
			if err := req.Capabilities.Set(capability.NoProgress); err != nil {
				return err
			}
		}
		res, err := sess.UploadPack(ctx, req)
		if err != nil {
			return err
		}
		defer res.Close()
		shallows = res.Shallows
		return c.receivePack(dir, demux(req.Capabilities, res))
	}
	switch {
	case !tip.IsZero():
		err = fetch(1, []plumbing.Hash{tip})
	default:
		// Not the tip of anything advertised: ask for the commit itself
		// where the server allows it, else fetch every branch and tag in
		// full (still bounded by the fetch limit).
		err = errors.New("the server does not serve unadvertised commits")
		if ar.Capabilities.Supports(capability.AllowReachableSHA1InWant) {
			err = fetch(1, []plumbing.Hash{target})
		}
		var objLimit *errObjectLimit
		var disk *diskError
		if err != nil && ctx.Err() == nil && !errors.Is(err, errFetchLimit) && !errors.As(err, &objLimit) && !errors.As(err, &disk) {
			if over, _ := m.state(); !over {
				err = fetch(0, allTips(advertised))
			}
		}
	}
	if err != nil {
		return fail(err)
	}
	// Opened once the pack is in place: with exclusive access the storage
	// lists the packs once.
	st := filesystem.NewStorageWithOptions(osfs.New(dir, osfs.WithBoundOS()), cache.NewObjectLRU(objectCacheSize),
		filesystem.Options{ExclusiveAccess: true, LargeObjectThreshold: MaxFileSize})
	if len(shallows) > 0 {
		if err := st.SetShallow(shallows); err != nil {
			return fail(err)
		}
	}
	if _, err := st.EncodedObject(plumbing.AnyObject, target); err != nil {
		return nil, plumbing.ZeroHash, want.notFound()
	}
	return st, target, nil
}

// errObjectLimit is a pack holding more objects, or a larger object, than a
// check may index.
type errObjectLimit struct{ what string }

func (e *errObjectLimit) Error() string { return e.what }

// receivePack writes the pack r streams to disk, checks that indexing it
// stays within the check's memory bounds, and indexes it into dir's object
// store (objects/pack/pack-<sha>.pack and .idx).
//
// go-git's indexer inflates each object whole into memory (a delta with
// its base), and keeps up to 96 MiB of delta bases: the memory of a check
// follows its largest object, not its repository. MaxBytes counts
// compressed bytes, so a small pack may hold a huge object (a file of
// zeros compresses a thousandfold); the object headers are checked first,
// streaming, before anything is inflated whole.
func (c *Checker) receivePack(dir string, r io.Reader) error {
	packDir := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o700); err != nil {
		return &diskError{err}
	}
	f, err := os.CreateTemp(packDir, "incoming-")
	if err != nil {
		return &diskError{err}
	}
	defer func() {
		f.Close()
		os.Remove(f.Name()) // gone once renamed; else the failed attempt's
	}()
	if _, err := io.Copy(diskWriter{f}, r); err != nil {
		return err
	}
	if err := c.checkPack(f); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	idx := new(idxfile.Writer)
	parser, err := packfile.NewParser(packfile.NewScanner(f), idx)
	if err != nil {
		return err
	}
	sum, err := parser.Parse()
	if err != nil {
		return err
	}
	index, err := idx.Index()
	if err != nil {
		return err
	}
	base := filepath.Join(packDir, "pack-"+sum.String())
	out, err := os.Create(base + ".idx")
	if err != nil {
		return &diskError{err}
	}
	if _, err := idxfile.NewEncoder(out).Encode(index); err != nil {
		out.Close()
		return &diskError{err}
	}
	if err := out.Close(); err != nil {
		return &diskError{err}
	}
	if err := os.Rename(f.Name(), base+".pack"); err != nil {
		return &diskError{err}
	}
	return nil
}

// diskError is a failure of the server's own disk while fetching (a full
// temporary directory): not the source's fault, so not a reason to fail
// the revision — the provisioner retries it, and the message (which names
// the server's paths) goes to the log, not to the deployment's author.
type diskError struct{ err error }

func (e *diskError) Error() string { return "git: writing a fetch to disk: " + e.err.Error() }
func (e *diskError) Unwrap() error { return e.err }

// diskWriter tags its writer's failures as the disk's.
type diskWriter struct{ w io.Writer }

func (d diskWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil {
		return n, &diskError{err}
	}
	return n, nil
}

// checkPack reads the pack's object headers, streaming: at most
// maxPackObjects objects, none larger inflated than the object limit (for a
// delta: its instructions and the object it makes).
func (c *Checker) checkPack(f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	limit := c.maxObjectBytes()
	s := packfile.NewScanner(f)
	_, count, err := s.Header()
	if err != nil {
		return err
	}
	if count > maxPackObjects {
		return &errObjectLimit{fmt.Sprintf("it has %d objects, more than this server's limit of %d per fetch", count, maxPackObjects)}
	}
	tooLarge := func(n int64) error {
		return &errObjectLimit{fmt.Sprintf("it holds a file or object of %s, larger than this server's limit of %s per object",
			formatBytes(n), formatBytes(limit))}
	}
	for i := uint32(0); i < count; i++ {
		oh, err := s.NextObjectHeader()
		if err != nil {
			return err
		}
		if oh.Length > limit {
			return tooLarge(oh.Length)
		}
		if !oh.Type.IsDelta() {
			continue // the scanner skips it, inflating into nothing
		}
		var head deltaHead
		if _, _, err := s.NextObject(&head); err != nil {
			return err
		}
		if target := head.targetSize(); target > limit {
			return tooLarge(target)
		}
	}
	return nil
}

// deltaHead keeps the first bytes of a delta's instructions (the sizes of
// its base and of the object it makes) and discards the rest.
type deltaHead struct {
	b []byte
}

func (d *deltaHead) Write(p []byte) (int, error) {
	if room := 20 - len(d.b); room > 0 {
		d.b = append(d.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// targetSize decodes the second size of the delta header (two
// little-endian base-128 varints: the base's size, the target's); -1 when
// the header is cut short.
func (d *deltaHead) targetSize() int64 {
	b := d.b
	for n := 0; n < 2; n++ {
		var v int64
		var shift uint
		for {
			if len(b) == 0 || shift > 56 {
				return -1
			}
			c := b[0]
			b = b[1:]
			v |= int64(c&0x7f) << shift
			shift += 7
			if c&0x80 == 0 {
				break
			}
		}
		if n == 1 {
			return v
		}
	}
	return -1
}

// allTips are the hashes of every advertised branch and tag.
func allTips(advertised map[plumbing.ReferenceName]*plumbing.Reference) []plumbing.Hash {
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	for name, r := range advertised {
		if (name.IsBranch() || name.IsTag()) && r.Type() == plumbing.HashReference && !seen[r.Hash()] {
			seen[r.Hash()] = true
			out = append(out, r.Hash())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// demux separates the pack from the progress messages when the server
// multiplexes them (side-band).
func demux(caps *capability.List, r io.Reader) io.Reader {
	switch {
	case caps.Supports(capability.Sideband64k):
		return sideband.NewDemuxer(sideband.Sideband64k, r)
	case caps.Supports(capability.Sideband):
		return sideband.NewDemuxer(sideband.Sideband, r)
	}
	return r
}

// tipRef names an advertised branch or tag pointing (directly or once peeled)
// at h, preferring branches, or "" when none does.
func tipRef(advertised map[plumbing.ReferenceName]*plumbing.Reference, peeled map[plumbing.ReferenceName]plumbing.Hash, h plumbing.Hash) plumbing.ReferenceName {
	var names []plumbing.ReferenceName
	for name, r := range advertised {
		if !name.IsBranch() && !name.IsTag() {
			continue
		}
		if (r.Type() == plumbing.HashReference && r.Hash() == h) || peeled[name] == h {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if bi, bj := names[i].IsBranch(), names[j].IsBranch(); bi != bj {
			return bi
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// fetchError says why a fetch failed in terms the deployment's author can
// act on: the limit, the guard, or what kind of connection failure, never
// the raw network error (it names resolvers and addresses).
func (c *Checker) fetchError(ctx context.Context, err error, m *meter, src *source, want *refWant) error {
	over, netErr := m.state()
	var objLimit *errObjectLimit
	var disk *diskError
	switch {
	case errors.As(err, &disk):
		return disk
	case over || errors.Is(err, errFetchLimit):
		return sourceErr("repository %q is larger than this server's fetch limit of %s (a shallow fetch of ref %q read more)",
			src.display, formatBytes(c.maxBytes()), want.raw)
	case errors.As(err, &objLimit):
		return sourceErr("repository %q cannot be fetched at ref %q: %s", src.display, want.raw, objLimit.what)
	case ctx.Err() != nil:
		return ctx.Err()
	case netErr != nil:
		return sourceErr("repository %q not reachable: %s", src.display, connectionProblem(netErr))
	}
	return src.repoError(err)
}

// connectionProblem names the kind of a round trip's failure.
func connectionProblem(err error) string {
	var refused *weburl.RefusedError
	var dns *net.DNSError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &refused):
		return "its host is a private, loopback, link-local or metadata address, which this server does not call"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.As(err, &verify), errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return "its TLS certificate is not valid for it"
	case errors.As(err, &record), strings.Contains(err.Error(), "tls:"), strings.Contains(err.Error(), "HTTP response to HTTPS client"):
		return "the TLS handshake with its host failed"
	}
	return "could not connect to its host"
}

// formatBytes writes a limit the way an operator set it: MiB when whole.
func formatBytes(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
