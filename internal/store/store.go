package store

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound: no such record in this organization.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a uniqueness rule would be broken (duplicate name or key).
	ErrConflict = errors.New("conflict")
	// ErrStale: an optimistic write lost a race; the stored record's Version
	// differs from the one the caller read. Re-read and retry.
	ErrStale = errors.New("record changed since it was read")
	// ErrSuperseded: a checkpoint write, or a finish, of a run's attempt
	// that is no longer the run's current one (the run was claimed again,
	// e.g. by a retried Step Functions task; for a checkpoint also: the run
	// is no longer running); nothing was written.
	// The writer must stop: the newer attempt carries the run.
	ErrSuperseded = errors.New("superseded: the run is no longer executed by this attempt")
)

// Store is every port an adapter implements.
type Store interface {
	Organizations
	Providers
	Deployments
	Idempotency
	Assistants
	Threads
	RunQueue
	Checkpoints
	CheckpointStorage
	Accounting
	Crons
	Close() error
}

// Organization is a tenant. API keys, providers and deployments belong to one.
type Organization struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// APIKey is a credential of one organization. Only a hash of the key is kept.
type APIKey struct {
	ID        string
	OrgID     string
	Hash      string // hex SHA-256 of the key
	CreatedAt time.Time
}

// Organizations stores tenants and their API keys.
type Organizations interface {
	// CreateOrganization fails with ErrConflict when the name is taken.
	CreateOrganization(ctx context.Context, org Organization) error
	// OrganizationByName returns ErrNotFound when there is none.
	OrganizationByName(ctx context.Context, name string) (Organization, error)
	// CreateAPIKey fails with ErrConflict on a duplicate ID or Hash and with
	// ErrNotFound when the organization does not exist.
	CreateAPIKey(ctx context.Context, key APIKey) error
	// APIKeyByHash returns ErrNotFound for an unknown hash.
	APIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	// DeleteAPIKey revokes the key with this hash; ErrNotFound when there
	// is none.
	DeleteAPIKey(ctx context.Context, hash string) error
	// OrganizationSecretRef returns the secrets-store reference the
	// organization keeps under name (e.g. its webhook signing secret);
	// ErrNotFound when there is none.
	OrganizationSecretRef(ctx context.Context, orgID, name string) (string, error)
	// SetOrganizationSecretRef records ref under name. ErrConflict when a
	// reference is recorded already (the first one stays), ErrNotFound when
	// the organization does not exist.
	SetOrganizationSecretRef(ctx context.Context, orgID, name, ref string) error
}

// Provider is an OAuth provider registration. The client secret itself is in
// the secrets store; ClientSecretRef points at it ("" when there is none).
type Provider struct {
	ID                      string
	OrgID                   string
	ProviderID              string
	Name                    string
	ClientID                string
	ClientSecretRef         string
	AuthURL                 string
	TokenURL                string
	RevocationURL           string // RFC 7009 token revocation endpoint; "" means none
	UsesPKCE                bool
	CodeChallengeMethod     string
	ProviderType            string // "" means none
	TokenEndpointAuthMethod string
	CreatedAt               time.Time
	UpdatedAt               time.Time
}

// Providers stores OAuth providers, keyed by (OrgID, ProviderID).
type Providers interface {
	// CreateProvider fails with ErrConflict when ProviderID exists in the org.
	CreateProvider(ctx context.Context, p Provider) error
	Provider(ctx context.Context, orgID, providerID string) (Provider, error)
	// ListProviders returns the organization's providers, oldest first.
	ListProviders(ctx context.Context, orgID string) ([]Provider, error)
	// UpdateProvider replaces the record with the same (OrgID, ProviderID);
	// ErrNotFound when there is none.
	UpdateProvider(ctx context.Context, p Provider) error
	// DeleteProvider returns ErrNotFound when there is none.
	DeleteProvider(ctx context.Context, orgID, providerID string) error
}

