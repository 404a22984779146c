package oauthtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a running mock-oauth2-server.
type Server struct {
	// Issuer is the base of the "default" issuer: its authorization
	// endpoint is Issuer+"/authorize", its token endpoint Issuer+"/token".
	Issuer string
	cmd    *exec.Cmd
	log    bytes.Buffer
}

// Start runs the server from root/.deps/mock-oauth2-server/lib on a free
// loopback port and waits (60 s at most, a safety net) until it answers.
// Stop it with Stop.
func Start(root string) (*Server, error) {
	lib := filepath.Join(root, ".deps", "mock-oauth2-server", "lib")
	if _, err := os.Stat(filepath.Join(lib, "mock-oauth2-server-3.0.3.jar")); err != nil {
		return nil, fmt.Errorf("mock-oauth2-server is not installed in %s: run scripts/install-test-deps.sh", lib)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Issuer: "http://127.0.0.1:" + strconv.Itoa(port) + "/default"}
		s.cmd = exec.Command("java", "-Xmx256m", "-cp", filepath.Join(lib, "*"),
			"no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt")
		s.cmd.Env = append(os.Environ(), "SERVER_HOSTNAME=127.0.0.1", "SERVER_PORT="+strconv.Itoa(port),
			`JSON_CONFIG={"interactiveLogin":false,"httpServer":"NettyWrapper"}`)
		s.cmd.Stdout, s.cmd.Stderr = &lockedWriter{w: &s.log}, &lockedWriter{w: &s.log}
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start java: %w", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- s.cmd.Wait() }()
		if lastErr = s.waitAlive(port, exited); lastErr == nil {
			return s, nil
		}
		s.cmd.Process.Kill()
	}
	return nil, lastErr
}

func (s *Server) waitAlive(port int, exited <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	alive := "http://127.0.0.1:" + strconv.Itoa(port) + "/isalive"
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("mock-oauth2-server exited: %v", err)
		default:
		}
		res, err := http.Get(alive)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond) // polling a starting process, not synchronising a test
	}
	return errors.New("mock-oauth2-server did not answer within 60 s")
}

// Stop ends the server.
func (s *Server) Stop() {
	if s != nil && s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TokenRequest is what the recording front saw of one token request.
type TokenRequest struct {
	GrantType    string
	BasicUser    string // client id in an Authorization: Basic header ("" without)
	BasicPass    string
	Form         url.Values
	Status       int
	AccessToken  string
	RefreshToken string
	IDToken      string
}

// Front records the token requests to a Server and can refuse refreshes.
type Front struct {
	// TokenURL is the front's token endpoint, to register as a provider's
	// token_url.
	TokenURL string
	// RevokeURL is the front's revocation endpoint (RFC 7009), forwarded
	// to the server's /revoke, to register as a provider's revocation_url.
	RevokeURL string
	// Issued is called with every token value the server issued.
	Issued func(string)

	srv            *httptest.Server
	target         string
	mu             sync.Mutex
	seen           []TokenRequest
	revs           []TokenRequest
	failRevocation int
	refuse         bool
	codes          map[string]bool
}

// NewFront starts a recording front of s's token endpoint on loopback.
func NewFront(s *Server) *Front {
	f := &Front{target: s.Issuer + "/token"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.TokenURL = f.srv.URL + "/token"
	f.RevokeURL = f.srv.URL + "/revoke"
	return f
}

// Close stops the front.
func (f *Front) Close() { f.srv.Close() }

// RefuseRefresh makes the front answer refresh grants with invalid_grant,
// as a provider does once the user revoked the grant.
func (f *Front) RefuseRefresh(v bool) {
	f.mu.Lock()
	f.refuse = v
	f.mu.Unlock()
}

// RefuseCode makes the front answer an authorization_code grant of code
// with invalid_grant, as a provider does for a code it never issued
// (mock-oauth2-server itself issues tokens for any code).
func (f *Front) RefuseCode(code string) {
	f.mu.Lock()
	if f.codes == nil {
		f.codes = map[string]bool{}
	}
	f.codes[code] = true
	f.mu.Unlock()
}

// FailRevocation makes the front answer revocation requests with status
// (0: forward them again).
func (f *Front) FailRevocation(status int) {
	f.mu.Lock()
	f.failRevocation = status
	f.mu.Unlock()
}

// Revocations returns the revocation requests seen so far (Status is the
// answer given).
func (f *Front) Revocations() []TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]TokenRequest(nil), f.revs...)
}

