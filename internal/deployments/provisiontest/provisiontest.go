package provisiontest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// Factory returns a deployments.Service on an empty store whose Provisioner
// is the one under test, ready to work, and stops it at t's cleanup. The
// Service needs no Sources, Graphs nor Runtimes: the suite's deployments
// have no repository and no runtime to make.
type Factory func(t *testing.T) *deployments.Service

// org is the organization of every deployment of the suite.
const org = "org-provisiontest"

// waitFor bounds every wait for background work: generous, since it only
// decides when a test that is failing anyway gives up.
const waitFor = 3 * time.Minute

// Run checks the Provisioner of the Services that newService makes; each
// subtest calls it once.
func Run(t *testing.T, newService Factory) {
	t.Helper()
	fresh := func(t *testing.T) *deployments.Service {
		t.Helper()
		svc := newService(t)
		if svc == nil || svc.Provisioner == nil {
			t.Fatal("the factory returned no Service, or one without a Provisioner")
		}
		return svc
	}
	t.Run("RevisionIsDeployed", func(t *testing.T) { testDeployed(t, fresh(t)) })
	t.Run("FailingRevisionSettles", func(t *testing.T) { testFailing(t, fresh(t)) })
	t.Run("DeletionFinishes", func(t *testing.T) { testDeletion(t, fresh(t)) })
	t.Run("SameWorkTwiceIsHarmless", func(t *testing.T) { testTwice(t, fresh(t)) })
	t.Run("NewerRevisionSupersedes", func(t *testing.T) { testSupersede(t, fresh(t)) })
	t.Run("RollbackIsCarried", func(t *testing.T) { testRollback(t, fresh(t)) })
	t.Run("ResumeStartsDroppedWork", func(t *testing.T) { testResume(t, fresh(t)) })
}

// A new revision is carried to DEPLOYED, and its deployment becomes READY
// with it active.
func testDeployed(t *testing.T, svc *deployments.Service) {
	d := create(t, svc, "agent", "")
	rev := ready(t, svc, d.ID, *d.LatestRevisionID)
	if rev.StatusMessage != nil && *rev.StatusMessage != "" {
		t.Errorf("deployed revision with status message %q", *rev.StatusMessage)
	}
	if revs := revisions(t, svc, d.ID); len(revs) != 1 {
		t.Errorf("%d revisions, want the one created", len(revs))
	}
}

// A revision that cannot deploy (its runtime does not answer) settles
// DEPLOY_FAILED with the reason; the deployment has no active revision.
func testFailing(t *testing.T, svc *deployments.Service) {
	d := create(t, svc, "unreachable", "https://127.0.0.1:1")
	rev := settled(t, svc, d.ID, *d.LatestRevisionID)
	if rev.Status != deployments.RevDeployFailed || rev.StatusMessage == nil ||
		!strings.Contains(*rev.StatusMessage, "describe call failed") {
		t.Fatalf("revision %s (%s), want DEPLOY_FAILED saying the describe call failed", rev.Status, message(rev))
	}
	got, err := svc.Get(context.Background(), org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status == deployments.StatusReady || got.ActiveRevisionID != nil {
		t.Errorf("deployment %s with active revision %v after its only revision failed", got.Status, deref(got.ActiveRevisionID))
	}
}

// A deletion finishes, whether the deployment was READY or still
// deploying its first revision.
func testDeletion(t *testing.T, svc *deployments.Service) {
	ctx := context.Background()
	settledOne := create(t, svc, "deployed", "")
	ready(t, svc, settledOne.ID, *settledOne.LatestRevisionID)
	early := create(t, svc, "early", "")
	for _, d := range []deployments.Deployment{settledOne, early} {
		if err := svc.Delete(ctx, org, d.ID); err != nil {
			t.Fatalf("Delete %s: %v", d.Name, err)
		}
	}
	for _, d := range []deployments.Deployment{settledOne, early} {
		gone(t, svc, d.ID)
		if _, err := svc.ListRevisions(ctx, org, d.ID, deployments.RevisionQuery{}); fail.KindOf(err) != fail.KindNotFound {
			t.Errorf("%s: revisions after the deletion: %v, want not found", d.Name, err)
		}
	}
}

// Starting the same work again — while it runs, after it settled, for a
// deployment that is gone — changes no outcome, and the provisioner keeps
// working.
func testTwice(t *testing.T, svc *deployments.Service) {
	ctx := context.Background()
	p := svc.Provisioner
	d := create(t, svc, "agent", "")
	rev1 := *d.LatestRevisionID
	p.StartProvision(org, d.ID, rev1)
	p.StartProvision(org, d.ID, rev1)
	ready(t, svc, d.ID, rev1)
	if revs := revisions(t, svc, d.ID); len(revs) != 1 || revs[0].Status != deployments.RevDeployed {
		t.Fatalf("revisions %v, want the one revision, DEPLOYED", statuses(revs))
	}

	// Settled work started again: it stays as it is, and the next
	// revision replaces it as usual.
	p.StartProvision(org, d.ID, rev1)
	p.StartProvision(org, d.ID, rev1)
	rev2 := newRevision(t, svc, d.ID, "registry.example/agent:2")
	ready(t, svc, d.ID, rev2.ID)
	if r := revision(t, svc, d.ID, rev1); r.Status != deployments.RevDeployed {
		t.Errorf("the first revision is %s (%s) after its work was started again, want DEPLOYED", r.Status, message(r))
	}

	// A deletion started three times, then work for what is gone.
	if err := svc.Delete(ctx, org, d.ID); err != nil {
		t.Fatal(err)
	}
	p.StartDelete(org, d.ID)
	p.StartDelete(org, d.ID)
	gone(t, svc, d.ID)
	p.StartDelete(org, d.ID)
	p.StartProvision(org, d.ID, rev2.ID)
	after := create(t, svc, "after", "")
	ready(t, svc, after.ID, *after.LatestRevisionID)
	if _, err := svc.Get(ctx, org, d.ID); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("the deleted deployment after more work was started for it: %v, want not found", err)
	}
}

