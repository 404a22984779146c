// Package assembly builds stepgraph's services from the adapters a
// composition root chose. It is the one place the use cases are tied to
// each other (runs serve deployed graphs, deployments publish them, both
// through the deployed-graphs host), so the local server
// (cmd/stepgraph), the AWS functions (internal/lambdaapp) and the API test
// harness run the same wiring and differ only in their adapters and
// options. It picks no adapter itself: it imports ports and use cases only.
package assembly

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/stepgraph/stepgraph/internal/agentauth"
	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/calltoken"
	"github.com/stepgraph/stepgraph/internal/crons"
	"github.com/stepgraph/stepgraph/internal/deployedgraphs"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/sources"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/storeapi"
	"github.com/stepgraph/stepgraph/internal/webhooks"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Adapters are the implementations of the ports, chosen by a root.
type Adapters struct {
	// Store keeps every record (SQLite locally, DynamoDB on AWS). Required.
	Store store.Store
	// RunStore, when set, replaces Store under the runs service (the AWS
	// run worker's fault injection wraps it).
	RunStore runs.Store
	// Events keeps the events of resumable run streams (the SQLite store
	// locally); nil: runs asking for stream_resumable are refused.
	Events store.Events
	// Secrets keeps secret values. Required.
	Secrets secrets.Store
	// Sources reads hosted repositories (internal/sources/git). Required.
	Sources sources.Checker
	// Provisioner makes the scheduler of the deployments' lifecycles, given
	// the use case it schedules (internal/dispatch/local or sfn). Nil: new
	// revisions stay CREATING (an AWS function that provisions nothing).
	Provisioner func(*deployments.Service) deployments.Provisioner
	// Dispatcher starts runs elsewhere (internal/dispatch/sfn); nil runs
	// them on the in-process workers of runs.Service.StartWorkers.
	Dispatcher runs.Dispatcher
	// Runtimes makes the runtimes of deployments given as an image
	// (internal/lambdaruntime); nil: such a deployment has no runtime.
	Runtimes deployments.RuntimeProvisioner
	// AppBuilder builds hosted_repo LangGraph apps' Lambda zips where the
	// server does not run them itself (on AWS: internal/codebuild); nil
	// when there is none.
	AppBuilder deployments.AppBuilder
	// LangGraphApps runs the LangGraph Python apps of hosted_repo
	// deployments on this machine (internal/pyapp); nil: off, and such a
	// revision fails saying so. The root sets its Store once assembled.
	LangGraphApps *pyapp.Apps
	// AppFunctions serves the LangGraph apps whose runtimes are Lambda
	// functions made from their builds (AppBuilder; pyapp.LambdaApps); nil
	// on a server without AWS.
	AppFunctions *pyapp.LambdaApps
	// LambdaRuntimes reaches runtimes that are Lambda functions
	// (lambdaruntime.Runtimes); nil on a server without AWS.
	LambdaRuntimes func(functionARN string, maxBytes int64) graphdoc.Runtime
	// CronScheduler keeps one schedule per cron outside the process
	// (EventBridge Scheduler on AWS); nil: the root runs the in-process
	// scheduler (crons.Service.RunScheduler).
	CronScheduler crons.Scheduler
	// Outbound makes every outbound call of deployed graphs and deployments
	// (models, tools, runtimes): pass weburl.GuardedClient. Required.
	Outbound *http.Client
	// AgentAuth stores agent-auth attempts and token records (the SQLite
	// store locally); nil: no agent auth (its routes answer 404).
	AgentAuth store.AgentAuth
	// Vault keeps agent-auth token values; Secrets when nil.
	Vault secrets.Store
	// Items keeps the long-term memory store's items; nil: Store's, when
	// it implements them (both adapters do).
	Items storeapi.Store
	// Embedder embeds the store's items for semantic search
	// (storeapi.OpenAIEmbeddings on the operator's endpoint); nil: none.
	Embedder storeapi.Embedder
}

// Options are the root's settings of the services.
type Options struct {
	Log *slog.Logger // slog.Default when nil
	// AllowHTTPLoopback accepts plain-http URLs on loopback addresses for
	// providers and a deployment's custom_url (the local server).
	AllowHTTPLoopback bool
	// GraphsAllowLoopbackHTTP lets graph documents call http:// URLs on
	// loopback hosts (with an Outbound client that allows them).
	GraphsAllowLoopbackHTTP bool
	// WebhooksAllowPrivate lets webhooks reach private addresses.
	WebhooksAllowPrivate bool
	// WebhookBackoff is the first retry wait of a webhook (its default when 0).
	WebhookBackoff time.Duration
	// LeaseDuration and PollInterval of the runs service (its defaults when 0).
	LeaseDuration time.Duration
	PollInterval  time.Duration
	// MaxRunningPerOrg of the runs service: 0, its default; negative, no cap.
	MaxRunningPerOrg int
	// Limits bound runs and organizations' storage (runs.Limits: the
	// defaults when zero, quotas off); RunTimeout ends a run with status
	// timeout (1 h when 0). The one place they reach the services: the runs
	// service enforces them, the deployed graphs refuse documents whose
	// subgraphs nest deeper than runs may.
	Limits     runs.Limits
	RunTimeout time.Duration
	// CronLimits bound the crons of an organization (their defaults when
	// zero).
	CronLimits crons.Limits
	// PublicURL is this server's address as a user's browser reaches it:
	// agent auth's redirect URIs are PublicURL/v2/auth/callback/{provider}.
	PublicURL string
	// Store are the long-term memory store's settings (index fields,
	// default TTL, limits; its quota is Limits.MaxStoredBytes).
	Store StoreOptions
}

