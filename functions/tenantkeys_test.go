package functions_test

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/secrets/kmsvault"
)

// touched is one resource a call reached: a DynamoDB partition (its table
// without the stage's prefix, the index when a query read one, and the
// partition key's value: what dynamodb:LeadingKeys is evaluated on), an
// S3 object or prefix of the payload bucket, or a secret (its name without
// the prefix).
type touched struct {
	Service  string // "dynamodb", "s3", "secret"
	Resource string // the table (and "/index/<name>"), or "" for S3 and secrets
	Key      string // the partition key, the object key or prefix, the secret's name
}

// touchedKeys records every resource the calls of one function reach, as
// sent (a call that fails reached it all the same), and the access key id
// each call was signed with.
type touchedKeys struct {
	mu   sync.Mutex
	reqs []*request
}

// request is one call: what it reached, and who signed it.
type request struct {
	reached []touched
	needs   []string
	example string
	mu      sync.Mutex
	akid    string
}

type requestKey struct{}

// add records a call and returns ctx carrying its record, for signedWith.
func (k *touchedKeys) add(ctx context.Context, prefix string, in any, needs []string) context.Context {
	r := &request{reached: resourcesOf(prefix, in), needs: needs, example: fmt.Sprintf("%T", in)}
	k.mu.Lock()
	k.reqs = append(k.reqs, r)
	k.mu.Unlock()
	return context.WithValue(ctx, requestKey{}, r)
}

// signedWith records the access key id of a signed request
// ("Credential=<akid>/..." of its Authorization header); a retried call
// keeps its last.
func signedWith(ctx context.Context, req any) {
	r, _ := ctx.Value(requestKey{}).(*request)
	hr, ok := req.(*smithyhttp.Request)
	if r == nil || !ok {
		return
	}
	_, cred, found := strings.Cut(hr.Header.Get("Authorization"), "Credential=")
	if !found {
		return
	}
	akid, _, _ := strings.Cut(cred, "/")
	r.mu.Lock()
	r.akid = akid
	r.mu.Unlock()
}

func (k *touchedKeys) requests() []*request {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*request(nil), k.reqs...)
}

func (k *touchedKeys) list() []touched {
	var out []touched
	for _, r := range k.requests() {
		out = append(out, r.reached...)
	}
	return out
}

// resourcesOf is what one call reaches: for DynamoDB the partition key of
// each item (a transaction's and a batch's every item, as IAM authorizes
// each) or the queried partition.
func resourcesOf(prefix string, in any) []touched {
	table := func(name *string) string { return strings.TrimPrefix(aws.ToString(name), prefix) }
	item := func(name *string, key map[string]ddbtypes.AttributeValue) touched {
		return touched{"dynamodb", table(name), stringAttr(key["pk"])}
	}
	secret := func(id *string) []touched {
		return []touched{{"secret", "", strings.TrimPrefix(aws.ToString(id), prefix)}}
	}
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		return []touched{item(in.TableName, in.Key)}
	case *dynamodb.PutItemInput:
		return []touched{item(in.TableName, in.Item)}
	case *dynamodb.UpdateItemInput:
		return []touched{item(in.TableName, in.Key)}
	case *dynamodb.DeleteItemInput:
		return []touched{item(in.TableName, in.Key)}
	case *dynamodb.QueryInput:
		res := table(in.TableName)
		if in.IndexName != nil {
			res += "/index/" + aws.ToString(in.IndexName)
		}
		return []touched{{"dynamodb", res, queriedPartition(in)}}
	case *dynamodb.BatchGetItemInput:
		var out []touched
		for name, ka := range in.RequestItems {
			for _, key := range ka.Keys {
				out = append(out, item(aws.String(name), key))
			}
		}
		return out
	case *dynamodb.BatchWriteItemInput:
		var out []touched
		for name, reqs := range in.RequestItems {
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					out = append(out, item(aws.String(name), r.PutRequest.Item))
				case r.DeleteRequest != nil:
					out = append(out, item(aws.String(name), r.DeleteRequest.Key))
				}
			}
		}
		return out
	case *dynamodb.TransactWriteItemsInput:
		var out []touched
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
	case *s3.GetObjectInput:
		return []touched{{"s3", "", aws.ToString(in.Key)}}
	case *s3.PutObjectInput:
		return []touched{{"s3", "", aws.ToString(in.Key)}}
	case *s3.ListObjectsV2Input:
		return []touched{{"s3", "", aws.ToString(in.Prefix)}}
	case *s3.DeleteObjectsInput:
		var out []touched
		if in.Delete != nil {
			for _, o := range in.Delete.Objects {
				out = append(out, touched{"s3", "", aws.ToString(o.Key)})
			}
		}
		return out
	case *kms.GenerateDataKeyInput:
		return []touched{{"vault", "", in.EncryptionContext[kmsvault.ContextKey]}}
	case *kms.DecryptInput:
		return []touched{{"vault", "", in.EncryptionContext[kmsvault.ContextKey]}}
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
	}
	return nil
}

