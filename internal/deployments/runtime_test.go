package deployments_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

const functionARN = "arn:aws:lambda:us-east-1:123456789012:function:agent-runtime"

func newService(t *testing.T) *deployments.Service {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &deployments.Service{Store: db, Secrets: sec}
}

func createInput(t *testing.T, body string) deployments.CreateInput {
	t.Helper()
	var in deployments.CreateInput
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// custom_url names the runtime by an https URL or by a Lambda function's
// ARN; a malformed ARN is a 422 that says what an ARN must be.
func TestCustomURLLambdaARN(t *testing.T) {
	svc := newService(t)
	ctx := context.Background()
	for i, arn := range []string{functionARN, functionARN + ":live", "arn:aws-cn:lambda:cn-north-1:123456789012:function:f:3"} {
		in := createInput(t, `{"name": "d`+string(rune('a'+i))+`", "source": "external_docker",
			"source_config": {"custom_url": "`+arn+`"}, "source_revision_config": {"image_uri": "example/agent:1"}}`)
		if _, err := svc.Create(ctx, "org", in); err != nil {
			t.Errorf("custom_url %s: %v", arn, err)
		}
	}
	for _, bad := range []string{"arn:aws:lambda:us-east-1:123456789012:layer:x", "arn:aws:lambda:us-east-1:1234:function:f",
		"arn:aws:states:us-east-1:123456789012:stateMachine:x", "arn:aws:lambda:us-east-1:123456789012:function:f:a:b"} {
		in := createInput(t, `{"name": "bad", "source": "external_docker",
			"source_config": {"custom_url": "`+bad+`"}, "source_revision_config": {"image_uri": "example/agent:1"}}`)
		_, err := svc.Create(ctx, "org", in)
		if fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "source_config.custom_url") ||
			!strings.Contains(err.Error(), "must be a Lambda function ARN: arn:<partition>:lambda:<region>:<12-digit account>:function:<name>") {
			t.Errorf("custom_url %s: %v, want a 422 naming the field and the ARN rule", bad, err)
		}
	}
	// An http(s) URL keeps weburl's rule.
	in := createInput(t, `{"name": "http", "source": "external_docker",
		"source_config": {"custom_url": "ftp://runtime.example.com"}, "source_revision_config": {"image_uri": "example/agent:1"}}`)
	if _, err := svc.Create(ctx, "org", in); fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "must use https") {
		t.Errorf("an ftp custom_url: %v", err)
	}
}

// fakeRuntimes is a RuntimeProvisioner answering with url or err.
type fakeRuntimes struct {
	url       string
	err       error
	calls     []string
	deleted   []string
	deleteErr error
}

func (f *fakeRuntimes) DeleteRuntime(_ context.Context, deploymentID string) error {
	f.deleted = append(f.deleted, deploymentID)
	return f.deleteErr
}

func (f *fakeRuntimes) Reserved(url string) bool { return strings.Contains(url, ":function:rt-") }

func (f *fakeRuntimes) EnsureRuntime(_ context.Context, deploymentID, imageURI string) (string, error) {
	f.calls = append(f.calls, deploymentID+" "+imageURI)
	return f.url, f.err
}

// fakePublisher describes every runtime with one graph and records the
// runtime URLs it was asked about.
type fakePublisher struct {
	described []string
	checked   []string
}

func (f *fakePublisher) DescribeRuntime(_ context.Context, url string, _ int64) ([]byte, error) {
	f.described = append(f.described, url)
	return []byte(`{"graphs": {"g": {"state": {"n": {}}, "nodes": {"fn": {"kind": "function"}}, "edges": [{"from": "__start__", "to": "fn"}]}}}`), nil
}

func (f *fakePublisher) Check(_ context.Context, g deployments.RevisionGraphs) (string, error) {
	f.checked = append(f.checked, g.RuntimeURL)
	return "", nil
}

func (f *fakePublisher) Publish(context.Context, deployments.RevisionGraphs) error { return nil }

