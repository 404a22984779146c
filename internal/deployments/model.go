package deployments

import (
	"encoding/json"
	"time"
)

// Sources and statuses, as they appear on the wire.
const (
	SourceHostedRepo     = "hosted_repo"
	SourceExternalDocker = "external_docker"
	sourceGitHubAlias    = "github" // upstream's spelling of hosted_repo

	// Deployment statuses.
	StatusAwaitingDatabase = "AWAITING_DATABASE" // no revision deployed yet
	StatusReady            = "READY"
	StatusAwaitingDelete   = "AWAITING_DELETE"

	// Revision statuses, in lifecycle order.
	RevCreating       = "CREATING"
	RevQueued         = "QUEUED"
	RevAwaitingBuild  = "AWAITING_BUILD"
	RevBuilding       = "BUILDING"
	RevAwaitingDeploy = "AWAITING_DEPLOY"
	RevDeploying      = "DEPLOYING"
	RevDeployed       = "DEPLOYED"
	RevCreateFailed   = "CREATE_FAILED"
	RevBuildFailed    = "BUILD_FAILED"
	RevDeployFailed   = "DEPLOY_FAILED"
	RevSkipped        = "SKIPPED"
)

// SecretMask stands for a secret's value in every answer. Sent back on an
// update it means "keep the current value".
const SecretMask = "********"

// unsettled are the revision statuses the provisioner still has work for.
var unsettled = []string{RevCreating, RevQueued, RevAwaitingBuild, RevBuilding, RevAwaitingDeploy, RevDeploying}

var revisionStatuses = []string{RevCreating, RevQueued, RevAwaitingBuild, RevBuilding, RevAwaitingDeploy, RevDeploying,
	RevCreateFailed, RevBuildFailed, RevDeployFailed, RevDeployed, RevSkipped, "INTERRUPTED", "UNKNOWN"}

// SourceConfig holds the settings that do not need a new revision to change
// (or cannot change at all). Nil means absent.
type SourceConfig struct {
	IntegrationID  *string         `json:"integration_id"`
	RepoURL        *string         `json:"repo_url"`
	DeploymentType *string         `json:"deployment_type"`
	BuildOnPush    *bool           `json:"build_on_push"`
	CustomURL      *string         `json:"custom_url"`
	ResourceSpec   map[string]any  `json:"resource_spec"`
	ListenerID     *string         `json:"listener_id"`
	ListenerConfig json.RawMessage `json:"listener_config"`
	InstallCommand *string         `json:"install_command"`
	BuildCommand   *string         `json:"build_command"`
}

// SourceRevisionConfig holds what a revision builds from.
type SourceRevisionConfig struct {
	RepoRef         *string `json:"repo_ref"`
	GraphConfigPath *string `json:"graph_config_path"`
	ImageURI        *string `json:"image_uri"`
	RepoCommitSHA   *string `json:"repo_commit_sha"` // read-only: set by the provisioner
}

// SourceRevisionInput is SourceRevisionConfig as accepted on input, with
// upstream's spelling of graph_config_path.
type SourceRevisionInput struct {
	SourceRevisionConfig
	LanggraphConfigPath *string `json:"langgraph_config_path"`
}

// normalized folds the upstream alias into graph_config_path.
func (in *SourceRevisionInput) normalized() SourceRevisionConfig {
	out := in.SourceRevisionConfig
	if out.GraphConfigPath == nil {
		out.GraphConfigPath = in.LanggraphConfigPath
	}
	return out
}

// SecretInput is one secret of a request. Value is raw JSON so that absent,
// null (remove, on update) and a string can be told apart.
type SecretInput struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// Secret is a secret as answered: the name and the mask, never the value.
type Secret struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// readOnly lists the record fields a request may not set; any present one is
// a 422 naming it.
type readOnly struct {
	ID               json.RawMessage `json:"id"`
	TenantID         json.RawMessage `json:"tenant_id"`
	CreatedAt        json.RawMessage `json:"created_at"`
	UpdatedAt        json.RawMessage `json:"updated_at"`
	Status           json.RawMessage `json:"status"`
	LatestRevisionID json.RawMessage `json:"latest_revision_id"`
	ActiveRevisionID json.RawMessage `json:"active_revision_id"`
	ImageVersion     json.RawMessage `json:"image_version"`
}

// CreateInput is a create request.
type CreateInput struct {
	readOnly
	Name                 *string              `json:"name"`
	Source               *string              `json:"source"`
	SourceConfig         *SourceConfig        `json:"source_config"`
	SourceRevisionConfig *SourceRevisionInput `json:"source_revision_config"`
	Secrets              []SecretInput        `json:"secrets"`
}

