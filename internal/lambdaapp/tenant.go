package lambdaapp

import (
	"container/list"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/stepgraph/stepgraph/internal/secrets/kmsvault"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// Tenant sessions (review #9; docs/aws.md, "Tenant sessions"). The run
// worker interprets tenant-authored graphs, so it executes a run's tenant
// work — its DynamoDB items, its secrets, its vault values — with
// credentials of the tenant role (EnvTenantRoleARN) assumed with the
// session tag org=<the run's organization>: IAM then holds every such
// request to that organization's keys (Grants.Tenant), whatever the graph
// makes the worker do. The seam is the context: HandleRunTask scopes it to
// the run's organization (WithTenant), and one middleware on every client
// decides per request which credentials sign it:
//
//   - every key the request reaches is the organization's (the tenant
//     patterns, as IAM evaluates them): the organization's session;
//   - it reaches stage-wide keys (StageKeys: run markers, temporary
//     results, authorization state markers, the expiry index) or another
//     service (S3 payloads, Step Functions, runtimes): the worker's own
//     role — for a transaction mixing both as well, since the tenant role
//     cannot reach the stage-wide item;
//   - it reaches another organization's key: refused here, before any
//     call (IAM would refuse it too).
//
// The local server and the core packages know nothing of this: an
// unscoped context, or a worker without a tenant role, signs everything
// with the function's own role.

type tenantKey struct{}
type signAsKey struct{}

// WithTenant scopes ctx to orgID's work ("" : unscoped).
func WithTenant(ctx context.Context, orgID string) context.Context {
	return context.WithValue(ctx, tenantKey{}, orgID)
}

func tenantOf(ctx context.Context) string {
	org, _ := ctx.Value(tenantKey{}).(string)
	return org
}

// stageContext is ctx unscoped: stage-wide maintenance within a step
// (runs.Service.StageContext).
func stageContext(ctx context.Context) context.Context { return WithTenant(ctx, "") }

// StageKeys are the partition keys the run worker reaches that belong to
// no one organization, by table (IAM's StringLike): they stay on its own
// role. Queries of an index are stage-wide too (the expiry sweep).
var StageKeys = map[string][]string{
	// A run's marker (its id → its thread) and a temporary run's result,
	// found by the run id alone.
	dynamo.TableThreads: {"RUNID#*", "TRES#*"},
	// An authorization's state marker, found by the state alone.
	dynamo.TableProviders: {"agentauth-state#*"},
}

// stageSecretKinds are the secret kinds named after no organization.
var stageSecretKinds = []string{SecretDeployments, SecretStore}

// TenantSessionTTL is how long an assumed session lasts (STS's minimum);
// a session is renewed tenantRenewBefore its expiry.
const (
	TenantSessionTTL  = 15 * time.Minute
	tenantRenewBefore = 2 * time.Minute
	// tenantSessionsCached bounds the organizations whose sessions an
	// instance keeps (least recently used go first).
	tenantSessionsCached = 256
)

// tenantSessions is the credentials provider of a run worker with a
// tenant role: the organization a request is signed for (signAsKey) gets
// its session, anything else the base credentials.
type tenantSessions struct {
	base   aws.CredentialsProvider
	assume func(orgID string) aws.CredentialsProvider
	max    int

	mu   sync.Mutex
	lru  *list.List // of *tenantSession, most recent first
	orgs map[string]*list.Element
}

type tenantSession struct {
	org   string
	creds aws.CredentialsProvider
}

func newTenantSessions(base aws.CredentialsProvider, client *sts.Client, roleARN string) *tenantSessions {
	lru, orgs := newLRU()
	return &tenantSessions{base: base, max: tenantSessionsCached, lru: lru, orgs: orgs,
		assume: func(org string) aws.CredentialsProvider {
			return aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(client, roleARN, func(o *stscreds.AssumeRoleOptions) {
				o.RoleSessionName = "stepgraph-" + org
				o.Duration = TenantSessionTTL
				o.Tags = []ststypes.Tag{{Key: aws.String(OrgTag), Value: aws.String(org)}}
			}), func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = tenantRenewBefore })
		}}
}

func newLRU() (*list.List, map[string]*list.Element) { return list.New(), map[string]*list.Element{} }

