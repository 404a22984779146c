package deployments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/sources"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// maxWriteAttempts bounds read-modify-write retries after store.ErrStale
// (a concurrent request or the provisioner changed the deployment).
const maxWriteAttempts = 8

// Provisioner carries a revision through its lifecycle and finishes
// deletions, in the background. Implementations call back into
// Service.Provision and Service.FinishDelete, which hold the rules; the
// provisioner decides only where and when the work runs.
type Provisioner interface {
	StartProvision(orgID, deploymentID, revisionID string)
	StartDelete(orgID, deploymentID string)
}

// Service runs the deployment use cases.
type Service struct {
	Store   store.Deployments
	Secrets secrets.Store
	// Provisioner runs lifecycles; nil leaves new revisions CREATING.
	Provisioner Provisioner
	// Sources checks hosted repositories while building.
	Sources sources.Checker
	// HTTPClient calls an external_docker deployment's runtime (describe)
	// while deploying when there is no GraphPublisher (Graphs makes the
	// call otherwise, over the transport it calls the runtime with). Pass
	// the platform's guarded client (weburl.GuardedClient); when nil, a
	// guarded client that refuses private and loopback addresses.
	HTTPClient *http.Client
	// Graphs serves deployed revisions' graphs (internal/deployedgraphs):
	// it checks them while deploying and publishes them on activation. Nil:
	// revisions keep their graphs, checked against the documents' rules
	// only, and nothing serves them.
	Graphs GraphPublisher
	// Runtimes makes the runtime of an external_docker deployment with an
	// image_uri and no custom_url, while deploying (on AWS: a Lambda
	// function). Nil: such a revision has no runtime, so no graphs.
	Runtimes RuntimeProvisioner
	// Apps builds and runs LangGraph Python apps (apps.go); nil: a revision
	// that is one fails, saying the server does not run them.
	Apps AppHost
	// Builder builds LangGraph apps' zips elsewhere (builds.go; on AWS,
	// CodeBuild), made into functions by Runtimes; it serves where there
	// is no Apps. BuildPoll is how often a running build is checked
	// (DefaultBuildPoll).
	Builder   AppBuilder
	BuildPoll time.Duration
	// AllowHTTPLoopback accepts a plain-http custom_url on a loopback
	// address (a runtime on the developer's machine); otherwise custom_url
	// must be https. The local server allows it, the AWS functions do not.
	AllowHTTPLoopback bool
	Now               func() time.Time // time.Now when nil
}

func (s *Service) outbound() *http.Client {
	if s.HTTPClient != nil {
		return s.HTTPClient
	}
	return weburl.GuardedClient(false, 0)
}

func (s *Service) now() time.Time {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().UTC().Truncate(time.Microsecond)
}

// Create validates a new deployment, stores its secret values, then the
// deployment with its first revision, and starts provisioning.
func (s *Service) Create(ctx context.Context, orgID string, in CreateInput) (Deployment, error) {
	var c fail.Checks
	checkReadOnly(&c, in.readOnly, in.SourceRevisionConfig)
	c.Add(in.Name == nil, "name", "is required")
	c.Add(in.Source == nil, "source", "is required")
	c.Add(in.SourceConfig == nil, "source_config", "is required")
	c.Add(in.SourceRevisionConfig == nil, "source_revision_config", "is required")
	if err := c.Err(); err != nil {
		return Deployment{}, err
	}
	name, source := *in.Name, normalizeSource(*in.Source)
	sc, rc := *in.SourceConfig, in.SourceRevisionConfig.normalized()
	checkName(&c, name)
	checkConfig(&c, source, sc, rc, s.AllowHTTPLoopback, s.Sources)
	s.checkReservedRuntime(&c, sc.CustomURL)
	values := secretValues(&c, in.Secrets, false)
	if err := c.Err(); err != nil {
		return Deployment{}, err
	}

	now := s.now()
	depID, revID := uuid.NewString(), uuid.NewString()
	created, err := s.storeSecrets(ctx, depID, values)
	if err != nil {
		return Deployment{}, err
	}
	var list []storedSecret
	for _, v := range values {
		list = append(list, storedSecret{Name: v.name, Ref: created[v.name]})
	}
	doc := deploymentDoc{Source: source, SourceConfig: sc, SourceRevisionConfig: rc, Secrets: list, Target: revID}
	d := store.Deployment{ID: depID, OrgID: orgID, Name: name, Status: StatusAwaitingDatabase,
		LatestRevisionID: revID, Doc: mustJSON(doc), Version: 1, CreatedAt: now, UpdatedAt: now}
	r := newRevision(revID, d, doc, now)
	if err := s.Store.CreateDeployment(ctx, d, r); err != nil {
		s.forgetSecrets(ctx, created)
		if errors.Is(err, store.ErrConflict) {
			return Deployment{}, fail.Conflict("name: a deployment named %q already exists in this organization", name)
		}
		return Deployment{}, err
	}
	s.startProvision(orgID, depID, revID)
	return view(d, doc), nil
}

