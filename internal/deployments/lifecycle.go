package deployments

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/sources"
	"github.com/stepgraph/stepgraph/internal/store"
)

// errStop ends a lifecycle early without an error: the revision was
// superseded or its deployment is going away.
var errStop = errors.New("lifecycle stopped")

// step is one stage of a revision's lifecycle: the status it enters and the
// work done in it (nil: none). work returns the reason a revision fails in
// this stage ("" when it succeeded).
type step struct {
	status string
	fails  string // status when work reports a reason
	work   func(l *lifecycle, ctx context.Context) (reason string, err error)
}

var (
	hostedSteps = []step{
		{status: RevQueued},
		{status: RevAwaitingBuild},
		{status: RevBuilding, fails: RevBuildFailed, work: (*lifecycle).build},
		{status: RevAwaitingDeploy},
		{status: RevDeploying, fails: RevDeployFailed, work: (*lifecycle).deploy},
	}
	imageSteps = []step{
		{status: RevQueued},
		{status: RevAwaitingDeploy},
		{status: RevDeploying, fails: RevDeployFailed, work: (*lifecycle).deploy},
	}
)

// lifecycle is one run of Provision for one revision.
type lifecycle struct {
	s   *Service
	rev store.Revision
	doc revisionDoc
}

// Provision carries a revision from where it is to DEPLOYED, a *_FAILED
// status with the reason, or SKIPPED when a newer target superseded it. It is
// safe to call again for the same revision (after a restart, say): a settled
// revision is left alone and an unsettled one resumes at its current stage.
// A *PendingError means the revision waits for work done elsewhere (its
// app's build, builds.go): provision it again after its After. Any other
// error means the work could not be done now (the revision stays
// unsettled and can be provisioned again), not that the revision failed.
func (s *Service) Provision(ctx context.Context, orgID, deploymentID, revisionID string) error {
	rev, err := s.Store.Revision(ctx, orgID, deploymentID, revisionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || !slices.Contains(unsettled, rev.Status) {
		return err
	}
	doc, err := decodeDoc[revisionDoc](rev.Doc)
	if err != nil {
		return err
	}
	l := &lifecycle{s: s, rev: rev, doc: doc}
	steps := imageSteps
	if doc.Source == SourceHostedRepo {
		steps = hostedSteps
	}
	current := slices.Index(unsettled, rev.Status)
	for _, st := range steps {
		if slices.Index(unsettled, st.status) < current {
			continue // done before a restart
		}
		l.logf(phaseOf(st.status), levelInfo, "%s", st.status)
		if err := l.enter(ctx, st.status, ""); err != nil {
			return stopped(err)
		}
		if st.work == nil {
			continue
		}
		reason, err := st.work(l, ctx)
		var pending *PendingError
		if errors.As(err, &pending) {
			// Kept (the build's id) for when it is provisioned again.
			if _, serr := l.s.setRevisionStatusDoc(ctx, l.rev, st.status, "", &l.doc); serr != nil {
				return serr
			}
			return err
		}
		if err != nil {
			return stopped(err)
		}
		if reason != "" {
			l.logf(phaseOf(st.status), levelError, "%s: %s", st.fails, reason)
			return stopped(l.enter(ctx, st.fails, reason))
		}
	}
	// Published first, so that its graphs' assistants exist when it is
	// active: a failure leaves it DEPLOYING, and provisioning it again
	// publishes again.
	if err := l.publish(ctx); err != nil {
		return err
	}
	if err := l.activate(ctx); err != nil {
		return stopped(err)
	}
	// Active now: DEPLOYED is true even if a newer target arrived meanwhile
	// (that one will replace it), so no target check here.
	l.logf(phaseDeploy, levelInfo, "%s: the revision serves its graphs", RevDeployed)
	_, err = l.s.setRevisionStatusDoc(ctx, l.rev, RevDeployed, "", &l.doc)
	return err
}

func stopped(err error) error {
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// target reads the deployment and stops the lifecycle when the revision is
// no longer what the deployment is moving to.
func (l *lifecycle) target(ctx context.Context) (store.Deployment, deploymentDoc, error) {
	d, doc, err := l.s.load(ctx, l.rev.OrgID, l.rev.DeploymentID)
	if err != nil {
		if isNotFound(err) {
			return d, doc, errStop
		}
		return d, doc, err
	}
	if d.Status == StatusAwaitingDelete {
		return d, doc, errStop
	}
	if doc.Target != l.rev.ID {
		if _, err := l.s.setRevisionStatus(ctx, l.rev, RevSkipped, supersededBy(doc.Target)); err != nil {
			return d, doc, err
		}
		return d, doc, errStop
	}
	return d, doc, nil
}

func supersededBy(id string) string {
	return fmt.Sprintf("superseded by revision %s before it was deployed", id)
}

// enter moves the revision to status, first checking it is still the target
// (a failure is recorded even when it is not: the reason is still true).
func (l *lifecycle) enter(ctx context.Context, status, reason string) error {
	if reason == "" {
		if _, _, err := l.target(ctx); err != nil {
			return err
		}
	}
	rev, err := l.s.setRevisionStatusDoc(ctx, l.rev, status, reason, &l.doc)
	if err != nil {
		return err
	}
	l.rev = rev
	return nil
}

// build resolves the hosted repository's ref, checks the graph config and
// keeps the files it names. A revision built once keeps its files and
// commit (a redeploy serves them again, whatever the ref points at now).
func (l *lifecycle) build(ctx context.Context) (string, error) {
	_, dd, err := l.target(ctx)
	if err != nil {
		return "", err
	}
	if l.doc.Graphs != nil {
		return l.awaitAppBuild(ctx)
	}
	if l.s.Sources == nil {
		return "no source checker is configured on this server", nil
	}
	rc := l.doc.SourceRevisionConfig
	var snap *graphSnapshot
	reason := ""
	l.logf(phaseBuild, levelInfo, "fetching %s at %s", deref(dd.SourceConfig.RepoURL), deref(rc.RepoRef))
	out, err := l.s.Sources.CheckFiles(ctx, deref(dd.SourceConfig.RepoURL), deref(rc.RepoRef), deref(rc.GraphConfigPath),
		func(fsys fs.FS) error {
			config, _ := fs.ReadFile(fsys, path.Clean(deref(rc.GraphConfigPath)))
			if kind := appKind(config); kind != "" {
				var err error
				snap, reason, err = l.stageApp(ctx, fsys, deref(rc.GraphConfigPath), config, kind)
				return err
			}
			snap, reason = snapshotRepo(fsys, deref(rc.GraphConfigPath))
			return nil
		})
	var se *sources.Error
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.As(err, &se):
		return se.Reason, nil
	case err != nil:
		return "", err
	case reason != "":
		return reason, nil
	}
	sha := out.CommitSHA
	l.doc.SourceRevisionConfig.RepoCommitSHA = &sha
	l.doc.Graphs = snap
	l.logf(phaseBuild, levelInfo, "commit %s: graph config %s checked", sha, deref(rc.GraphConfigPath))
	return l.awaitAppBuild(ctx)
}

// deploy makes the revision's graphs ready to serve: an external_docker
// deployment's runtime (custom_url, or else the runtime made from its
// image_uri when the server can make one) describes them, then the
// documents and the organization's rules are checked (graphs.go).
func (l *lifecycle) deploy(ctx context.Context) (string, error) {
	d, dd, err := l.target(ctx)
	if err != nil {
		return "", err
	}
	if l.doc.Graphs == nil && l.doc.Source == SourceExternalDocker {
		url := deref(dd.SourceConfig.CustomURL)
		label := "source_config.custom_url " + url
		if url == "" && l.s.Runtimes != nil && deref(l.doc.SourceRevisionConfig.ImageURI) != "" {
			var reason string
			if url, reason, err = l.provisionRuntime(ctx, d.ID); err != nil || reason != "" {
				return reason, err
			}
			label = "source_revision_config.image_uri: the runtime made from the image (" + url + ")"
		}
		if url != "" {
			l.logf(phaseDeploy, levelInfo, "describing the graphs of %s", label)
			snap, reason := l.s.describe(ctx, label, url)
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			if reason != "" {
				return reason, nil
			}
			l.doc.Graphs = snap
		}
	}
	if l.doc.Graphs == nil {
		l.logf(phaseDeploy, levelInfo, "no runtime to describe the image's graphs: nothing to serve here")
		return "", nil // an image without a runtime URL: nothing to serve here
	}
	if l.doc.Graphs.App {
		return l.deployApp(ctx, d, dd)
	}
	l.logf(phaseDeploy, levelInfo, "checking the graph documents")
	return l.checkGraphs(ctx, d, dd)
}

// activate points the deployment at the revision and makes it READY.
func (l *lifecycle) activate(ctx context.Context) error {
	if _, _, err := l.target(ctx); err != nil {
		return err
	}
	superseded := ""
	_, err := l.s.modify(ctx, l.rev.OrgID, l.rev.DeploymentID, func(d *store.Deployment, doc *deploymentDoc) (bool, error) {
		superseded = ""
		if d.Status == StatusAwaitingDelete {
			return false, errStop
		}
		if doc.Target != l.rev.ID {
			// A newer target arrived after the check above: this revision
			// will never deploy, so it must not stay unsettled.
			superseded = doc.Target
			return false, errStop
		}
		d.ActiveRevisionID, d.Status = l.rev.ID, StatusReady
		doc.Served = nil
		if l.doc.Graphs != nil {
			doc.Served = l.doc.Graphs.Graphs
		}
		if d.LatestRevisionID == l.rev.ID {
			doc.SourceRevisionConfig.RepoCommitSHA = l.doc.SourceRevisionConfig.RepoCommitSHA
		}
		return true, nil
	})
	if isNotFound(err) {
		return errStop
	}
	if superseded != "" {
		if _, serr := l.s.setRevisionStatus(ctx, l.rev, RevSkipped, supersededBy(superseded)); serr != nil {
			return serr
		}
	}
	return err
}

// publish tells the GraphPublisher that the revision is about to be active.
func (l *lifecycle) publish(ctx context.Context) error {
	if l.s.Graphs == nil || l.doc.Graphs == nil {
		return nil
	}
	d, dd, err := l.s.load(ctx, l.rev.OrgID, l.rev.DeploymentID)
	switch {
	case isNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		return err
	}
	return l.s.Graphs.Publish(ctx, l.revisionGraphs(d, dd))
}

// setRevisionStatus records a revision's status and reason under optimistic
// concurrency, re-reading once per lost race.
func (s *Service) setRevisionStatus(ctx context.Context, rev store.Revision, status, reason string) (store.Revision, error) {
	return s.setRevisionStatusDoc(ctx, rev, status, reason, nil)
}

func (s *Service) setRevisionStatusDoc(ctx context.Context, rev store.Revision, status, reason string, doc *revisionDoc) (store.Revision, error) {
	for attempt := 1; ; attempt++ {
		rev.Status, rev.StatusReason, rev.UpdatedAt = status, reason, s.now()
		if doc != nil {
			rev.Doc = mustJSON(*doc)
		}
		stored, err := s.Store.UpdateRevision(ctx, rev)
		if !errors.Is(err, store.ErrStale) || attempt == maxWriteAttempts {
			return stored, err
		}
		if rev, err = s.Store.Revision(ctx, rev.OrgID, rev.DeploymentID, rev.ID); err != nil {
			return rev, err
		}
	}
}

// FinishDelete removes a deployment marked AWAITING_DELETE: the runtime made
// for it, every secret value of every revision, then the records. Safe to
// repeat.
func (s *Service) FinishDelete(ctx context.Context, orgID, deploymentID string) error {
	d, doc, err := s.load(ctx, orgID, deploymentID)
	if isNotFound(err) {
		return nil
	}
	if err != nil || d.Status != StatusAwaitingDelete {
		return err
	}
	refs := map[string]bool{}
	for _, sec := range doc.Secrets {
		refs[sec.Ref] = true
	}
	for offset := 0; ; {
		revs, err := s.Store.ListRevisions(ctx, orgID, deploymentID, store.RevisionFilter{Limit: 100, Offset: offset})
		if err != nil {
			return s.missing(err, deploymentID)
		}
		for _, r := range revs {
			rd, err := decodeDoc[revisionDoc](r.Doc)
			if err != nil {
				return err
			}
			for _, sec := range rd.Secrets {
				refs[sec.Ref] = true
			}
		}
		if len(revs) < 100 {
			break
		}
		offset += len(revs)
	}
	if s.Runtimes != nil {
		if err := s.Runtimes.DeleteRuntime(ctx, deploymentID); err != nil {
			return fmt.Errorf("delete the runtime of deployment %s: %w", deploymentID, err)
		}
	}
	if s.Builder != nil {
		if err := s.Builder.RemoveBuilds(ctx, deploymentID); err != nil {
			return fmt.Errorf("remove the app builds of deployment %s: %w", deploymentID, err)
		}
	}
	if s.Apps != nil {
		if err := s.Apps.Remove(ctx, deploymentID); err != nil {
			return fmt.Errorf("remove the LangGraph app of deployment %s: %w", deploymentID, err)
		}
	}
	for ref := range refs {
		if err := s.Secrets.Delete(ctx, ref); err != nil {
			return fmt.Errorf("delete a secret of deployment %s: %w", deploymentID, err)
		}
	}
	if err := s.Store.DeleteDeployment(ctx, orgID, deploymentID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// Resume hands the provisioner every unfinished piece of work: unsettled
// revisions and deployments awaiting deletion (after a restart).
func (s *Service) Resume(ctx context.Context) error { return s.ResumeIdle(ctx, 0) }

// ResumeIdle is Resume for the work untouched for at least idle: what a
// provisioner dropped (its start was lost) rather than what it is doing. It
// is what the AWS stack runs periodically, as no process restarts there.
func (s *Service) ResumeIdle(ctx context.Context, idle time.Duration) error {
	if s.Provisioner == nil {
		return nil
	}
	cutoff := s.now().Add(-idle)
	busy := func(updated time.Time) bool { return idle > 0 && updated.After(cutoff) }
	revs, err := s.Store.UnsettledRevisions(ctx, unsettled)
	if err != nil {
		return err
	}
	for _, r := range revs {
		if !busy(r.UpdatedAt) {
			s.Provisioner.StartProvision(r.OrgID, r.DeploymentID, r.ID)
		}
	}
	deps, err := s.Store.DeploymentsInStatus(ctx, StatusAwaitingDelete)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if !busy(d.UpdatedAt) {
			s.Provisioner.StartDelete(d.OrgID, d.ID)
		}
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func isNotFound(err error) bool { return err != nil && fail.KindOf(err) == fail.KindNotFound }
