package deployments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing/fstest"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/store"
)

// A revision's graphs.
//
// A revision keeps what it serves: its graph config and every document the
// config names, as read when the revision was first built (hosted_repo: from
// the repository at the commit repo_ref resolved to) or deployed
// (external_docker: the runtime's describe answer). Any process can compile
// them again from the revision record alone, a redeploy serves exactly them
// again, and a run started on the revision keeps running on them.
//
// The rules, by stage:
//   - BUILDING (hosted_repo): the repository, ref and graph config path
//     (the sources port), and the size bound below → BUILD_FAILED;
//   - DEPLOYING: the documents (graphdoc: schema and rules, each problem
//     naming file, JSON path and rule), a graph id another active deployment
//     of the organization serves, and the host's own check (a built-in graph
//     name; the document compiled with the deployment's secrets and runtime)
//     → DEPLOY_FAILED.

// MaxGraphBytes bounds what a revision keeps of its graphs: the graph config
// and the documents it names, together (each file is also bounded by
// graphdoc.MaxFileBytes). It keeps the revision record small enough for
// every store (a DynamoDB item holds 400 KB).
const MaxGraphBytes = 200 << 10

// maxReasonBytes bounds a status reason made of validation problems.
const maxReasonBytes = 8 << 10

// describeTimeout bounds the describe call to an external runtime.
const describeTimeout = 30 * time.Second

// describeFile names the graph config a runtime described, in problems.
const describeFile = "describe"

// graphSnapshot is the revision document's record of its graphs.
type graphSnapshot struct {
	// Config is the graph config's path in Files: graph_config_path,
	// cleaned, or "describe" for what a runtime described.
	Config string `json:"config"`
	// Described: the config came from the runtime's describe call, with
	// every document inline.
	Described bool `json:"described,omitempty"`
	// Files are the files read, by path.
	Files map[string][]byte `json:"files"`
	// Graphs are the graph ids, once the documents passed the checks.
	Graphs []string `json:"graphs,omitempty"`
	// App: Config is a LangGraph app's langgraph.json (the only file kept
	// here); the AppHost keeps the app and runs it (apps.go). With
	// Described, it is instead the describe answer of an external_docker
	// deployment's runtime that is a LangGraph app (external.go): the app
	// answers at the revision's runtime URL.
	App bool `json:"app,omitempty"`
}

// load reads and checks the graph config from the snapshot. The error is a
// *graphdoc.ValidationError.
func (g *graphSnapshot) load() (*graphdoc.Config, error) {
	if g.Described {
		return graphdoc.ParseConfig(describeFile, g.Files[g.Config], nil)
	}
	return graphdoc.Load(snapshotFS(g.Files), g.Config)
}

// snapshotFS serves a snapshot's files (read-only, in memory).
func snapshotFS(files map[string][]byte) fs.FS {
	m := make(fstest.MapFS, len(files))
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	return m
}

// recorder is the fs.FS a graph config is loaded through while building: it
// keeps every file read, up to MaxGraphBytes together.
type recorder struct {
	fsys     fs.FS
	files    map[string][]byte
	total    int
	exceeded bool
}

var errGraphsTooLarge = fmt.Errorf("the graph config and its documents are larger than %d bytes together", MaxGraphBytes)

func (r *recorder) Open(name string) (fs.File, error) {
	if r.exceeded {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errGraphsTooLarge}
	}
	data, err := fs.ReadFile(r.fsys, name)
	if err != nil {
		return nil, err
	}
	if _, seen := r.files[name]; !seen {
		r.total += len(data)
	}
	if r.total > MaxGraphBytes {
		r.exceeded = true
		return nil, &fs.PathError{Op: "open", Path: name, Err: errGraphsTooLarge}
	}
	r.files[name] = data
	return snapshotFS(map[string][]byte{name: data}).Open(name)
}

// snapshotRepo loads the graph config at configPath through fsys (a
// checkout) only to learn which files it reads, and keeps them. Whether they
// are valid is decided when deploying, from the snapshot.
func snapshotRepo(fsys fs.FS, configPath string) (*graphSnapshot, string) {
	rec := &recorder{fsys: fsys, files: map[string][]byte{}}
	clean := path.Clean(configPath)
	_, _ = graphdoc.Load(rec, clean)
	if rec.exceeded {
		return nil, errGraphsTooLarge.Error() + " (see docs/graphs.md)"
	}
	return &graphSnapshot{Config: clean, Files: rec.files}, ""
}

// describe asks the runtime at url (label names it in the reason) for its
// graph config, over the transport the GraphPublisher will call it with
// (HTTP when there is none).
func (s *Service) describe(ctx context.Context, label, url string) (*graphSnapshot, string) {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	var raw []byte
	var err error
	if s.Graphs != nil {
		raw, err = s.Graphs.DescribeRuntime(ctx, url, MaxGraphBytes)
	} else {
		raw, err = (&graphdoc.HTTPRuntime{URL: url, Client: s.outbound(), MaxResponseBytes: MaxGraphBytes}).Describe(ctx)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, ""
		}
		return nil, fmt.Sprintf("%s: the runtime's describe call failed: %v", label, err)
	}
	app, _, reason := describedApp(raw)
	if reason != "" {
		return nil, label + ": " + reason
	}
	return &graphSnapshot{Config: describeFile, Described: true, App: app, Files: map[string][]byte{describeFile: raw}}, ""
}