// Retrieve implements aws.CredentialsProvider.
func (t *tenantSessions) Retrieve(ctx context.Context) (aws.Credentials, error) {
	org, _ := ctx.Value(signAsKey{}).(string)
	if org == "" {
		return t.base.Retrieve(ctx)
	}
	return t.session(org).Retrieve(ctx)
}

func (t *tenantSessions) session(org string) aws.CredentialsProvider {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.orgs[org]; ok {
		t.lru.MoveToFront(e)
		return e.Value.(*tenantSession).creds
	}
	s := &tenantSession{org: org, creds: t.assume(org)}
	t.orgs[org] = t.lru.PushFront(s)
	for t.lru.Len() > t.max {
		oldest := t.lru.Back()
		t.lru.Remove(oldest)
		delete(t.orgs, oldest.Value.(*tenantSession).org)
	}
	return s.creds
}

// tenantRules classify what a request reaches for one organization.
type tenantRules struct {
	tablePrefix, secretsPrefix string
	grants                     *TenantGrants
}

type reach int

const (
	reachStage reach = iota
	reachTenant
	reachForeign
)

// request is what in reaches for org: reachTenant when every key is the
// organization's, reachForeign (with the key) when one is another's or of
// no known kind, else reachStage (the base role's).
func (r tenantRules) request(in any, org string) (reach, string) {
	tenant, stage := 0, 0
	for _, k := range r.keysOf(in) {
		switch got := r.key(k, org); got {
		case reachForeign:
			return reachForeign, k.String()
		case reachTenant:
			tenant++
		default:
			stage++
		}
	}
	if tenant > 0 && stage == 0 {
		return reachTenant, ""
	}
	return reachStage, ""
}

// reached is one key a request reaches: a table's partition (index: a
// query of an index), a secret's name, a vault value's context.
type reached struct {
	kind, table, key string
	index            bool
}

func (k reached) String() string { return strings.TrimSpace(k.kind + " " + k.table + " " + k.key) }

func (r tenantRules) key(k reached, org string) reach {
	switch k.kind {
	case "dynamodb":
		if k.index {
			return reachStage
		}
		for _, p := range r.grants.Tables[k.table].LeadingKeys {
			if stringLike(strings.ReplaceAll(p, OrgPlaceholder, org), k.key) {
				return reachTenant
			}
		}
		for _, p := range StageKeys[k.table] {
			if stringLike(p, k.key) {
				return reachStage
			}
		}
	case "secret":
		kind, rest, _ := strings.Cut(k.key, "/")
		if _, ok := r.grants.Secrets[kind]; ok && strings.HasPrefix(rest, org+"/") {
			return reachTenant
		}
		for _, s := range stageSecretKinds {
			if kind == s {
				return reachStage
			}
		}
	case "vault":
		if strings.HasPrefix(k.key, "agentauth/"+org+"/") {
			return reachTenant
		}
	}
	return reachForeign
}