// Deployment is an agent application. Doc is the deployments package's JSON
// document (source, source_config, ...); the other fields are what the store
// needs to key, filter, order and guard writes.
type Deployment struct {
	ID               string
	OrgID            string
	Name             string
	Status           string
	LatestRevisionID string
	ActiveRevisionID string // "" until a revision is deployed
	Doc              []byte
	// Version increases by one with every write; an update must carry the
	// Version it read (optimistic concurrency), see ErrStale.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Revision is one immutable configuration of a deployment plus its lifecycle
// status. Doc is owned by the deployments package.
type Revision struct {
	ID           string
	OrgID        string
	DeploymentID string
	Status       string
	StatusReason string
	Doc          []byte
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// DeploymentFilter narrows ListDeployments. The zero value lists everything
// from the start with the adapter's default page size of 20.
type DeploymentFilter struct {
	NameContains string // case-sensitive substring of Name
	Name         string // exactly this Name; "" means any
	Status       string // exact status; "" means any
	Limit        int    // 0 means 20
	Offset       int
}

// RevisionFilter narrows ListRevisions.
type RevisionFilter struct {
	Statuses []string // any of these; empty means any
	Limit    int      // 0 means 20
	Offset   int
}

// Deployments stores deployments and their revisions.
type Deployments interface {
	// CreateDeployment writes a new deployment and its first revision in one
	// atomic step. ErrConflict when the name exists in the organization.
	// Stored Versions start at 1 (the caller's Version is ignored).
	CreateDeployment(ctx context.Context, d Deployment, first Revision) error
	Deployment(ctx context.Context, orgID, id string) (Deployment, error)
	// ListDeployments returns the organization's deployments, newest first.
	ListDeployments(ctx context.Context, orgID string, f DeploymentFilter) ([]Deployment, error)
	// UpdateDeployment writes d if the stored Version equals d.Version
	// (ErrStale otherwise) and returns the record as stored (Version+1).
	UpdateDeployment(ctx context.Context, d Deployment) (Deployment, error)
	// AddRevision atomically stores a new revision and updates its deployment
	// under the same optimistic rule as UpdateDeployment.
	AddRevision(ctx context.Context, d Deployment, r Revision) (Deployment, error)
	// DeleteDeployment removes the deployment and all its revisions.
	DeleteDeployment(ctx context.Context, orgID, id string) error

	Revision(ctx context.Context, orgID, deploymentID, id string) (Revision, error)
	// ListRevisions returns a deployment's revisions, newest first;
	// ErrNotFound when the deployment does not exist.
	ListRevisions(ctx context.Context, orgID, deploymentID string, f RevisionFilter) ([]Revision, error)
	// UpdateRevision writes r if the stored Version equals r.Version (ErrStale
	// otherwise) and returns it as stored.
	UpdateRevision(ctx context.Context, r Revision) (Revision, error)

	// UnsettledRevisions lists, across organizations, revisions whose status
	// is one of statuses (the provisioner resumes them after a restart).
	UnsettledRevisions(ctx context.Context, statuses []string) ([]Revision, error)
	// DeploymentsInStatus lists, across organizations, deployments in status.
	DeploymentsInStatus(ctx context.Context, status string) ([]Deployment, error)
}

// IdempotencyRecord remembers the outcome of a create request sent with an
// Idempotency-Key, so a retry gets the first answer instead of a second record.
type IdempotencyRecord struct {
	OrgID       string
	Scope       string // the operation, e.g. "createDeployment"
	Key         string
	RequestHash string // hex SHA-256 of the request body
	Status      int    // HTTP status of the first answer; 0 while in progress
	Body        []byte // body of the first answer
	CreatedAt   time.Time
}

// Idempotency stores IdempotencyRecords keyed by (OrgID, Scope, Key).
type Idempotency interface {
	// ReserveIdempotencyKey inserts rec (Status 0) when no record with its key
	// exists and returns (rec, true). Otherwise it returns the stored record
	// and false; a stored in-progress record older than staleAfter is
	// replaced by rec as if absent (its request died).
	ReserveIdempotencyKey(ctx context.Context, rec IdempotencyRecord, staleAfter time.Duration) (IdempotencyRecord, bool, error)
	// CompleteIdempotencyKey stores the answer of a reserved key.
	CompleteIdempotencyKey(ctx context.Context, orgID, scope, key string, status int, body []byte) error
	// ReleaseIdempotencyKey forgets a key (the request failed; a retry may run).
	ReleaseIdempotencyKey(ctx context.Context, orgID, scope, key string) error
}
