package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/deployments"
	localdispatch "github.com/stepgraph/stepgraph/internal/dispatch/local"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/sources/git"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/weburl"
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
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return reqCtx }}
	log.Info("listening", "addr", ln.Addr().String(), "data_dir", cfg.DataDir, "version", version)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

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

// app is the wired local server.
type app struct {
	handler http.Handler
	close   func()
}

func openApp(ctx context.Context, cfg config, log *slog.Logger) (*app, error) {
	if err := ensureDataDir(cfg.DataDir); err != nil {
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
	// client; its requests are bounded by the nodes' own timeouts.
	var prov *localdispatch.Provisioner
	svc := assembly.Assemble(assembly.Adapters{
		Store:    db,
		Events:   db,
		Secrets:  sec,
		Sources:  &git.Checker{AllowFile: true},
		Outbound: weburl.GuardedClient(cfg.OutboundAllowPrivate, 0),
		Provisioner: func(l *deployments.Service) deployments.Provisioner {
			prov = localdispatch.NewProvisioner(l, log)
			return prov
		},
	}, assembly.Options{
		Log:                     log,
		AllowHTTPLoopback:       true,
		GraphsAllowLoopbackHTTP: cfg.OutboundAllowPrivate,
		WebhooksAllowPrivate:    cfg.WebhooksAllowPrivate,
		LeaseDuration:           cfg.RunLease,
	})
	if err := firstStart(ctx, svc.Keys); err != nil {
		prov.Close()
		db.Close()
		return nil, err
	}
	if err := prov.Resume(ctx); err != nil {
		log.Error("resume provisioning", "error", err.Error())
	}
	stopWorkers := svc.Runs.StartWorkers(runs.DefaultWorkers, log)
	apiCfg := svc.APIConfig()
	apiCfg.MaxBodyBytes = cfg.MaxBodyBytes
	apiCfg.RateLimit = &auth.Limiter{Rate: cfg.RateLimit, Burst: int(2 * cfg.RateLimit)}
	apiCfg.Version = version
	apiCfg.StreamHeartbeat = cfg.StreamHeartbeat
	h, err := api.New(apiCfg)
	if err != nil {
		stopWorkers()
		prov.Close()
		db.Close()
		return nil, err
	}
	return &app{handler: h, close: func() {
		stopWorkers()
		svc.Webhooks.Wait()
		prov.Close()
		db.Close()
	}}, nil
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

// ensureDataDir creates dir when missing and proves that it takes a write:
// a read-only, full or misplaced data directory then stops the start with
// one message naming the directory and the system's reason, instead of a
// driver's "disk I/O error" from deeper down.
func ensureDataDir(dir string) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
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