// Get returns one deployment.
func (s *Service) Get(ctx context.Context, orgID, id string) (Deployment, error) {
	d, doc, err := s.load(ctx, orgID, id)
	if err != nil {
		return Deployment{}, err
	}
	return view(d, doc), nil
}

// List returns a page of the organization's deployments, newest first.
func (s *Service) List(ctx context.Context, orgID string, q ListQuery) (Page[Deployment], error) {
	recs, err := s.Store.ListDeployments(ctx, orgID, store.DeploymentFilter{
		NameContains: q.NameContains, Name: q.Name, Status: q.Status, Limit: q.Limit, Offset: q.Offset})
	if err != nil {
		return Page[Deployment]{}, err
	}
	page := Page[Deployment]{Resources: make([]Deployment, 0, len(recs)), Offset: q.Offset + len(recs)}
	for _, d := range recs {
		doc, err := decodeDoc[deploymentDoc](d.Doc)
		if err != nil {
			return Page[Deployment]{}, err
		}
		page.Resources = append(page.Resources, view(d, doc))
	}
	return page, nil
}

// Update applies a PATCH. Changes to secrets, resource_spec or
// source_revision_config make a new revision; build_on_push, custom_url and
// the build commands change in place; identity fields cannot change.
func (s *Service) Update(ctx context.Context, orgID, id string, in UpdateInput) (Deployment, error) {
	var c fail.Checks
	checkReadOnly(&c, in.readOnly, in.SourceRevisionConfig)
	if err := c.Err(); err != nil {
		return Deployment{}, err
	}
	ch := change{name: in.Name, source: in.Source, config: in.SourceConfig, secrets: in.Secrets}
	if in.SourceRevisionConfig != nil {
		rc := in.SourceRevisionConfig.normalized()
		ch.revision = &rc
	}
	d, doc, _, err := s.apply(ctx, orgID, id, ch)
	if err != nil {
		return Deployment{}, err
	}
	return view(d, doc), nil
}

// CreateRevision always makes a new revision: the latest one's configuration
// with the given changes.
func (s *Service) CreateRevision(ctx context.Context, orgID, id string, in RevisionInput) (Revision, error) {
	var c fail.Checks
	checkReadOnly(&c, in.readOnly, in.SourceRevisionConfig)
	c.Add(present(in.Name), "name", "cannot be set on a revision (it never changes)")
	c.Add(present(in.Source), "source", "cannot be set on a revision (it never changes)")
	ch := change{secrets: in.Secrets, alwaysRevise: true}
	if in.SourceRevisionConfig != nil {
		rc := in.SourceRevisionConfig.normalized()
		ch.revision = &rc
	}
	if sc := in.SourceConfig; sc != nil {
		only := SourceConfig{ResourceSpec: sc.ResourceSpec}
		c.Add(!jsonEqual(*sc, only), "source_config", "only resource_spec can be set on a revision (PATCH the deployment for the rest)")
		ch.config = &only
	}
	if err := c.Err(); err != nil {
		return Revision{}, err
	}
	_, _, rev, err := s.apply(ctx, orgID, id, ch)
	if err != nil {
		return Revision{}, err
	}
	return rev, nil
}

// Delete marks the deployment AWAITING_DELETE and lets the provisioner
// remove it (then it answers 404). Deleting twice is not an error.
func (s *Service) Delete(ctx context.Context, orgID, id string) error {
	_, err := s.modify(ctx, orgID, id, func(d *store.Deployment, doc *deploymentDoc) (bool, error) {
		if d.Status == StatusAwaitingDelete {
			return false, nil
		}
		d.Status = StatusAwaitingDelete
		return true, nil
	})
	if err != nil {
		return err
	}
	if s.Provisioner != nil {
		s.Provisioner.StartDelete(orgID, id)
	}
	return nil
}

