package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/cors"
	"github.com/stepgraph/stepgraph/internal/deployments"
	localdispatch "github.com/stepgraph/stepgraph/internal/dispatch/local"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/weburl"
	pyruntime "github.com/stepgraph/stepgraph/runtimes/python"
)

const (
	dbFile          = "stepgraph.db"
	shutdownTimeout = 30 * time.Second
)

func serve(args []string) error {
	cfg, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	return serveWith(cfg, nil)
}

// serveWith serves cfg until a signal; started, when set, runs once the
// server listens (stepgraph dev), with the server's context and address.
func serveWith(cfg config, started func(ctx context.Context, a *app, url string, log *slog.Logger)) error {
	log, err := newLogger(os.Stderr, cfg.LogJSON, cfg.LogLevel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	a, err := openApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	// Requests run under reqCtx so that a shutdown ends the ones waiting on
	// runs (the run itself carries on, or resumes on the next start).
	reqCtx, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	srv := newHTTPServer(a.handler, cfg.HTTP)
	srv.BaseContext = func(net.Listener) context.Context { return reqCtx }
	a.setPublicURL("http://" + ln.Addr().String())
	log.Info("listening", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "version", version)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if started != nil {
		go started(ctx, a, "http://"+ln.Addr().String(), log)
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	time.AfterFunc(time.Second, endRequests) // a grace second for answers in flight
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// newHTTPServer is the listener's server with the limits of F7. There is no
// ReadTimeout or WriteTimeout: both count from the start of a request and
// would cut a runs/wait or join that answers after minutes (keep-alive
// newlines hold those). The body is bounded per request instead
// (withBodyDeadline), and a dead client of a long answer shows on the
// write side when a keep-alive newline fails.
func newHTTPServer(h http.Handler, l httpLimits) *http.Server {
	return &http.Server{
		Handler:           withBodyDeadline(h, l.ReadBodyTimeout),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// withBodyDeadline gives a request with a body d, from the end of its
// headers, to deliver it: a read deadline on the connection, lifted when the
// body has been read to its end. Lifting it matters: once the body is read,
// net/http keeps a read pending on the connection to notice a client that
// goes away, and that read failing on an expired deadline would cancel the
// request's context, ending a long runs/wait. (net/http clears the deadline
// itself when it starts that read; lifting it here does not depend on that
// detail.) A request without a body (http.NoBody) reads nothing, so it gets
// no deadline; a body left unread is only discarded after the answer, and
// the deadline bounds that.
func withBodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody calls lift once, when the body reaches its end.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

// privateDataDir makes sure that only the server's user may enter dir: it
// holds every organization's data (security review F14). A directory the
// server creates is 0700. One of the user's own that is open to others (a
// mkdir under umask 022 is 0755) is narrowed to 0700 and warn says so: it
// is the accident to expect, not a choice, and refusing it would stop an
// upgraded server whose directory was made that way. A directory that is
// shared by design — another user's, or sticky like /tmp — is refused
// instead: narrowing it would break everyone else who uses it.
func privateDataDir(dir string, warn func(msg string)) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&fs.ModeSticky != 0 || ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("data directory %s is shared with other users (mode %04o%s): it would hold every organization's data; give the server a directory of its own", dir, perm, stickyNote(fi.Mode()))
	}
	if err := os.Chmod(dir, perm&0o700); err != nil {
		return fmt.Errorf("data directory %s is open to other users (mode %04o) and could not be made private: %w", dir, perm, err)
	}
	warn(fmt.Sprintf("data directory %s was open to other users (mode %04o); made it %04o", dir, perm, perm&0o700))
	return nil
}

func stickyNote(m fs.FileMode) string {
	if m&fs.ModeSticky != 0 {
		return ", sticky"
	}
	return ""
}

// app is the wired local server.
type app struct {
	svc     *assembly.Services
	handler http.Handler
	close   func()
	// setPublicURL tells agent auth the server's address once it is known
	// (a -public-url flag, or the listener's address).
	setPublicURL func(string)
}

func openApp(ctx context.Context, cfg config, log *slog.Logger) (*app, error) {
	warn := func(msg string) { log.Warn(msg) }
	if err := ensureDataDir(cfg.DataDir, warn); err != nil {
		return nil, err
	}
	db, err := sqlite.Open(filepath.Join(cfg.DataDir, dbFile))
	if err != nil {
		return nil, err
	}
	sec, err := local.Open(cfg.DataDir)
	if err != nil {
		db.Close()
		return nil, err
	}
	// Every outbound call of a deployed graph goes through the guarded
	// client; its requests are bounded by the nodes' own timeouts. Git
	// fetches go through it too, bounded by the checker's limits.
	outbound := weburl.GuardedClient(cfg.OutboundAllowPrivate, 0)
	if len(cfg.LocalRepos) > 0 {
		// Every organization may deploy what is there: say so once.
		log.Info("local repositories allowed", "dirs", cfg.LocalRepos)
	}
	var prov *localdispatch.Provisioner
	apps, err := langGraphApps(cfg, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	embedder := cfg.Store.embedder(outbound, log)
	if apps != nil {
		apps.Semantic = embedder != nil
	}
	svc := assembly.Assemble(assembly.Adapters{
		LangGraphApps: apps,
		Store:         db,
		Events:        db,
		Secrets:       sec,
		Sources: &git.Checker{LocalDirs: cfg.LocalRepos, HTTPClient: outbound,
			MaxBytes: cfg.GitMaxBytes, Timeout: cfg.GitTimeout},
		Outbound:  outbound,
		AgentAuth: db,
		Embedder:  embedder,
		Provisioner: func(l *deployments.Service) deployments.Provisioner {
			prov = localdispatch.NewProvisioner(l, log)
			return prov
		},
	}, assembly.Options{
		Log:                     log,
		PublicURL:               cfg.PublicURL,
		AllowHTTPLoopback:       true,
		GraphsAllowLoopbackHTTP: cfg.OutboundAllowPrivate,
		WebhooksAllowPrivate:    cfg.WebhooksAllowPrivate,
		LeaseDuration:           cfg.RunLease,
		MaxRunningPerOrg:        cfg.MaxRunningPerOrg,
		Limits:                  cfg.Limits.Limits,
		RunTimeout:              cfg.Limits.RunTimeout,
		CronLimits:              cfg.Crons.Limits,
		Store:                   cfg.Store.options(),
	})
	closeApps := func() {}
	if apps != nil {
		// The graphs' store is the store API and their tokens agent auth's,
		// reached from the runtimes over loopback.
		bridge, err := pyapp.StartBridge(appStore(svc), appAuth(svc), log)
		if err != nil {
			prov.Close()
			db.Close()
			return nil, err
		}
		apps.Bridge = bridge
		// external_docker apps on this machine (custom_url on loopback) reach it too.
		if ra, ok := svc.Graphs.ExternalApps.(*pyapp.RuntimeApps); ok {
			ra.Bridge = bridge
		}
		closeApps = func() { apps.Close(); bridge.Close() }
	}
	if err := firstStart(ctx, svc.Keys); err != nil {
		prov.Close()
		closeApps()
		db.Close()
		return nil, err
	}
	if err := prov.Resume(ctx); err != nil {
		log.Error("resume provisioning", "error", err.Error())
	}
	stopRunWorkers := svc.Runs.StartWorkers(runs.DefaultWorkers, log)
	stopSweeper := svc.Store.StartSweeper(log)
	stopWorkers := func() { stopRunWorkers(); stopSweeper() }
	stopCrons := startCronScheduler(svc.Crons, cfg.Crons.Tick)
	apiCfg := svc.APIConfig()
	apiCfg.MaxBodyBytes = cfg.MaxBodyBytes
	apiCfg.RateLimit = &auth.Limiter{Rate: cfg.RateLimit, Burst: int(2 * cfg.RateLimit)}
	if len(cfg.CORSOrigins) > 0 {
		apiCfg.CORS = &cors.Policy{Origins: cfg.CORSOrigins}
	}
	apiCfg.Version = version
	apiCfg.StreamHeartbeat = cfg.StreamHeartbeat
	h, err := api.New(apiCfg)
	if err != nil {
		stopCrons()
		stopWorkers()
		prov.Close()
		db.Close()
		return nil, err
	}
	return &app{svc: svc, handler: h, setPublicURL: func(u string) {
		if svc.AgentAuth != nil && svc.AgentAuth.CallbackBase == "" {
			svc.AgentAuth.CallbackBase = u
		}
	}, close: func() {
		stopCrons()
		stopWorkers()
		svc.Webhooks.Wait()
		prov.Close()
		closeApps()
		db.Close()
	}}, nil
}

// appStore and appAuth are the services the LangGraph apps' bridge serves,
// nil (no route) when the server has none.
func appStore(svc *assembly.Services) pyapp.StoreAPI {
	if svc.Store == nil {
		return nil
	}
	return svc.Store
}

func appAuth(svc *assembly.Services) pyapp.Authenticator {
	if svc.AgentAuth == nil {
		return nil
	}
	return svc.AgentAuth
}

// langGraphApps is the host of LangGraph Python apps when the operator
// enabled them (-langgraph-python): the runtime package written out to the
// data directory, the apps kept beside it.
func langGraphApps(cfg config, log *slog.Logger) (*pyapp.Apps, error) {
	if cfg.LangGraphPython == "" {
		return nil, nil
	}
	// Absolute: the runtimes run in their apps' directories.
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "langgraph"))
	if err != nil {
		return nil, err
	}
	rtDir, err := pyruntime.Extract(filepath.Join(dir, "runtime"))
	if err != nil {
		return nil, fmt.Errorf("-langgraph-python: write the runtime: %w", err)
	}
	log.Warn("LangGraph apps enabled: deployments run their repositories' code with this server's permissions", "python", cfg.LangGraphPython)
	return &pyapp.Apps{Python: cfg.LangGraphPython, RuntimeDir: rtDir, Dir: filepath.Join(dir, "apps"),
		FindLinks: cfg.LangGraphFindLinks, NoIndex: cfg.LangGraphNoIndex, Log: log}, nil
}

// firstStart creates organization "default" and prints its first API key,
// once: on later starts the organization exists and nothing is printed.
func firstStart(ctx context.Context, keys *auth.Keys) error {
	org, created, err := keys.EnsureOrganization(ctx, "default")
	if err != nil || !created {
		return err
	}
	key, err := keys.Create(ctx, org.ID)
	if err != nil {
		return err
	}
	fmt.Printf("Created organization \"default\". Its API key is shown only now:\n\n    %s\n\n", key)
	return nil
}

// ensureDataDir creates dir when missing, makes it private and proves that
// it takes a write: a read-only, full or misplaced data directory then stops
// the start with one message naming the directory and the system's reason,
// instead of a driver's "disk I/O error" from deeper down. warn reports a
// directory it narrowed.
func ensureDataDir(dir string, warn func(msg string)) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := privateDataDir(dir, warn); err != nil {
		return err
	}
	defer func() {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("data directory %s is not writable: %w", dir, pe.Err)
		}
	}()
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	// A page, so that a full disk fails here too: an empty file needs no block.
	_, err = f.Write(make([]byte, 4096))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
