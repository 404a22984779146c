package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/deployments"
	localdispatch "github.com/stepgraph/stepgraph/internal/dispatch/local"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// exposure collects everything the suite's servers say or keep — response
// bodies, log lines, stored bytes — so TestMain can check that no secret
// value used by any test ever appears in it.
var exposure = struct {
	sync.Mutex
	secrets     []string
	said        bytes.Buffer
	storedLeaks []string
}{}

// secret registers a value as secret for the suite-wide leak scan and returns it.
func secret(v string) string {
	exposure.Lock()
	defer exposure.Unlock()
	exposure.secrets = append(exposure.secrets, v)
	return v
}

// afterAll runs after every test of the package (servers shared by tests).
var afterAll []func()

// repoRoot holds the suite's git repositories (made by repoDir): the one
// directory the servers of newEnv allow file:// repositories under, as
// `serve -allow-local-repos` does.
var repoRoot string

func TestMain(m *testing.M) {
	var err error
	if repoRoot, err = os.MkdirTemp("", "stepgraph-api-repos-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range afterAll {
		f()
	}
	os.RemoveAll(repoRoot)
	if leaks := scanForSecrets(); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, "SECRET LEAK: secret values found in responses, logs or stored records:")
		for _, l := range leaks {
			fmt.Fprintln(os.Stderr, "  ", l)
		}
		code = 1
	}
	os.Exit(code)
}

func scanForSecrets() []string {
	exposure.Lock()
	defer exposure.Unlock()
	if len(exposure.secrets) == 0 {
		return []string{"no secret values were registered: the scan would prove nothing"}
	}
	if exposure.said.Len() == 0 {
		return []string{"no responses or logs were recorded: the scan would prove nothing"}
	}
	var leaks []string
	said := exposure.said.Bytes()
	for _, s := range exposure.secrets {
		if bytes.Contains(said, []byte(s)) {
			leaks = append(leaks, fmt.Sprintf("%q in a response or log line", s))
		}
	}
	return append(leaks, exposure.storedLeaks...)
}

// scanDataDir records every registered secret value found in a file the
// server kept (the database and its WAL, the encrypted secrets file).
func scanDataDir(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	exposure.Lock()
	defer exposure.Unlock()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range exposure.secrets {
			if bytes.Contains(b, []byte(s)) {
				exposure.storedLeaks = append(exposure.storedLeaks, fmt.Sprintf("%q stored in %s", s, filepath.Base(f)))
			}
		}
	}
}

// recorder is an io.Writer feeding the exposure log.
type recorder struct{}

func (recorder) Write(p []byte) (int, error) {
	exposure.Lock()
	defer exposure.Unlock()
	return exposure.said.Write(p)
}

// repoDir makes an empty directory for a repository under repoRoot,
// removed when the test ends.
func repoDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(repoRoot, "repo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// withSources replaces the server's source checker.
func withSources(c *git.Checker) envOption {
	return func(cfg *api.Config) { cfg.Deployments.Sources = c }
}

// env is one running server with two organizations.
type env struct {
	t    testing.TB
	url  string
	keyA string // organization "alpha"
	keyB string // organization "beta"
	// signingSecret returns an organization's current webhook signing
	// secret (whsec_<base64>).
	signingSecret func(org string) []byte
	// callSigner is the server's signer of LangGraph apps' call tokens
	// (the run worker's, on AWS); orgID the id of an organization by name.
	callSigner *calltoken.Signer
	orgID      func(org string) string
	// events is the server's event log (the calls' mailboxes).
	events store.Events
	client *http.Client
}

type envOption func(*api.Config)

// newEnv starts the whole API on real adapters (SQLite, the secrets file, the
// in-process provisioner) behind an httptest server on 127.0.0.1.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newEnvWith is newEnv with assemble changing the options the services are
// assembled with (their limits, say), as a composition root would.
func newEnvWith(t testing.TB, assemble func(*assembly.Options), opts ...envOption) *env {
	t.Helper()
	dir := t.TempDir()
	// Registered before the server's cleanup, so it runs after the server
	// and the database are closed and before the directory is removed.
	t.Cleanup(func() { scanDataDir(dir) })

	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(recorder{}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Deployed graphs call test servers on loopback: the guard allows
	// private addresses, as `serve -outbound-allow-private` does.
	var prov *localdispatch.Provisioner
	o := assembly.Options{
		Log:                     log,
		AllowHTTPLoopback:       true,
		GraphsAllowLoopbackHTTP: true,
		WebhooksAllowPrivate:    true,
		WebhookBackoff:          10 * time.Millisecond,
		PollInterval:            20 * time.Millisecond,
	}
	if assemble != nil {
		assemble(&o)
	}
	svc := assembly.Assemble(assembly.Adapters{
		Store:     db,
		Events:    db,
		Secrets:   sec,
		Sources:   &git.Checker{LocalDirs: []string{repoRoot}},
		Outbound:  weburl.GuardedClient(true, 0),
		AgentAuth: db,
		Provisioner: func(l *deployments.Service) deployments.Provisioner {
			prov = localdispatch.NewProvisioner(l, log)
			return prov
		},
	}, o)
	cfg := svc.APIConfig()
	cfg.Version = "test"
	for _, o := range opts {
		o(&cfg)
	}
	stopWorkers := svc.Runs.StartWorkers(runs.DefaultWorkers, log)
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	if cfg.AgentAuth != nil {
		cfg.AgentAuth.CallbackBase = ts.URL // the OAuth redirect URIs
	}
	t.Cleanup(func() {
		ts.Close()
		stopWorkers()
		svc.Webhooks.Wait()
		prov.Close()
		db.Close()
	})
	e := &env{t: t, url: ts.URL, client: ts.Client()}
	e.signingSecret = func(org string) []byte {
		o, err := db.OrganizationByName(context.Background(), org)
		if err != nil {
			t.Fatal(err)
		}
		k, err := svc.Webhooks.Keys.SigningSecrets(context.Background(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(secret(k[0]))
	}
	e.callSigner, e.events = svc.CallTokens, db
	e.orgID = func(org string) string {
		o, err := db.OrganizationByName(context.Background(), org)
		if err != nil {
			t.Fatal(err)
		}
		return o.ID
	}
	e.keyA = e.newKey(svc.Keys, "alpha")
	e.keyB = e.newKey(svc.Keys, "beta")
	return e
}

func (e *env) newKey(keys *auth.Keys, org string) string {
	ctx := context.Background()
	o, _, err := keys.EnsureOrganization(ctx, org)
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := keys.Create(ctx, o.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return secret(k)
}

// response is an answer with its body read and recorded for the leak scan.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("status %d, body not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

func (r response) detail(t testing.TB) string {
	t.Helper()
	d, _ := r.json(t)["detail"].(string)
	return d
}

// do sends a request with key (none when ""), body as JSON (a string is sent as is).
func (e *env) do(method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	recorder{}.Write(raw)
	for k, v := range res.Header {
		fmt.Fprintf(recorder{}, "%s: %s\n", k, strings.Join(v, ","))
	}
	if res.StatusCode >= 400 && !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		e.t.Errorf("%s %s: error status %d without a JSON body (Content-Type %q)", method, path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// must sends a request and fails the test unless it answers want.
func (e *env) must(want int, method, path, key string, body any, headers ...string) map[string]any {
	e.t.Helper()
	r := e.do(method, path, key, body, headers...)
	if r.Status != want {
		e.t.Fatalf("%s %s: status %d, want %d\n%s", method, path, r.Status, want, r.Body)
	}
	if len(r.Body) == 0 || r.Body[0] == '[' {
		return nil
	}
	return r.json(e.t)
}