// boundReason cuts a list of problems (one per line) to maxReasonBytes.
func boundReason(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	lines := strings.Split(s, "\n")
	kept, size := 0, 0
	for kept < len(lines) && size+len(lines[kept])+1 <= maxReasonBytes-64 {
		size += len(lines[kept]) + 1
		kept++
	}
	if kept == 0 {
		return s[:maxReasonBytes-64] + "…"
	}
	return strings.Join(lines[:kept], "\n") + fmt.Sprintf("\n… and %d more problems", len(lines)-kept)
}

// checkGraphs applies the deploy-time rules to the revision's graphs: the
// reason it fails, or "" and the graph ids.
func (l *lifecycle) checkGraphs(ctx context.Context, d store.Deployment, dd deploymentDoc) (string, error) {
	snap := l.doc.Graphs
	cfg, err := snap.load()
	var ve *graphdoc.ValidationError
	switch {
	case errors.As(err, &ve):
		return boundReason(ve.Error()), nil
	case err != nil:
		return "", err
	}
	ids := cfg.Graphs()
	if reason, err := l.s.takenGraphs(ctx, d, ids); err != nil || reason != "" {
		return reason, err
	}
	if l.s.Graphs != nil {
		rg := l.revisionGraphs(d, dd)
		rg.config = cfg
		reason, err := l.s.Graphs.Check(ctx, rg)
		if err != nil || reason != "" {
			return boundReason(reason), err
		}
	}
	snap.Graphs = ids
	return "", nil
}

// takenGraphs: graph ids are unique in an organization; the reason when
// another deployment serves one of ids.
func (s *Service) takenGraphs(ctx context.Context, d store.Deployment, ids []string) (string, error) {
	served, err := s.ServedGraphs(ctx, d.OrgID)
	if err != nil {
		return "", err
	}
	var taken []string
	for _, id := range ids {
		if sg, ok := served[id]; ok && sg.DeploymentID != d.ID {
			taken = append(taken, fmt.Sprintf("graph %q is already served by deployment %q (%s): graph ids are unique in an organization", id, sg.DeploymentName, sg.DeploymentID))
		}
	}
	return strings.Join(taken, "\n"), nil
}

// revisionGraphs describes this lifecycle's revision for the GraphPublisher.
func (l *lifecycle) revisionGraphs(d store.Deployment, dd deploymentDoc) RevisionGraphs {
	return newRevisionGraphs(d.OrgID, d.ID, l.rev.ID, dd, l.doc)
}

func newRevisionGraphs(orgID, deploymentID, revisionID string, dd deploymentDoc, rd revisionDoc) RevisionGraphs {
	refs := map[string]string{}
	for _, sec := range rd.Secrets {
		refs[sec.Name] = sec.Ref
	}
	rg := RevisionGraphs{OrgID: orgID, DeploymentID: deploymentID, RevisionID: revisionID,
		RuntimeURL: cmp.Or(deref(dd.SourceConfig.CustomURL), rd.RuntimeURL), SecretRefs: refs, snap: rd.Graphs,
		RuntimeSecrets: deref(dd.SourceConfig.CustomURL) == "" && rd.RuntimeURL != ""}
	if rd.Graphs != nil {
		rg.GraphIDs = slices.Clone(rd.Graphs.Graphs)
		if rd.Graphs.App {
			rg.App, rg.AppConfig, rg.ExternalApp = true, rd.Graphs.Config, rd.Graphs.Described
		}
	}
	return rg
}

// GraphPublisher serves the graphs of deployed revisions; internal/
// deployedgraphs implements it. The lifecycle asks it, while deploying, whether
// a revision's graphs can be served, and tells it when the revision becomes
// the deployment's active one.
type GraphPublisher interface {
	// Check reports why g's graphs cannot be served as they are — a graph id
	// taken by a built-in graph, a document that does not compile with the
	// deployment's secrets and runtime — or "" when they can. An error means
	// the check could not be made now (it is retried).
	Check(ctx context.Context, g RevisionGraphs) (reason string, err error)
	// DescribeRuntime makes the describe call of the runtime at url (a
	// deployment's runtime URL), over the transport its functions will be
	// called with, reading at most maxBytes. An error says why it failed.
	DescribeRuntime(ctx context.Context, url string, maxBytes int64) ([]byte, error)
	// Publish makes the graphs of g runnable: each gets its default
	// assistant. It is called once g passed every check, right before it
	// becomes the deployment's active revision (and so DEPLOYED); again for
	// the same revision after a failure or a redeploy: it must be
	// idempotent.
	Publish(ctx context.Context, g RevisionGraphs) error
}