// UpdateInput is a PATCH, with the fields of a create: absent and null
// fields leave the deployment as it is.
type UpdateInput CreateInput

// RevisionInput is an explicit new revision: changes on top of the latest one.
// The record fields, name and source are there only to be rejected.
type RevisionInput struct {
	readOnly
	Name                 json.RawMessage      `json:"name"`
	Source               json.RawMessage      `json:"source"`
	SourceConfig         *SourceConfig        `json:"source_config"`
	SourceRevisionConfig *SourceRevisionInput `json:"source_revision_config"`
	Secrets              []SecretInput        `json:"secrets"`
}

// Deployment is the answer for one deployment.
type Deployment struct {
	ID                   string               `json:"id"`
	TenantID             string               `json:"tenant_id"`
	Name                 string               `json:"name"`
	Source               string               `json:"source"`
	SourceConfig         SourceConfig         `json:"source_config"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []Secret             `json:"secrets"`
	CreatedAt            string               `json:"created_at"`
	UpdatedAt            string               `json:"updated_at"`
	Status               string               `json:"status"`
	LatestRevisionID     *string              `json:"latest_revision_id"`
	ActiveRevisionID     *string              `json:"active_revision_id"`
	ImageVersion         *string              `json:"image_version"`
}

// Revision is the answer for one revision.
type Revision struct {
	ID                   string               `json:"id"`
	CreatedAt            string               `json:"created_at"`
	UpdatedAt            string               `json:"updated_at"`
	Status               string               `json:"status"`
	StatusMessage        *string              `json:"status_message"`
	Source               string               `json:"source"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []Secret             `json:"secrets"`
	ResourceSpec         map[string]any       `json:"resource_spec"`
}

// Page is a list answer; Offset is where the next page starts.
type Page[T any] struct {
	Resources []T `json:"resources"`
	Offset    int `json:"offset"`
}

// ListQuery narrows List. Limit 0 means 20.
type ListQuery struct {
	Limit, Offset int
	NameContains  string
	Name          string // exactly this name (langgraph deploy finds a deployment by it)
	Status        string
}

// RevisionQuery narrows ListRevisions. Limit 0 means 20.
type RevisionQuery struct {
	Limit, Offset int
	Status        []string
}

// storedSecret names a secret and where its value is: a reference into the
// secrets store. References are never reused for another value, so revisions
// can share them; they are deleted with the deployment.
type storedSecret struct {
	Name string `json:"name"`
	Ref  string `json:"ref"`
}

// deploymentDoc is the deployments package's part of store.Deployment.
type deploymentDoc struct {
	Source               string               `json:"source"`
	SourceConfig         SourceConfig         `json:"source_config"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"` // the latest revision's
	Secrets              []storedSecret       `json:"secrets"`                // the latest revision's
	// Target is the revision the deployment is moving to: the newest one, or
	// the one a redeploy asked for. Any other revision still in progress has
	// been superseded and ends SKIPPED.
	Target       string  `json:"target"`
	ImageVersion *string `json:"image_version,omitempty"`
	// Served are the graph ids of the active revision, set when it is
	// activated (ServedGraphs reads them without reading revisions).
	Served []string `json:"served_graphs,omitempty"`
}

// revisionDoc is the deployments package's part of store.Revision.
type revisionDoc struct {
	Source               string               `json:"source"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	ResourceSpec         map[string]any       `json:"resource_spec"`
	Secrets              []storedSecret       `json:"secrets"`
	// Graphs are the revision's graph config and documents (graphs.go);
	// nil until it was built (hosted_repo) or described (external_docker),
	// and for an external_docker revision without a custom_url.
	Graphs *graphSnapshot `json:"graphs,omitempty"`
	// RuntimeURL is the runtime the platform made from the revision's
	// image (Service.Runtimes), for an external_docker deployment without
	// a custom_url; a custom_url, when set, takes its place.
	RuntimeURL string `json:"runtime_url,omitempty"`
	// AppBuild is the build of a LangGraph app's zip by the AppBuilder
	// (builds.go); its function's version is RuntimeURL.
	AppBuild *appBuildDoc `json:"app_build,omitempty"`
	// Log is the revision's provisioning log (logs.go).
	Log []logEntry `json:"log,omitempty"`
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func maskSecrets(list []storedSecret) []Secret {
	out := make([]Secret, 0, len(list))
	for _, s := range list {
		out = append(out, Secret{Name: s.Name, Value: SecretMask})
	}
	return out
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