// An external_docker revision without a custom_url gets the runtime made
// from its image where the server makes runtimes: its secrets travel with
// each call (not in the runtime), the runtime describes the graphs, and it is the
// revision's runtime from then on. A refusal fails the revision with the
// reason; a passing error leaves it to be provisioned again.
func TestImageRuntime(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	pub := &fakePublisher{}
	rts := &fakeRuntimes{err: &deployments.RuntimeRefusedError{Reason: "STEPGRAPH_RUNTIME_ROLE_ARN is not set"}}
	svc.Graphs, svc.Runtimes = pub, rts
	provision := func(name, sourceConfig string) (deployments.Deployment, deployments.Revision, error) {
		t.Helper()
		d, err := svc.Create(ctx, name, createInput(t, `{"name": "`+name+`", "source": "external_docker",
			"source_config": `+sourceConfig+`, "source_revision_config": {"image_uri": "example/agent:1"},
			"secrets": [{"name": "TOKEN", "value": "t-1"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		perr := svc.Provision(ctx, name, d.ID, *d.LatestRevisionID)
		rev, err := svc.Revision(ctx, name, d.ID, *d.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		return d, rev, perr
	}
	status := func(r deployments.Revision) string {
		if r.StatusMessage == nil {
			return r.Status
		}
		return r.Status + ": " + *r.StatusMessage
	}

	_, rev, err := provision("refused", `{}`)
	if err != nil || status(rev) != "DEPLOY_FAILED: source_revision_config.image_uri: the deployment's runtime cannot be made from the image: STEPGRAPH_RUNTIME_ROLE_ARN is not set" {
		t.Fatalf("refused: %s, %v", status(rev), err)
	}
	if len(pub.described) != 0 {
		t.Errorf("described %v after a refusal", pub.described)
	}

	passing := errors.New("throttled")
	rts.err = passing
	d, rev, err := provision("passing", `{}`)
	if !errors.Is(err, passing) || rev.Status != deployments.RevDeploying {
		t.Fatalf("passing error: %s, %v, want the error and the revision still DEPLOYING", status(rev), err)
	}
	rts.err, rts.url = nil, functionARN+":4"
	if err := svc.Provision(ctx, "passing", d.ID, *d.LatestRevisionID); err != nil {
		t.Fatal(err)
	}
	if rev, _ = svc.Revision(ctx, "passing", d.ID, *d.LatestRevisionID); rev.Status != deployments.RevDeployed {
		t.Fatalf("provisioned again: %s", status(rev))
	}
	if strings.Join(pub.described, ",") != functionARN+":4" || pub.checked[len(pub.checked)-1] != functionARN+":4" {
		t.Errorf("described %v, checked %v, want the runtime made from the image", pub.described, pub.checked)
	}
	// The runtime holds no secret: each call carries them.
	rg, err := svc.RevisionGraphs(ctx, "passing", d.ID, rev.ID)
	if err != nil || rg.RuntimeURL != functionARN+":4" || !rg.RuntimeSecrets || rg.SecretRefs["TOKEN"] == "" {
		t.Fatalf("RevisionGraphs: runtime %q, secrets per call %v (%v), %v", rg.RuntimeURL, rg.RuntimeSecrets, rg.SecretRefs, err)
	}
	// custom_url, PATCHed in, takes the made runtime's place.
	var up deployments.UpdateInput
	_ = json.Unmarshal([]byte(`{"source_config": {"custom_url": "https://runtime.example.com"}}`), &up)
	if _, err := svc.Update(ctx, "passing", d.ID, up); err != nil {
		t.Fatal(err)
	}
	if rg, _ := svc.RevisionGraphs(ctx, "passing", d.ID, rev.ID); rg.RuntimeURL != "https://runtime.example.com" || rg.RuntimeSecrets {
		t.Errorf("runtime after a custom_url: %q, secrets per call %v (a runtime of the deployment's own gets none)", rg.RuntimeURL, rg.RuntimeSecrets)
	}

	// A custom_url may not name a runtime the platform makes (another
	// deployment's), neither on create nor on update.
	taken := "arn:aws:lambda:us-east-1:123456789012:function:rt-0a1b2c:3"
	_, err = svc.Create(ctx, "taken", createInput(t, `{"name": "taken", "source": "external_docker",
		"source_config": {"custom_url": "`+taken+`"}, "source_revision_config": {"image_uri": "example/agent:1"}}`))
	if fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "source_config.custom_url: names a runtime function the platform makes") {
		t.Errorf("create with another deployment's runtime: %v", err)
	}
	_ = json.Unmarshal([]byte(`{"source_config": {"custom_url": "`+taken+`"}}`), &up)
	if _, err := svc.Update(ctx, "passing", d.ID, up); fail.KindOf(err) != fail.KindInvalid {
		t.Errorf("update to another deployment's runtime: %v", err)
	}

	// A deployment with a custom_url makes no runtime.
	calls := len(rts.calls)
	if _, rev, err := provision("custom", `{"custom_url": "`+functionARN+`"}`); err != nil || rev.Status != deployments.RevDeployed {
		t.Fatalf("custom_url: %s, %v", status(rev), err)
	}
	if len(rts.calls) != calls || pub.described[len(pub.described)-1] != functionARN {
		t.Errorf("with a custom_url: runtime calls %v, described %v", rts.calls, pub.described)
	}

	// Without a provisioner (the local server), an image alone has no
	// runtime and no graphs: deployed as before.
	svc.Runtimes = nil
	if _, rev, err := provision("local", `{}`); err != nil || rev.Status != deployments.RevDeployed {
		t.Fatalf("no provisioner: %s, %v", status(rev), err)
	}
}

// Deleting a deployment deletes the runtime made for it; while that fails,
// the deployment stays (awaiting delete) so the next attempt finishes it.
func TestDeleteRemovesRuntime(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	rts := &fakeRuntimes{url: functionARN + ":1"}
	svc.Graphs, svc.Runtimes = &fakePublisher{}, rts
	d, err := svc.Create(ctx, "org", createInput(t, `{"name": "gone", "source": "external_docker",
		"source_config": {}, "source_revision_config": {"image_uri": "example/agent:1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Provision(ctx, "org", d.ID, *d.LatestRevisionID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, "org", d.ID); err != nil {
		t.Fatal(err)
	}
	rts.deleteErr = errors.New("throttled")
	if err := svc.FinishDelete(ctx, "org", d.ID); !errors.Is(err, rts.deleteErr) {
		t.Fatalf("FinishDelete with a failing runtime delete: %v", err)
	}
	if got, err := svc.Get(ctx, "org", d.ID); err != nil || got.Status != deployments.StatusAwaitingDelete {
		t.Fatalf("after a failed runtime delete: %+v, %v; want the deployment still awaiting delete", got, err)
	}
	rts.deleteErr = nil
	if err := svc.FinishDelete(ctx, "org", d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, "org", d.ID); fail.KindOf(err) != fail.KindNotFound {
		t.Errorf("after FinishDelete: %v, want not found", err)
	}
	if strings.Join(rts.deleted, ",") != d.ID+","+d.ID {
		t.Errorf("runtimes deleted: %v, want %s (twice: the failed attempt and the one that finished)", rts.deleted, d.ID)
	}
}

// recordingProvisioner records what it is asked to start.
type recordingProvisioner struct{ started []string }

func (p *recordingProvisioner) StartProvision(_, deploymentID, revisionID string) {
	p.started = append(p.started, "provision "+revisionID)
}

func (p *recordingProvisioner) StartDelete(_, deploymentID string) {
	p.started = append(p.started, "delete "+deploymentID)
}

// ResumeIdle restarts only the work nobody touched for the given time;
// Resume restarts all of it.
func TestResumeIdle(t *testing.T) {
	ctx := context.Background()
	svc := newService(t)
	prov := &recordingProvisioner{}
	svc.Provisioner = prov
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	svc.Now = func() time.Time { return now }
	create := func(name string) deployments.Deployment {
		t.Helper()
		d, err := svc.Create(ctx, "org", createInput(t, `{"name": "`+name+`", "source": "external_docker",
			"source_config": {"custom_url": "https://runtime.example.com"}, "source_revision_config": {"image_uri": "example/agent:1"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	old, gone := create("old"), create("gone")
	if err := svc.Delete(ctx, "org", gone.ID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	fresh := create("fresh")

	prov.started = nil
	if err := svc.ResumeIdle(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	want := []string{"provision " + *old.LatestRevisionID, "provision " + *gone.LatestRevisionID, "delete " + gone.ID}
	got := slices.Sorted(slices.Values(prov.started))
	if slices.Sort(want); !slices.Equal(got, want) {
		t.Errorf("ResumeIdle(2m) started %v, want %v (not the fresh revision)", got, want)
	}
	prov.started = nil
	if err := svc.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"provision " + *old.LatestRevisionID, "provision " + *fresh.LatestRevisionID, "delete " + gone.ID} {
		if !slices.Contains(prov.started, w) {
			t.Errorf("Resume started %v, missing %s", prov.started, w)
		}
	}
}