// StoreOptions are the settings of the long-term memory store (storeapi).
type StoreOptions struct {
	IndexFields []string
	DefaultTTL  time.Duration
	Limits      storeapi.Limits
	// SweepOnWrite: writes sweep expired items (roots without workers).
	SweepOnWrite bool
}

// Services are the use cases, tied together.
type Services struct {
	Keys        *auth.Keys
	Providers   *providers.Service
	Deployments *deployments.Service
	Runs        *runs.Service
	Crons       *crons.Service
	Webhooks    *webhooks.Sender
	Graphs      *deployedgraphs.Host
	// AgentAuth is nil without Adapters.AgentAuth.
	AgentAuth *agentauth.Service
	// Store is the long-term memory store; nil when the adapters keep no
	// items.
	Store *storeapi.Service
	// Provisioner is the deployments' scheduler Adapters.Provisioner made
	// (nil without one).
	Provisioner deployments.Provisioner
	// CallTokens sign and verify the tokens of LangGraph apps' run calls
	// that reach the stage's API (/runtime/...), under each organization's
	// key of a generation, kept in the secrets port.
	CallTokens *calltoken.Signer

	log            *slog.Logger
	idempotency    store.Idempotency
	requestHashKey *auth.OrgKey
	// events is the event log (nil without one): the mailboxes of the
	// calls' posted events.
	events store.Events
}

// Assemble builds the services on a.
func Assemble(a Adapters, o Options) *Services {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	runStore := a.RunStore
	if runStore == nil {
		runStore = a.Store
	}
	// Tenants read a summary of a failed outbound call (weburl.CallFailure);
	// the operator's log gets the whole error.
	if a.Outbound != nil {
		a.Outbound = weburl.LogFailures(a.Outbound, log)
	}
	s := &Services{log: log, idempotency: a.Store, events: a.Events, Keys: &auth.Keys{Store: a.Store},
		requestHashKey: &auth.OrgKey{Store: a.Store, Secrets: a.Secrets, Name: "idempotency_hash"}}
	s.Providers = &providers.Service{Store: a.Store, Secrets: a.Secrets, AllowHTTPLoopback: o.AllowHTTPLoopback}
	s.Webhooks = &webhooks.Sender{Keys: &webhooks.OrgKeys{Store: a.Store, Secrets: a.Secrets}, Log: log,
		AllowPrivate: o.WebhooksAllowPrivate, Backoff: o.WebhookBackoff}
	s.Deployments = &deployments.Service{Store: a.Store, Secrets: a.Secrets, Sources: a.Sources, HTTPClient: a.Outbound,
		Runtimes: a.Runtimes, Builder: a.AppBuilder, AllowHTTPLoopback: o.AllowHTTPLoopback}
	s.Runs = &runs.Service{Store: runStore, Events: a.Events, Graphs: graph.NewRegistry(), Dispatcher: a.Dispatcher,
		LeaseDuration: o.LeaseDuration, PollInterval: o.PollInterval, Webhooks: s.Webhooks,
		MaxRunningPerOrg: o.MaxRunningPerOrg, Limits: o.Limits, RunTimeout: o.RunTimeout}
	// Runs resolve deployed graphs through the host, deployments publish
	// to it, and the host reads revisions from deployments and makes
	// default assistants through runs: the one cycle of the use cases.
	s.Graphs = &deployedgraphs.Host{Source: s.Deployments, Secrets: a.Secrets, Assistants: s.Runs,
		Builtins: s.Runs.Graphs.Names, HTTPClient: a.Outbound, AllowLoopbackHTTP: o.GraphsAllowLoopbackHTTP,
		Lambda: a.LambdaRuntimes, MaxSubgraphDepth: o.Limits.Graph().MaxSubgraphDepth}
	s.Runs.Deployed, s.Deployments.Graphs = s.Graphs, s.Graphs
	if a.AppFunctions != nil {
		s.Graphs.Apps = a.AppFunctions
	}
	// external_docker runtimes that are LangGraph apps answer at their
	// runtime URL: over the guarded client, or through Lambda on AWS.
	s.Graphs.ExternalApps = &pyapp.RuntimeApps{HTTP: a.Outbound, Lambda: a.AppFunctions}
	if a.LangGraphApps != nil {
		s.Deployments.Apps, s.Graphs.Apps = a.LangGraphApps, a.LangGraphApps
	}
	// A cron's firings are runs of the runs service: no other way to make one.
	s.Crons = &crons.Service{Store: a.Store, Runs: s.Runs, Scheduler: a.CronScheduler, Limits: o.CronLimits, Log: log}
	if a.AgentAuth != nil {
		vault := a.Vault
		if vault == nil {
			vault = a.Secrets
		}
		stateKey := &auth.OrgKey{Store: a.Store, Secrets: a.Secrets, Name: "agentauth_pkce"}
		s.AgentAuth = &agentauth.Service{Store: a.AgentAuth, Providers: s.Providers, Vault: vault,
			StateKey: stateKey.Get, HTTPClient: a.Outbound, CallbackBase: o.PublicURL, Log: log}
		s.Providers.BeforeDelete = s.AgentAuth.DeleteProviderTokens
		aa := s.AgentAuth
		s.Graphs.Tokens = func(orgID string) graphdoc.Tokens { return aa.ForOrg(orgID) }
	}
	items := a.Items
	if items == nil {
		items, _ = a.Store.(storeapi.Store)
	}
	if items != nil {
		limits := o.Store.Limits
		limits.MaxStoredBytes = o.Limits.MaxStoredBytes
		s.Store = &storeapi.Service{Store: items, Limits: limits, Embedder: a.Embedder,
			IndexFields: o.Store.IndexFields, DefaultTTL: o.Store.DefaultTTL, SweepOnWrite: o.Store.SweepOnWrite}
	}
	if s.Store != nil {
		// A deployment's graphs reach its organization's store.
		s.Graphs.Store = func(orgID string) graphdoc.Store { return s.Store.ForOrg(orgID) }
	}
	s.CallTokens = &calltoken.Signer{Keys: (&callKeys{store: a.Store, secrets: a.Secrets}).get}
	if a.Provisioner != nil {
		s.Provisioner = a.Provisioner(s.Deployments)
		s.Deployments.Provisioner = s.Provisioner
	}
	return s
}

