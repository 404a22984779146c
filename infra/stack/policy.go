package stack

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The vocabulary of Grants (internal/lambdaapp.Grants, functions/routes.json)
// and what each word allows in IAM. A word the stack does not know fails the
// synth: a grant is never dropped, or widened, by a typo.
const (
	AccessRead  = "read"
	AccessWrite = "write"

	RuntimesInvoke = "invoke" // lambda:InvokeFunction on the runtimes
	RuntimesManage = "manage" // create, update, read, delete them; pass their role

	// SchedulesManage: create, update and delete the crons' schedules in
	// the stage's schedule group, and pass the scheduler's role.
	SchedulesManage = "manage"
)

// ScheduleActions are the EventBridge Scheduler actions of SchedulesManage,
// on the schedules of the stage's group.
var ScheduleActions = []string{"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"}

// TableActions are the DynamoDB actions of each access, on the table. The
// adapter's transactions need the action of each item (a ConditionCheck is
// dynamodb:ConditionCheckItem, a Put dynamodb:PutItem); Scan, BatchGetItem
// and DescribeTable are never called. Indexes are only queried:
// dynamodb:Query on <table>/index/*, for tables that have indexes.
var TableActions = map[string][]string{
	AccessRead: {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"},
	AccessWrite: {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem",
		"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"},
}

// SecretKinds are the kinds of secret, each the first segment of the
// secrets' names after the stage's prefix: OAuth client secrets
// (providers/<org>/<provider>-…), deployment secret values
// (deployments/<deployment>-…), organizations' webhook keys
// (orgs/<org>/webhook-â¦), agent-auth token values
// (agentauth/<org>/<provider>-â¦), the operator's store embeddings key
// (store/<name>, created by the operator). A grant is on <prefix><kind>/*.
var SecretKinds = []string{"providers", "deployments", "orgs", "agentauth", "store"}

// SecretActions maps the secret actions to IAM's. The secrets are
// encrypted with the AWS-managed key aws/secretsmanager, which needs no KMS
// statement. The functions keep one secret per owner holding a map of
// values (internal/secrets/aws, Options.Grouped): creating or deleting a
// value reads the map and writes it with compare-and-set (PutSecretValue
// of a new version, UpdateSecretVersionStage moving AWSCURRENT), so both
// need GetSecretValue and the two writes; CreateSecret makes an owner's
// first map (or a value too large for one), DeleteSecret removes a value
// stored one per secret before grouping. TagResource: a secret is created
// with its stage's tag, the teardown's mark (teardown.go), and an
// organization's with org=<its id> (internal/lambdaapp.OrgTags): the run
// worker's tenant sessions read only secrets so tagged (tenant.go).
var SecretActions = map[string][]string{
	"create": {"secretsmanager:CreateSecret", "secretsmanager:TagResource", "secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:UpdateSecretVersionStage"},
	"get":    {"secretsmanager:GetSecretValue"},
	"delete": {"secretsmanager:DeleteSecret", "secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:UpdateSecretVersionStage"},
}

// ExecutionGrant is one Step Functions grant: an action on a state machine
// (or on its executions).
type ExecutionGrant struct {
	Sid, Action, Machine string
	OnExecutions         bool
}

// ExecutionGrants maps the execution words to IAM.
var ExecutionGrants = map[string]ExecutionGrant{
	"start-run": {"StartRun", "states:StartExecution", RunStateMachineName, false},
	// The Express front (express.go); skipped with Props.NoExpressRuns.
	"start-run-express": {"StartRunExpress", "states:StartExecution", RunExpressStateMachineName, false},
	"describe-run":      {"DescribeRun", "states:DescribeExecution", RunStateMachineName, true},
	"start-deploy":      {"StartDeploy", "states:StartExecution", DeployStateMachineName, false},
	"list-deploy":       {"ListDeploy", "states:ListExecutions", DeployStateMachineName, false},
	// A task token names no resource of its own: IAM scopes SendTaskSuccess
	// to the state machine whose task issued it (as CDK's
	// grantTaskResponse does).
	"wake-run": {"WakeRun", "states:SendTaskSuccess", RunStateMachineName, false},
}

// VaultActions maps the vault actions to KMS's on the vault key: a value
// is sealed under a new data key (GenerateDataKey) and opened by unwrapping
// it (Decrypt); deleting one is a DynamoDB delete only.
var VaultActions = map[string]string{
	"create": "kms:GenerateDataKey",
	"get":    "kms:Decrypt",
	"delete": "",
}

// VaultContextKey and VaultContextValues are the KMS encryption context
// every vault data key is made and opened under
// (internal/secrets/kmsvault.ContextKey: the value's hint, agentauth/<org>/
// <provider>/<user digest>): the grants hold only under it, so the key
// opens nothing else even for a function that has it.
const (
	VaultContextKey    = "stepgraph:vault"
	VaultContextValues = "agentauth/*"
)

// checkGrants fails on a word of g the stack does not know, or a table not
// among tables.
func checkGrants(fn string, g Grants, tables []string) error {
	for _, t := range sortedKeys(g.Tables) {
		if !slices.Contains(tables, t) {
			return fmt.Errorf("function %s: grant on table %q, which the stack does not have", fn, t)
		}
		if _, ok := TableActions[g.Tables[t]]; !ok {
			return fmt.Errorf("function %s: table %s: access %q, want %q or %q", fn, t, g.Tables[t], AccessRead, AccessWrite)
		}
	}
	for _, kind := range sortedKeys(g.Secrets) {
		if !slices.Contains(SecretKinds, kind) {
			return fmt.Errorf("function %s: secrets of kind %q, want one of %s", fn, kind, strings.Join(SecretKinds, ", "))
		}
		if len(g.Secrets[kind]) == 0 {
			return fmt.Errorf("function %s: secrets %s: no action", fn, kind)
		}
		for _, a := range g.Secrets[kind] {
			if _, ok := SecretActions[a]; !ok {
				return fmt.Errorf("function %s: secrets %s: action %q, want one of %s", fn, kind, a, strings.Join(sortedKeys(SecretActions), ", "))
			}
		}
	}
	for _, e := range g.Executions {
		if _, ok := ExecutionGrants[e]; !ok {
			return fmt.Errorf("function %s: execution grant %q, want one of %s", fn, e, strings.Join(sortedKeys(ExecutionGrants), ", "))
		}
	}
	for _, r := range g.Runtimes {
		if r != RuntimesInvoke && r != RuntimesManage {
			return fmt.Errorf("function %s: runtimes grant %q, want %q or %q", fn, r, RuntimesInvoke, RuntimesManage)
		}
	}
	for _, b := range g.Builds {
		if b != BuildsStart {
			return fmt.Errorf("function %s: builds grant %q, want %q", fn, b, BuildsStart)
		}
	}
	for _, sc := range g.Schedules {
		if sc != SchedulesManage {
			return fmt.Errorf("function %s: schedules grant %q, want %q", fn, sc, SchedulesManage)
		}
	}
	for _, a := range g.Vault {
		if _, ok := VaultActions[a]; !ok {
			return fmt.Errorf("function %s: vault grant %q, want one of %s", fn, a, strings.Join(sortedKeys(VaultActions), ", "))
		}
	}
	if len(g.Vault) > 0 && g.Tables["providers"] != AccessWrite {
		return fmt.Errorf("function %s: vault grants need write on the providers table, which holds the vault's items", fn)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
