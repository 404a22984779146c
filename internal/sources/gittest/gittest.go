// Package gittest serves git repositories over HTTPS on 127.0.0.1 for
// tests: the real `git http-backend` (the smart HTTP protocol as git hosts
// speak it) behind net/http/cgi and a TLS server whose certificate is made
// for the test (127.0.0.1, ::1 and localhost). A checker reaches it only
// through the client Client gives it: the certificate is trusted there and
// nowhere else, and loopback is refused unless the client allows private
// addresses — which is what the SSRF guard tests need to show.
//
// It needs the git binary; NewServer skips the test when it is missing.
package gittest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Server is a git host on 127.0.0.1 serving the bare repositories under its
// root directory.
type Server struct {
	// URL is https://127.0.0.1:port; a repository added as "x" is at URL+"/x.git".
	URL      string
	root     string
	roots    *x509.CertPool
	requests atomic.Int64
}

// NewServer starts a server, stopped in t.Cleanup. It skips t when the git
// binary is not installed.
func NewServer(t testing.TB) *Server {
	t.Helper()
	gitBin := gitPath(t)
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	s := &Server{root: t.TempDir()}
	// http-backend's complaints (a repository that is not there) are
	// answers to the client, and a client that stops reading (a fetch over
	// its limit) is what some tests are about: neither belongs in the log.
	h := &cgi.Handler{Path: backend, Dir: s.root, Stderr: io.Discard, Logger: log.New(io.Discard, "", 0),
		Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1",
			// The system's and the user's git configuration stay out.
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.root}}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	cert, pool := certificate(t)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	s.URL, s.roots = ts.URL, pool
	return s
}

// Requests is how many requests the server has answered.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Client is the platform's guarded client (weburl.GuardedClient) with this
// server's certificate trusted. Without allowPrivate the guard refuses the
// server, as it refuses any loopback address.
func (s *Server) Client(allowPrivate bool) *http.Client {
	c := weburl.GuardedClient(allowPrivate, 0)
	tr := c.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{RootCAs: s.roots}
	// Loopback is never proxied by Go; NO_PROXY-less environments must not
	// send this test traffic to a proxy either.
	tr.Proxy = nil
	return c
}

// Add serves a bare copy of the repository at dir as name.git and returns
// its URL.
func (s *Server) Add(t testing.TB, name, dir string) string {
	t.Helper()
	bare := filepath.Join(s.root, name+".git")
	run(t, "", "clone", "-q", "--bare", dir, bare)
	// Large files are sent whole, not searched for deltas against each
	// other (as large hosts do): the search costs seconds per megabyte of
	// random test data. Small files still make deltas.
	run(t, bare, "config", "core.bigFileThreshold", "1m")
	return s.URL + "/" + name + ".git"
}

// AddFiles commits files (path → content) to branch main of a new
// repository and serves it as name.git; it returns the URL.
func (s *Server) AddFiles(t testing.TB, name string, files map[string][]byte) string {
	t.Helper()
	return s.Add(t, name, Repo(t, files))
}

// Repo commits files (path → content) to branch main of a new repository
// in a temporary directory and returns the directory.
func Repo(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "init", "-q", "-b", "main")
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, dir, "add", "-A")
	run(t, dir, "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "files")
	return dir
}

func gitPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed: the git server of these tests is git http-backend")
	}
	return p
}

func run(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(gitPath(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// certificate makes a self-signed certificate for the loopback names.
func certificate(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gittest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