// APIConfig is the configuration of the HTTP API on s; the root adds its
// own limits (body size, rate limit, version) before api.New.
func (s *Services) APIConfig() api.Config {
	return api.Config{
		Logger:      s.log,
		Keys:        s.Keys,
		Providers:   s.Providers,
		Deployments: s.Deployments,
		Runs:        s.Runs,
		Crons:       s.Crons,
		AgentAuth:   s.AgentAuth,
		Store:       s.Store,
		Idempotency: s.idempotency,
		// Request hashes are keyed per organization (see api.bodyHash).
		RequestHashKey: s.requestHashKey.Get,
		AppCalls:       s.appCalls(),
	}
}

// appCalls serves LangGraph apps' run calls through the stage's API: the
// graphs' store and provider tokens, as the loopback bridge serves them.
func (s *Services) appCalls() *api.AppCalls {
	budgets, ok := s.idempotency.(store.CallBudgets)
	if !ok {
		return nil
	}
	routes := &pyapp.CallRoutes{Log: s.log}
	if s.Store != nil {
		routes.Store = s.Store
	}
	if s.AgentAuth != nil {
		routes.Auth = s.AgentAuth
	}
	return &api.AppCalls{Tokens: s.CallTokens, Budgets: budgets, Routes: routes, Events: s.events}
}

// callKeys are the organizations' keys of call tokens, one per generation
// (calltoken.KeyName) in the secrets port, each created by the first
// signer.
type callKeys struct {
	store   store.Organizations
	secrets secrets.Store
	byGen   sync.Map // generation → *auth.OrgKey
	known   sync.Map // "<org>/<generation>" of the keys found (read once)
}

func (k *callKeys) get(ctx context.Context, orgID string, generation int64, create bool) ([]byte, error) {
	v, _ := k.byGen.LoadOrStore(generation, &auth.OrgKey{Store: k.store, Secrets: k.secrets, Name: calltoken.KeyName(generation)})
	key := v.(*auth.OrgKey)
	known := orgID + "/" + key.Name
	if _, ok := k.known.Load(known); !ok && !create {
		if _, err := k.store.OrganizationSecretRef(ctx, orgID, key.Name); errors.Is(err, store.ErrNotFound) {
			return nil, calltoken.ErrNoKey
		} else if err != nil {
			return nil, err
		}
	}
	v2, err := key.Get(ctx, orgID)
	if err == nil {
		k.known.Store(known, true)
	}
	return v2, err
}