// Revision returns one revision of a deployment.
func (s *Service) Revision(ctx context.Context, orgID, deploymentID, revisionID string) (Revision, error) {
	r, err := s.Store.Revision(ctx, orgID, deploymentID, revisionID)
	if errors.Is(err, store.ErrNotFound) {
		return Revision{}, fail.NotFound("revision %q of deployment %q not found", revisionID, deploymentID)
	}
	if err != nil {
		return Revision{}, err
	}
	return revisionView(r)
}

// ListRevisions returns a page of a deployment's revisions, newest first.
func (s *Service) ListRevisions(ctx context.Context, orgID, deploymentID string, q RevisionQuery) (Page[Revision], error) {
	var c fail.Checks
	for _, st := range q.Status {
		c.Add(!slices.Contains(revisionStatuses, st), "status", "%q is not a revision status (one of %v)", st, revisionStatuses)
	}
	if err := c.Err(); err != nil {
		return Page[Revision]{}, err
	}
	recs, err := s.Store.ListRevisions(ctx, orgID, deploymentID, store.RevisionFilter{Statuses: q.Status, Limit: q.Limit, Offset: q.Offset})
	if errors.Is(err, store.ErrNotFound) {
		return Page[Revision]{}, notFound(deploymentID)
	}
	if err != nil {
		return Page[Revision]{}, err
	}
	page := Page[Revision]{Resources: make([]Revision, 0, len(recs)), Offset: q.Offset + len(recs)}
	for _, r := range recs {
		v, err := revisionView(r)
		if err != nil {
			return Page[Revision]{}, err
		}
		page.Resources = append(page.Resources, v)
	}
	return page, nil
}

// Redeploy makes an earlier revision the deployment's target again
// (rollback). A revision that failed cannot be redeployed.
func (s *Service) Redeploy(ctx context.Context, orgID, deploymentID, revisionID string) (Deployment, error) {
	if _, _, err := s.load(ctx, orgID, deploymentID); err != nil {
		return Deployment{}, err
	}
	rev, err := s.Store.Revision(ctx, orgID, deploymentID, revisionID)
	if errors.Is(err, store.ErrNotFound) {
		return Deployment{}, fail.NotFound("revision %q of deployment %q not found", revisionID, deploymentID)
	}
	if err != nil {
		return Deployment{}, err
	}
	if failed(rev.Status) {
		return Deployment{}, fail.BadRequest("revision %q is %s and cannot be redeployed; create a new revision instead", revisionID, rev.Status)
	}
	var d store.Deployment
	var doc deploymentDoc
	d, err = s.modify(ctx, orgID, deploymentID, func(rec *store.Deployment, dd *deploymentDoc) (bool, error) {
		if rec.Status == StatusAwaitingDelete {
			return false, beingDeleted(deploymentID)
		}
		doc = *dd
		if dd.Target == revisionID {
			return false, nil
		}
		dd.Target = revisionID
		doc = *dd
		return true, nil
	})
	if err != nil {
		return Deployment{}, err
	}
	if !slices.Contains(unsettled, rev.Status) {
		if _, err := s.setRevisionStatus(ctx, rev, RevQueued, ""); err != nil {
			return Deployment{}, err
		}
	}
	s.startProvision(orgID, deploymentID, revisionID)
	return view(d, doc), nil
}

// change is what an update or an explicit revision asks for.
type change struct {
	name, source *string
	config       *SourceConfig
	revision     *SourceRevisionConfig
	secrets      []SecretInput
	alwaysRevise bool
}

// apply validates ch against the current deployment and writes the result:
// in place, or with a new revision. Secret values are stored first, under
// new references; when the write fails they are removed again.
func (s *Service) apply(ctx context.Context, orgID, id string, ch change) (store.Deployment, deploymentDoc, Revision, error) {
	var c fail.Checks
	values := secretValues(&c, ch.secrets, true)
	if err := c.Err(); err != nil {
		return store.Deployment{}, deploymentDoc{}, Revision{}, err
	}
	created, err := s.storeSecrets(ctx, id, values)
	if err != nil {
		return store.Deployment{}, deploymentDoc{}, Revision{}, err
	}
	for attempt := 1; ; attempt++ {
		d, doc, rev, err := s.applyOnce(ctx, orgID, id, ch, values, created)
		if errors.Is(err, store.ErrStale) && attempt < maxWriteAttempts {
			continue
		}
		if err != nil {
			s.forgetSecrets(ctx, created)
			return store.Deployment{}, deploymentDoc{}, Revision{}, err
		}
		return d, doc, rev, nil
	}
}