// RevisionGraphs is a revision's graphs, with what serving them needs.
type RevisionGraphs struct {
	OrgID, DeploymentID, RevisionID string
	// GraphIDs are the revision's graph ids (empty before it was deployed).
	GraphIDs []string
	// RuntimeURL is where the deployment's runtime answers now
	// (source_config.custom_url, which changes without a new revision, or
	// else the runtime made from the revision's image_uri), "" when it has
	// none. An http(s) URL or a Lambda function ARN.
	RuntimeURL string
	// RuntimeSecrets: the runtime is the one the platform made from the
	// revision's image_uri (no custom_url). It holds no secret of its own,
	// so each call to it carries the revision's secret values (the Lambda
	// transport's "secrets", docs/runtime-protocol.md); a runtime of the
	// deployment's own (custom_url) never gets them.
	RuntimeSecrets bool
	// SecretRefs locate the revision's secret values in the secrets store,
	// by secret name.
	SecretRefs map[string]string
	// App: the revision is a LangGraph app's, served by the AppHost;
	// AppConfig is its langgraph.json's path. Config does not apply.
	App       bool
	AppConfig string
	// ExternalApp: the app is an external_docker deployment's runtime that
	// described itself as a LangGraph app (external.go). It answers at
	// RuntimeURL (HTTP, or a Lambda function); AppConfig does not apply.
	ExternalApp bool

	snap   *graphSnapshot
	config *graphdoc.Config
}

// DescribedRevisionGraphs is the RevisionGraphs of a revision whose graph
// config (JSON, every document inline) a runtime described, for a
// GraphPublisher's own tests: nothing is stored or read.
func DescribedRevisionGraphs(orgID, deploymentID, revisionID, runtimeURL string, secretRefs map[string]string, config []byte) RevisionGraphs {
	return RevisionGraphs{OrgID: orgID, DeploymentID: deploymentID, RevisionID: revisionID, RuntimeURL: runtimeURL,
		SecretRefs: secretRefs, snap: &graphSnapshot{Config: describeFile, Described: true, Files: map[string][]byte{describeFile: config}}}
}

// Config reads and checks the revision's graph config from the revision
// record. The error is a *graphdoc.ValidationError (the rules may have
// changed since the revision was deployed).
func (g RevisionGraphs) Config() (*graphdoc.Config, error) {
	if g.config != nil {
		return g.config, nil
	}
	if g.snap == nil {
		return nil, fail.NotFound("revision %s of deployment %s declares no graphs", g.RevisionID, g.DeploymentID)
	}
	if g.snap.App {
		return nil, fail.NotFound("revision %s of deployment %s is a LangGraph app: its graphs are not documents", g.RevisionID, g.DeploymentID)
	}
	return g.snap.load()
}

// ServedGraph is a graph an active deployment serves.
type ServedGraph struct {
	GraphID        string
	DeploymentID   string
	DeploymentName string
	RevisionID     string // the deployment's active revision
}

// ServedGraphs returns the graphs the organization's READY deployments
// serve, by graph id: those of each one's active revision. Graph ids are
// unique in an organization (DEPLOY_FAILED otherwise); should two
// deployments racing to deploy both claim one, the older deployment serves
// it.
func (s *Service) ServedGraphs(ctx context.Context, orgID string) (map[string]ServedGraph, error) {
	out := map[string]ServedGraph{}
	const page = 100
	for offset := 0; ; offset += page {
		list, err := s.Store.ListDeployments(ctx, orgID, store.DeploymentFilter{Status: StatusReady, Limit: page, Offset: offset})
		if err != nil {
			return nil, err
		}
		for _, d := range list { // newest first: an older deployment overwrites
			doc, err := decodeDoc[deploymentDoc](d.Doc)
			if err != nil {
				return nil, err
			}
			for _, id := range doc.Served {
				out[id] = ServedGraph{GraphID: id, DeploymentID: d.ID, DeploymentName: d.Name, RevisionID: d.ActiveRevisionID}
			}
		}
		if len(list) < page {
			return out, nil
		}
	}
}

// RevisionGraphs returns what serving a revision's graphs needs. It is a
// fail.NotFound when the deployment or the revision is gone, or when the
// revision declares no graphs.
func (s *Service) RevisionGraphs(ctx context.Context, orgID, deploymentID, revisionID string) (RevisionGraphs, error) {
	d, dd, err := s.load(ctx, orgID, deploymentID)
	if err != nil {
		return RevisionGraphs{}, err
	}
	rev, err := s.Store.Revision(ctx, orgID, deploymentID, revisionID)
	if errors.Is(err, store.ErrNotFound) {
		return RevisionGraphs{}, fail.NotFound("revision %q of deployment %q not found", revisionID, deploymentID)
	}
	if err != nil {
		return RevisionGraphs{}, err
	}
	rd, err := decodeDoc[revisionDoc](rev.Doc)
	if err != nil {
		return RevisionGraphs{}, err
	}
	if rd.Graphs == nil {
		return RevisionGraphs{}, fail.NotFound("revision %s of deployment %s declares no graphs", revisionID, deploymentID)
	}
	return newRevisionGraphs(orgID, d.ID, rev.ID, dd, rd), nil
}