// A revision created while the previous one is still in progress becomes
// the active one; the previous one is SKIPPED (or DEPLOYED, when it got
// there first) and never active at the end.
func testSupersede(t *testing.T, svc *deployments.Service) {
	d := create(t, svc, "agent", "")
	rev1 := *d.LatestRevisionID
	rev2 := newRevision(t, svc, d.ID, "registry.example/agent:2")
	ready(t, svc, d.ID, rev2.ID)
	first := settled(t, svc, d.ID, rev1)
	switch first.Status {
	case deployments.RevSkipped:
		if !strings.Contains(message(first), rev2.ID) {
			t.Errorf("skipped revision says %q, want it to name revision %s", message(first), rev2.ID)
		}
	case deployments.RevDeployed:
	default:
		t.Errorf("the superseded revision is %s (%s), want SKIPPED or DEPLOYED", first.Status, message(first))
	}
	got, err := svc.Get(context.Background(), org, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != deployments.StatusReady || deref(got.ActiveRevisionID) != rev2.ID {
		t.Errorf("deployment %s, active %s once both revisions settled; want READY with %s", got.Status, deref(got.ActiveRevisionID), rev2.ID)
	}
}

// Redeploying an earlier revision provisions it again: it becomes active
// once more.
func testRollback(t *testing.T, svc *deployments.Service) {
	d := create(t, svc, "agent", "")
	rev1 := *d.LatestRevisionID
	ready(t, svc, d.ID, rev1)
	rev2 := newRevision(t, svc, d.ID, "registry.example/agent:2")
	ready(t, svc, d.ID, rev2.ID)
	if _, err := svc.Redeploy(context.Background(), org, d.ID, rev1); err != nil {
		t.Fatal(err)
	}
	ready(t, svc, d.ID, rev1)
}

// Work left unstarted (as if the process died right after a request was
// acknowledged) is done once Resume hands it to the provisioner.
func testResume(t *testing.T, svc *deployments.Service) {
	p := svc.Provisioner
	svc.Provisioner = nil
	pending := create(t, svc, "pending", "")
	doomed := create(t, svc, "doomed", "")
	if err := svc.Delete(context.Background(), org, doomed.ID); err != nil {
		t.Fatal(err)
	}
	svc.Provisioner = p
	if r := revision(t, svc, pending.ID, *pending.LatestRevisionID); r.Status != deployments.RevCreating {
		t.Fatalf("a revision nothing started is %s, want CREATING", r.Status)
	}
	if err := svc.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	ready(t, svc, pending.ID, *pending.LatestRevisionID)
	gone(t, svc, doomed.ID)
}

func ptr[T any](v T) *T { return &v }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func message(r deployments.Revision) string { return deref(r.StatusMessage) }

// create makes an external_docker deployment of an image, with customURL
// as its runtime when not "".
func create(t *testing.T, svc *deployments.Service, name, customURL string) deployments.Deployment {
	t.Helper()
	sc := &deployments.SourceConfig{}
	if customURL != "" {
		sc.CustomURL = ptr(customURL)
	}
	d, err := svc.Create(context.Background(), org, deployments.CreateInput{
		Name: ptr(name), Source: ptr(deployments.SourceExternalDocker), SourceConfig: sc,
		SourceRevisionConfig: &deployments.SourceRevisionInput{SourceRevisionConfig: deployments.SourceRevisionConfig{
			ImageURI: ptr("registry.example/" + name + ":1")}},
		Secrets: []deployments.SecretInput{{Name: "TOKEN", Value: []byte(`"v-1"`)}},
	})
	if err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
	if d.LatestRevisionID == nil {
		t.Fatalf("Create %s: no revision", name)
	}
	return d
}

func newRevision(t *testing.T, svc *deployments.Service, deploymentID, image string) deployments.Revision {
	t.Helper()
	r, err := svc.CreateRevision(context.Background(), org, deploymentID, deployments.RevisionInput{
		SourceRevisionConfig: &deployments.SourceRevisionInput{SourceRevisionConfig: deployments.SourceRevisionConfig{ImageURI: ptr(image)}}})
	if err != nil {
		t.Fatalf("CreateRevision: %v", err)
	}
	return r
}

func revision(t *testing.T, svc *deployments.Service, deploymentID, revisionID string) deployments.Revision {
	t.Helper()
	r, err := svc.Revision(context.Background(), org, deploymentID, revisionID)
	if err != nil {
		t.Fatalf("revision %s: %v", revisionID, err)
	}
	return r
}

func revisions(t *testing.T, svc *deployments.Service, deploymentID string) []deployments.Revision {
	t.Helper()
	page, err := svc.ListRevisions(context.Background(), org, deploymentID, deployments.RevisionQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return page.Resources
}

func statuses(revs []deployments.Revision) []string {
	var out []string
	for _, r := range revs {
		out = append(out, r.ID+" "+r.Status)
	}
	return out
}

// eventually polls check until it reports done, failing t with check's
// last account of the state after waitFor.
func eventually(t *testing.T, what string, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		done, state := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; %s", what, waitFor, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var settledStatuses = []string{deployments.RevDeployed, deployments.RevSkipped,
	deployments.RevCreateFailed, deployments.RevBuildFailed, deployments.RevDeployFailed}

// settled waits for a revision to leave the unsettled statuses.
func settled(t *testing.T, svc *deployments.Service, deploymentID, revisionID string) deployments.Revision {
	t.Helper()
	var r deployments.Revision
	eventually(t, "revision "+revisionID+" settles", func() (bool, string) {
		var err error
		r, err = svc.Revision(context.Background(), org, deploymentID, revisionID)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(settledStatuses, r.Status), "revision " + r.Status
	})
	return r
}

// ready waits for the deployment to be READY with revisionID active and
// DEPLOYED, and returns the revision.
func ready(t *testing.T, svc *deployments.Service, deploymentID, revisionID string) deployments.Revision {
	t.Helper()
	var r deployments.Revision
	eventually(t, "revision "+revisionID+" active", func() (bool, string) {
		d, err := svc.Get(context.Background(), org, deploymentID)
		if err != nil {
			return false, err.Error()
		}
		r, err = svc.Revision(context.Background(), org, deploymentID, revisionID)
		if err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("deployment %s, active %q; revision %s (%s)", d.Status, deref(d.ActiveRevisionID), r.Status, message(r))
		if slices.Contains(settledStatuses, r.Status) && r.Status != deployments.RevDeployed {
			t.Fatalf("revision %s settled %s (%s), want DEPLOYED", revisionID, r.Status, message(r))
		}
		return d.Status == deployments.StatusReady && deref(d.ActiveRevisionID) == revisionID && r.Status == deployments.RevDeployed, state
	})
	return r
}

// gone waits for a deployment to be deleted.
func gone(t *testing.T, svc *deployments.Service, deploymentID string) {
	t.Helper()
	eventually(t, "deployment "+deploymentID+" deleted", func() (bool, string) {
		d, err := svc.Get(context.Background(), org, deploymentID)
		if fail.KindOf(err) == fail.KindNotFound {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, "deployment " + d.Status
	})
}