func (s *Service) applyOnce(ctx context.Context, orgID, id string, ch change, values []secretInputValue, created map[string]string) (store.Deployment, deploymentDoc, Revision, error) {
	d, doc, err := s.load(ctx, orgID, id)
	if err != nil {
		return d, doc, Revision{}, err
	}
	if d.Status == StatusAwaitingDelete {
		return d, doc, Revision{}, beingDeleted(id)
	}
	next, revise, err := s.merge(d, doc, ch, values, created)
	if err != nil {
		return d, doc, Revision{}, err
	}
	now := s.now()
	if !revise {
		if jsonEqual(next, doc) {
			return d, doc, Revision{}, nil
		}
		d.Doc, d.UpdatedAt = mustJSON(next), now
		stored, err := s.Store.UpdateDeployment(ctx, d)
		return stored, next, Revision{}, s.missing(err, id)
	}
	revID := uuid.NewString()
	next.Target = revID
	next.SourceRevisionConfig.RepoCommitSHA = nil
	d.LatestRevisionID, d.Doc, d.UpdatedAt = revID, mustJSON(next), now
	r := newRevision(revID, d, next, now)
	stored, err := s.Store.AddRevision(ctx, d, r)
	if err != nil {
		return d, doc, Revision{}, s.missing(err, id)
	}
	s.startProvision(orgID, id, revID)
	rv, err := revisionView(r)
	return stored, next, rv, err
}

// merge computes the deployment's configuration after ch, checking that
// identity fields stay and that the result obeys every per-source rule.
func (s *Service) merge(d store.Deployment, doc deploymentDoc, ch change, values []secretInputValue, created map[string]string) (deploymentDoc, bool, error) {
	var c fail.Checks
	next := doc
	revise := ch.alwaysRevise
	c.Add(ch.name != nil && *ch.name != d.Name, "name", "cannot be changed")
	c.Add(ch.source != nil && normalizeSource(*ch.source) != doc.Source, "source", "cannot be changed")
	if sc := ch.config; sc != nil {
		cur := doc.SourceConfig
		c.Add(changed(sc.IntegrationID, cur.IntegrationID), "source_config.integration_id", "cannot be changed")
		c.Add(changed(sc.RepoURL, cur.RepoURL), "source_config.repo_url", "cannot be changed")
		c.Add(changed(sc.DeploymentType, cur.DeploymentType), "source_config.deployment_type", "cannot be changed")
		c.Add(changed(sc.ListenerID, cur.ListenerID), "source_config.listener_id", "cannot be changed")
		c.Add(present(sc.ListenerConfig) && !jsonEqual(sc.ListenerConfig, cur.ListenerConfig), "source_config.listener_config", "cannot be changed")
		setIf(&next.SourceConfig.BuildOnPush, sc.BuildOnPush)
		setIf(&next.SourceConfig.CustomURL, sc.CustomURL)
		setIf(&next.SourceConfig.InstallCommand, sc.InstallCommand)
		setIf(&next.SourceConfig.BuildCommand, sc.BuildCommand)
		if sc.ResourceSpec != nil {
			next.SourceConfig.ResourceSpec = sc.ResourceSpec // replaced whole, as upstream
			revise = true
		}
	}
	if rc := ch.revision; rc != nil {
		for _, f := range []struct {
			dst **string
			v   *string
		}{{&next.SourceRevisionConfig.RepoRef, rc.RepoRef}, {&next.SourceRevisionConfig.GraphConfigPath, rc.GraphConfigPath}, {&next.SourceRevisionConfig.ImageURI, rc.ImageURI}} {
			if f.v != nil {
				*f.dst = f.v
				revise = true
			}
		}
	}
	if len(ch.secrets) > 0 {
		// Only a list that differs makes a revision: the mask sent back for
		// a stored secret, or null for one that does not exist, changes nothing.
		if merged := mergeSecrets(&c, doc.Secrets, ch.secrets, values, created); !slices.Equal(merged, doc.Secrets) {
			next.Secrets = merged
			revise = true
		}
	}
	checkConfig(&c, next.Source, next.SourceConfig, next.SourceRevisionConfig, s.AllowHTTPLoopback, s.Sources)
	s.checkReservedRuntime(&c, next.SourceConfig.CustomURL)
	return next, revise, c.Err()
}