// Requests returns the token requests seen so far.
func (f *Front) Requests() []TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]TokenRequest(nil), f.seen...)
}

// Last returns the last token request seen.
func (f *Front) Last() TokenRequest {
	r := f.Requests()
	if len(r) == 0 {
		return TokenRequest{}
	}
	return r[len(r)-1]
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	form, _ := url.ParseQuery(string(body))
	rec := TokenRequest{GrantType: form.Get("grant_type"), Form: form}
	rec.BasicUser, rec.BasicPass, _ = r.BasicAuth()
	if r.URL.Path == "/revoke" {
		f.revoke(w, r, rec, body)
		return
	}
	f.mu.Lock()
	refuse := f.refuse && rec.GrantType == "refresh_token" ||
		rec.GrantType == "authorization_code" && f.codes[form.Get("code")]
	f.mu.Unlock()
	if refuse {
		rec.Status = http.StatusBadRequest
		f.record(rec)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"invalid_grant","error_description":"the grant was revoked"}`)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, f.target, bytes.NewReader(body))
	for _, h := range []string{"Content-Type", "Authorization", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	rec.Status = res.StatusCode
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		IDToken      string `json:"id_token"`
	}
	if json.Unmarshal(out, &tok) == nil {
		rec.AccessToken, rec.RefreshToken, rec.IDToken = tok.AccessToken, tok.RefreshToken, tok.IDToken
		for _, v := range []string{tok.AccessToken, tok.RefreshToken, tok.IDToken} {
			if v != "" && f.Issued != nil {
				f.Issued(v)
			}
		}
	}
	f.record(rec)
	w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
	w.WriteHeader(res.StatusCode)
	w.Write(out)
}

// revoke forwards a revocation request to the server (which revokes
// refresh tokens and refuses other token types) and records it.
func (f *Front) revoke(w http.ResponseWriter, r *http.Request, rec TokenRequest, body []byte) {
	f.mu.Lock()
	fail := f.failRevocation
	f.mu.Unlock()
	if fail != 0 {
		rec.Status = fail
		f.mu.Lock()
		f.revs = append(f.revs, rec)
		f.mu.Unlock()
		w.WriteHeader(fail)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, strings.TrimSuffix(f.target, "/token")+"/revoke", bytes.NewReader(body))
	for _, h := range []string{"Content-Type", "Authorization", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	rec.Status = res.StatusCode
	f.mu.Lock()
	f.revs = append(f.revs, rec)
	f.mu.Unlock()
	w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
	w.WriteHeader(res.StatusCode)
	w.Write(out)
}

func (f *Front) record(r TokenRequest) {
	f.mu.Lock()
	f.seen = append(f.seen, r)
	f.mu.Unlock()
}

// Consent follows the redirect chain from an authorization URL as a
// browser does (cookies kept, at most 10 redirects) and returns the last
// answer: the callback's, when the provider redirected there.
func Consent(ctx context.Context, authURL string) (status int, body []byte, final *url.URL, err error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 60 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "text/html,application/json")
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	body, err = io.ReadAll(res.Body)
	return res.StatusCode, body, res.Request.URL, err
}

// Redirect asks the authorization endpoint for the redirect it would send
// the browser to, without following it: the test can then tamper with it,
// replay it, or replace the code.
func Redirect(ctx context.Context, authURL string) (*url.URL, error) {
	c := &http.Client{Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound && res.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("authorization endpoint answered %d, not a redirect", res.StatusCode)
	}
	return url.Parse(res.Header.Get("Location"))
}
