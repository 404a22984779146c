package local_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/deployments/provisiontest"
	"github.com/stepgraph/stepgraph/internal/dispatch/local"
	secretslocal "github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

var _ deployments.Provisioner = (*local.Provisioner)(nil)

func ptr[T any](v T) *T { return &v }

// The local Provisioner honours the provisioner contract, on a SQLite
// store and local secrets.
func TestProvisionerContract(t *testing.T) {
	provisiontest.Run(t, func(t *testing.T) *deployments.Service {
		dir := t.TempDir()
		db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		sec, err := secretslocal.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		svc := &deployments.Service{Store: db, Secrets: sec}
		prov := local.NewProvisioner(svc, slog.New(slog.DiscardHandler))
		t.Cleanup(func() { prov.Close() })
		svc.Provisioner = prov
		return svc
	})
}

// Work recorded before a restart (a revision left CREATING, a deployment left
// AWAITING_DELETE) is finished by Resume on the next start.
func TestResumeFinishesUnsettledWork(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sec, err := secretslocal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// No provisioner: as if the process died right after acknowledging.
	svc := &deployments.Service{Store: db, Secrets: sec, AllowHTTPLoopback: true}
	create := func(name string) deployments.Deployment {
		d, err := svc.Create(ctx, "org-1", deployments.CreateInput{
			Name: ptr(name), Source: ptr("external_docker"),
			SourceConfig:         &deployments.SourceConfig{},
			SourceRevisionConfig: &deployments.SourceRevisionInput{SourceRevisionConfig: deployments.SourceRevisionConfig{ImageURI: ptr("ghcr.io/acme/agent:1")}},
			Secrets:              []deployments.SecretInput{{Name: "TOKEN", Value: []byte(`"v-1"`)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	kept, doomed := create("kept"), create("doomed")
	if err := svc.Delete(ctx, "org-1", doomed.ID); err != nil {
		t.Fatal(err)
	}

	prov := local.NewProvisioner(svc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	svc.Provisioner = prov
	defer prov.Close()
	if err := prov.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := svc.Get(ctx, "org-1", kept.ID)
		_, goneErr := svc.Get(ctx, "org-1", doomed.ID)
		var rev deployments.Revision
		var revErr error
		if err == nil && d.Status == deployments.StatusReady && goneErr != nil {
			// The deployment is READY once the revision is active; the
			// revision is DEPLOYED right after.
			rev, revErr = svc.Revision(ctx, "org-1", kept.ID, *d.ActiveRevisionID)
			if revErr == nil && rev.Status == deployments.RevDeployed {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not resumed: kept %+v (%v), active revision %+v (%v), doomed still there: %v", d, err, rev, revErr, goneErr == nil)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