func changed(in, cur *string) bool { return in != nil && (cur == nil || *in != *cur) }

func setIf[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// load reads a deployment and its document; 404 when it is not the caller's.
func (s *Service) load(ctx context.Context, orgID, id string) (store.Deployment, deploymentDoc, error) {
	d, err := s.Store.Deployment(ctx, orgID, id)
	if err != nil {
		return d, deploymentDoc{}, s.missing(err, id)
	}
	doc, err := decodeDoc[deploymentDoc](d.Doc)
	return d, doc, err
}

// modify is a read-modify-write of a deployment under optimistic
// concurrency. edit returns false when there is nothing to write.
func (s *Service) modify(ctx context.Context, orgID, id string, edit func(*store.Deployment, *deploymentDoc) (bool, error)) (store.Deployment, error) {
	for attempt := 1; ; attempt++ {
		d, doc, err := s.load(ctx, orgID, id)
		if err != nil {
			return d, err
		}
		write, err := edit(&d, &doc)
		if err != nil || !write {
			return d, err
		}
		d.Doc, d.UpdatedAt = mustJSON(doc), s.now()
		stored, err := s.Store.UpdateDeployment(ctx, d)
		if errors.Is(err, store.ErrStale) && attempt < maxWriteAttempts {
			continue
		}
		return stored, s.missing(err, id)
	}
}

func (s *Service) missing(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound(id)
	}
	return err
}

func (s *Service) startProvision(orgID, deploymentID, revisionID string) {
	if s.Provisioner != nil {
		s.Provisioner.StartProvision(orgID, deploymentID, revisionID)
	}
}

func notFound(id string) error { return fail.NotFound("deployment %q not found", id) }

func beingDeleted(id string) error {
	return fail.Conflict("deployment %q is being deleted", id)
}

func newRevision(id string, d store.Deployment, doc deploymentDoc, now time.Time) store.Revision {
	rd := revisionDoc{Source: doc.Source, SourceRevisionConfig: doc.SourceRevisionConfig,
		ResourceSpec: doc.SourceConfig.ResourceSpec, Secrets: doc.Secrets}
	return store.Revision{ID: id, OrgID: d.OrgID, DeploymentID: d.ID, Status: RevCreating,
		Doc: mustJSON(rd), Version: 1, CreatedAt: now, UpdatedAt: now}
}

func view(d store.Deployment, doc deploymentDoc) Deployment {
	return Deployment{
		ID: d.ID, TenantID: d.OrgID, Name: d.Name, Source: doc.Source,
		SourceConfig: doc.SourceConfig, SourceRevisionConfig: doc.SourceRevisionConfig,
		Secrets:   maskSecrets(doc.Secrets),
		CreatedAt: formatTime(d.CreatedAt), UpdatedAt: formatTime(d.UpdatedAt),
		Status: d.Status, LatestRevisionID: optional(d.LatestRevisionID),
		ActiveRevisionID: optional(d.ActiveRevisionID), ImageVersion: doc.ImageVersion,
	}
}

func revisionView(r store.Revision) (Revision, error) {
	doc, err := decodeDoc[revisionDoc](r.Doc)
	if err != nil {
		return Revision{}, err
	}
	return Revision{
		ID: r.ID, CreatedAt: formatTime(r.CreatedAt), UpdatedAt: formatTime(r.UpdatedAt),
		Status: r.Status, StatusMessage: optional(r.StatusReason), Source: doc.Source,
		SourceRevisionConfig: doc.SourceRevisionConfig, Secrets: maskSecrets(doc.Secrets),
		ResourceSpec: doc.ResourceSpec,
	}, nil
}

func failed(status string) bool {
	return status == RevCreateFailed || status == RevBuildFailed || status == RevDeployFailed
}

func decodeDoc[T any](raw []byte) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("stored document is corrupt: %w", err)
	}
	return v, nil
}

// mustJSON encodes the package's own document types, which always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("deployments: encode %T: %v", v, err))
	}
	return b
}

func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