func stringAttr(v ddbtypes.AttributeValue) string {
	if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

var keyCondition = regexp.MustCompile(`^\s*(#?\w+)\s*=\s*(:\w+)`)

// queriedPartition is the value of the partition key a query's key
// condition names ("pk = :pk AND …").
func queriedPartition(in *dynamodb.QueryInput) string {
	m := keyCondition.FindStringSubmatch(aws.ToString(in.KeyConditionExpression))
	if m == nil {
		return ""
	}
	return stringAttr(in.ExpressionAttributeValues[m[2]])
}

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hexPattern  = regexp.MustCompile(`[0-9a-f]{16,}`)
)

// shape is k with the organization's id as <org>, other ids as <id> and
// digests as <hex>: the kinds of key a function touches.
func (k touched) shape(orgID string) string {
	key := strings.ReplaceAll(k.Key, orgID, "<org>")
	key = uuidPattern.ReplaceAllString(key, "<id>")
	key = hexPattern.ReplaceAllString(key, "<hex>")
	return strings.TrimSpace(k.Service + " " + k.Resource + " " + key)
}

// shapes lists the distinct shapes of keys, sorted.
func shapes(all []touched, orgID string) []string {
	seen := map[string]bool{}
	for _, k := range all {
		seen[k.shape(orgID)] = true
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// stageWide are the keys the run worker touches that do not start with
// its organization's id, and why each stays on the worker's own role
// rather than in its tenant session (lambdaapp.TenantGrants; docs/aws.md,
// "Tenant sessions"). Patterns are IAM's StringLike.
var stageWide = []struct{ service, resource, pattern, why string }{
	{"dynamodb", "threads", "RUNID#*", "a run's marker, keyed by its id alone: the step task names only the run, and the marker says whose it is"},
	{"dynamodb", "threads", "TRES#*", "a temporary run's result, keyed by the run id, which its waiter reads knowing only the run"},
	{"dynamodb", "threads/index/lease", "X", "the sweep of threads past their time to live reads the expiry partition of every organization"},
	{"dynamodb", "providers", "agentauth-state#*", "an authorization's state marker, keyed by the state's digest: the callback knows only the state"},
	{"s3", "", "*", "payload keys are <class>/<table>/<digest of the partition key>/…: no organization in them"},
	{"secret", "", "deployments/*", "a deployment's secret values are grouped by deployment id: the name holds no organization"},
}

// stringLike is IAM's StringLike: * any run of characters, ? one.
func stringLike(pattern, s string) bool {
	var re strings.Builder
	re.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(s)
}

// orgPatterns are tenant's leading-key patterns of table for orgID.
func orgPatterns(tenant *lambdaapp.TenantGrants, table, orgID string) []string {
	var out []string
	for _, p := range tenant.Tables[table].LeadingKeys {
		out = append(out, strings.ReplaceAll(p, lambdaapp.OrgPlaceholder, orgID))
	}
	return out
}

// classify says whether k belongs to orgID's tenant session (the pattern
// it matched), is one of the stage-wide keys (stage true), or neither.
func classify(k touched, tenant *lambdaapp.TenantGrants, orgID string) (pattern string, stage bool) {
	switch k.Service {
	case "dynamodb":
		for i, p := range orgPatterns(tenant, k.Resource, orgID) {
			if stringLike(p, k.Key) {
				return tenant.Tables[k.Resource].LeadingKeys[i], false
			}
		}
	case "vault":
		// Sealed under the context agentauth/<org>/... (kmsvault).
		if strings.HasPrefix(k.Key, "agentauth/"+orgID+"/") {
			return "vault", false
		}
	case "secret":
		// Tagged org=<org> (internal/secrets/aws): <kind>/<org>/….
		kind, rest, _ := strings.Cut(k.Key, "/")
		if _, ok := tenant.Secrets[kind]; ok && strings.HasPrefix(rest, orgID+"/") {
			return "secret " + kind, false
		}
	}
	for _, s := range stageWide {
		if s.service == k.Service && s.resource == k.Resource && stringLike(s.pattern, k.Key) {
			return "", true
		}
	}
	return "", false
}

// checkTenantKeys fails on a key the run worker touched that is neither
// its organization's (the tenant session's patterns) nor a listed
// stage-wide one, and on a tenant pattern no key used (a grant wider
// than the work).
func checkTenantKeys(t *testing.T, all []touched, orgIDs ...string) {
	t.Helper()
	f, _ := lambdaapp.FunctionNamed("run-worker")
	tenant := f.Grants.Tenant
	if tenant == nil {
		t.Fatal("the run worker has no tenant grants")
	}
	used := map[string]bool{}
	for _, k := range all {
		pattern, stage := "", false
		for _, org := range orgIDs {
			if pattern, stage = classify(k, tenant, org); pattern != "" || stage {
				break
			}
		}
		if pattern == "" && !stage {
			t.Errorf("the run worker touched %s: neither a key of an organization's (lambdaapp runWorkerTenant) nor a stage-wide one (stageWide)", k.shape(orgIDs[0]))
		}
		used[k.Resource+" "+pattern] = true
	}
	for table, tt := range tenant.Tables {
		for _, p := range tt.LeadingKeys {
			if !used[table+" "+p] {
				t.Errorf("tenant grant %s %s was not used by the run worker", table, p)
			}
		}
	}
	for kind := range tenant.Secrets {
		if !used[" secret "+kind] {
			t.Errorf("tenant secrets %s were not read by the run worker", kind)
		}
	}
}

// The classification refuses another organization's keys and keys of no
// listed kind (what makes checkTenantKeys able to fail).
func TestTenantKeyClassification(t *testing.T) {
	f, _ := lambdaapp.FunctionNamed("run-worker")
	org, other := "0b0e0f3c-8d6a-4a53-9e1f-1c2d3e4f5a6b", "7c9d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
	for _, c := range []struct {
		k            touched
		tenant, wide bool
	}{
		{touched{"dynamodb", "threads", "T#" + org + "#th1"}, true, false},
		{touched{"dynamodb", "threads", "T#" + other + "#th1"}, false, false},
		{touched{"dynamodb", "threads", "SLOTS#" + org + "x"}, false, false},
		{touched{"dynamodb", "assistants", org}, true, false},
		{touched{"dynamodb", "assistants", other}, false, false},
		{touched{"dynamodb", "threads", "RUNID#r1"}, false, true},
		{touched{"dynamodb", "organizations", "KEY#abc"}, false, false},
		{touched{"secret", "", "orgs/" + org + "/values.0"}, true, false},
		{touched{"secret", "", "orgs/" + other + "/values.0"}, false, false},
		{touched{"secret", "", "deployments/d1/values.0"}, false, true},
	} {
		pattern, stage := classify(c.k, f.Grants.Tenant, org)
		if (pattern != "") != c.tenant || stage != c.wide {
			t.Errorf("%+v: tenant pattern %q, stage-wide %v; want tenant %v, stage-wide %v", c.k, pattern, stage, c.tenant, c.wide)
		}
	}
}

// mixedRequests are the requests that reach an organization's keys and a
// stage-wide one at once: the tenant role cannot reach the stage-wide
// item, so they are signed with the worker's own role (docs/aws.md,
// "Tenant sessions": what is left).
var mixedRequests = map[string]string{
	"dynamodb threads RUNID#<id> dynamodb threads SLOTS#<org> dynamodb threads T#<org>#<id> dynamodb threads USAGE#<org>": "a temporary run's end deletes its thread with its run's marker",
	"dynamodb providers agentauth-attempt#<org> dynamodb providers agentauth-state#<hex>":                                 "a new authorization attempt with its state marker",
}

// ownerOf is the organization of orgIDs whose keys are all k's ("" when
// none).
func ownerOfKeys(reached []touched, tenant *lambdaapp.TenantGrants, orgIDs []string) string {
	for _, org := range orgIDs {
		all := true
		for _, k := range reached {
			if p, _ := classify(k, tenant, org); p == "" {
				all = false
			}
		}
		if all {
			return org
		}
	}
	return ""
}

// someOrg is the organization of orgIDs with a key among reached ("" when
// none).
func someOrg(reached []touched, tenant *lambdaapp.TenantGrants, orgIDs []string) string {
	for _, k := range reached {
		for _, org := range orgIDs {
			if p, _ := classify(k, tenant, org); p != "" {
				return org
			}
		}
	}
	return ""
}

// checkTenantSessions: during the runs of the organizations orgIDs, every
// request that reaches only one organization's keys is signed with an
// assumed session (not the base access key), one per organization; every
// request signed with an organization's session reaches only that
// organization's keys (its leading keys match that organization's
// patterns) and the secrets it reaches are tagged with it; the requests
// that mix an organization's keys with stage-wide ones are the listed
// ones, on the base key. MiniStack enforces no IAM: this evaluates the
// policy on what was sent.
func checkTenantSessions(t *testing.T, reqs []*request, cfg aws.Config, prefix string, orgIDs ...string) {
	t.Helper()
	f, _ := lambdaapp.FunctionNamed("run-worker")
	tenant := f.Grants.Tenant
	baseCreds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	base := baseCreds.AccessKeyID
	sessionOf := map[string]string{} // access key id → organization
	secretsOf := map[string][]string{}
	for _, r := range reqs {
		r.mu.Lock()
		akid := r.akid
		r.mu.Unlock()
		if len(r.reached) == 0 || akid == "" {
			continue // another service's call (S3, Step Functions, STS), or one never sent
		}
		owner := ownerOfKeys(r.reached, tenant, orgIDs)
		some := someOrg(r.reached, tenant, orgIDs)
		what := strings.Join(shapes(r.reached, some), " ")
		switch {
		case owner != "":
			if akid == base {
				t.Errorf("a request for organization %s's keys only was signed with the base key: %s", owner, what)
				continue
			}
			if prev, ok := sessionOf[akid]; ok && prev != owner {
				t.Errorf("the session of organization %s signed a request for %s's keys: %s", prev, owner, what)
			}
			sessionOf[akid] = owner
			for _, k := range r.reached {
				if k.Service == "secret" {
					secretsOf[owner] = append(secretsOf[owner], k.Key)
				}
			}
		case akid != base:
			t.Errorf("a request signed with a tenant session (%s) reaches what is not one organization's: %s", akid, what)
		case some != "":
			if _, listed := mixedRequests[what]; !listed {
				t.Errorf("a request mixes an organization's keys with stage-wide ones and is not in mixedRequests: %s", what)
			}
		}
	}
	signed := map[string]bool{}
	for _, org := range sessionOf {
		signed[org] = true
	}
	for _, org := range orgIDs {
		if !signed[org] {
			t.Errorf("no request was signed with organization %s's session", org)
		}
	}
	// The secrets a session reached are tagged with its organization.
	sm := secretsmanager.NewFromConfig(cfg)
	for org, names := range secretsOf {
		for _, name := range names {
			out, err := sm.DescribeSecret(context.Background(), &secretsmanager.DescribeSecretInput{SecretId: aws.String(prefix + name)})
			if err != nil {
				t.Errorf("describe %s: %v", name, err)
				continue
			}
			tagged := ""
			for _, tag := range out.Tags {
				if aws.ToString(tag.Key) == lambdaapp.OrgTag {
					tagged = aws.ToString(tag.Value)
				}
			}
			if tagged != org {
				t.Errorf("secret %s, reached in organization %s's session, is tagged org=%q", name, org, tagged)
			}
		}
	}
	if len(secretsOf) == 0 {
		t.Error("no session reached a secret: the webhook keys were not read in a tenant session")
	}
}

// tenantFunctionName is the run worker's tenant session, checked as a
// function of its own against Grants.Tenant.
const tenantFunctionName = "run-worker tenant"

// tenantFunction is the run worker's tenant grants as a function's.
func tenantFunction() lambdaapp.Function {
	f, _ := lambdaapp.FunctionNamed("run-worker")
	g := lambdaapp.Grants{Tables: map[string]string{}, Secrets: f.Grants.Tenant.Secrets, Vault: f.Grants.Tenant.Vault}
	for table, tt := range f.Grants.Tenant.Tables {
		g.Tables[table] = tt.Access
	}
	return lambdaapp.Function{Name: tenantFunctionName, Role: "run-worker", Grants: g}
}

// settleRunWorker files each run-worker call's needs under the role that
// signed it: the worker's own (its base access key, or never signed) or
// its tenant session (tenantFunctionName).
func (c *calls) settleRunWorker(t *testing.T, cfg aws.Config) {
	t.Helper()
	base, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.touched.requests() {
		r.mu.Lock()
		akid := r.akid
		r.mu.Unlock()
		fn := "run-worker"
		if akid != "" && akid != base.AccessKeyID {
			fn = tenantFunctionName
		}
		for _, need := range r.needs {
			c.add(fn, need, r.example)
		}
	}
}