// keysOf lists what a call reaches; calls of other services reach nothing
// a tenant session has (they stay on the base role).
func (r tenantRules) keysOf(in any) []reached {
	table := func(name *string) string { return strings.TrimPrefix(aws.ToString(name), r.tablePrefix) }
	item := func(name *string, key map[string]ddbtypes.AttributeValue) reached {
		return reached{kind: "dynamodb", table: table(name), key: stringValue(key["pk"])}
	}
	secret := func(id *string) []reached {
		return []reached{{kind: "secret", key: strings.TrimPrefix(aws.ToString(id), r.secretsPrefix)}}
	}
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		return []reached{item(in.TableName, in.Key)}
	case *dynamodb.PutItemInput:
		return []reached{item(in.TableName, in.Item)}
	case *dynamodb.UpdateItemInput:
		return []reached{item(in.TableName, in.Key)}
	case *dynamodb.DeleteItemInput:
		return []reached{item(in.TableName, in.Key)}
	case *dynamodb.QueryInput:
		return []reached{{kind: "dynamodb", table: table(in.TableName), key: queryPartition(in), index: in.IndexName != nil}}
	case *dynamodb.BatchGetItemInput:
		var out []reached
		for name, ka := range in.RequestItems {
			for _, key := range ka.Keys {
				out = append(out, item(aws.String(name), key))
			}
		}
		return out
	case *dynamodb.BatchWriteItemInput:
		var out []reached
		for name, reqs := range in.RequestItems {
			for _, w := range reqs {
				switch {
				case w.PutRequest != nil:
					out = append(out, item(aws.String(name), w.PutRequest.Item))
				case w.DeleteRequest != nil:
					out = append(out, item(aws.String(name), w.DeleteRequest.Key))
				}
			}
		}
		return out
	case *dynamodb.TransactWriteItemsInput:
		var out []reached
		for _, it := range in.TransactItems {
			switch {
			case it.ConditionCheck != nil:
				out = append(out, item(it.ConditionCheck.TableName, it.ConditionCheck.Key))
			case it.Put != nil:
				out = append(out, item(it.Put.TableName, it.Put.Item))
			case it.Update != nil:
				out = append(out, item(it.Update.TableName, it.Update.Key))
			case it.Delete != nil:
				out = append(out, item(it.Delete.TableName, it.Delete.Key))
			}
		}
		return out
	case *secretsmanager.GetSecretValueInput:
		return secret(in.SecretId)
	case *secretsmanager.CreateSecretInput:
		return secret(in.Name)
	case *secretsmanager.PutSecretValueInput:
		return secret(in.SecretId)
	case *secretsmanager.UpdateSecretVersionStageInput:
		return secret(in.SecretId)
	case *secretsmanager.DeleteSecretInput:
		return secret(in.SecretId)
	case *kms.GenerateDataKeyInput:
		return []reached{{kind: "vault", key: in.EncryptionContext[kmsvault.ContextKey]}}
	case *kms.DecryptInput:
		return []reached{{kind: "vault", key: in.EncryptionContext[kmsvault.ContextKey]}}
	}
	return nil
}

func stringValue(v ddbtypes.AttributeValue) string {
	if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

var partitionCondition = regexp.MustCompile(`^\s*(#?\w+)\s*=\s*(:\w+)`)

// queryPartition is the partition key value of a query ("pk = :pk AND …").
func queryPartition(in *dynamodb.QueryInput) string {
	m := partitionCondition.FindStringSubmatch(aws.ToString(in.KeyConditionExpression))
	if m == nil {
		return ""
	}
	return stringValue(in.ExpressionAttributeValues[m[2]])
}

// stringLike is IAM's StringLike: * any run of characters, ? one.
func stringLike(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if stringLike(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && stringLike(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && stringLike(pattern[1:], s[1:])
}

// ForeignKeyError is a request of a tenant session for what is not its
// organization's: refused before it is sent.
type ForeignKeyError struct{ Org, Key string }

func (e *ForeignKeyError) Error() string {
	return fmt.Sprintf("the run of organization %s may not reach %s (tenant session)", e.Org, e.Key)
}

// scope is the middleware that marks each request of a scoped context
// with the organization whose session signs it.
func (r tenantRules) scope(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("stepgraph-tenant-session",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			ctx = context.WithValue(ctx, signAsKey{}, "")
			if org := tenantOf(ctx); org != "" {
				switch got, key := r.request(in.Parameters, org); got {
				case reachForeign:
					return middleware.InitializeOutput{}, middleware.Metadata{}, &ForeignKeyError{Org: org, Key: key}
				case reachTenant:
					ctx = context.WithValue(ctx, signAsKey{}, org)
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// withTenantSessions is awsCfg with the tenant sessions of the run worker
// of cfg: its credentials switch per request, and STS is called with the
// base credentials.
func withTenantSessions(cfg Config, awsCfg aws.Config) aws.Config {
	f, _ := FunctionNamed("run-worker")
	rules := tenantRules{tablePrefix: cfg.TablePrefix, secretsPrefix: cfg.SecretsPrefix, grants: f.Grants.Tenant}
	out := awsCfg.Copy()
	out.Credentials = newTenantSessions(awsCfg.Credentials, sts.NewFromConfig(awsCfg), cfg.TenantRoleARN)
	out.APIOptions = append(append([]func(*middleware.Stack) error(nil), awsCfg.APIOptions...), rules.scope)
	return out
}
