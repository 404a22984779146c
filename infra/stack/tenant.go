package stack

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// TenantGrants is one organization's session of a function
// (internal/lambdaapp.TenantGrants): the run worker executes a run's
// tenant work with credentials of the tenant role, assumed with the
// session tag org=<the run's organization>, and IAM holds that session to
// the organization's own keys, secrets and vault values.
type TenantGrants struct {
	// Tables: table → its access and the partition keys allowed, each with
	// OrgPlaceholder where the organization goes.
	Tables map[string]TenantTable `json:"tables"`
	// Secrets: kind → actions, on secrets tagged org=<organization>.
	Secrets map[string][]string `json:"secrets"`
	// Vault: actions on the vault key under agentauth/<organization>/*.
	Vault []string `json:"vault"`
}

// TenantTable is one table of a tenant role.
type TenantTable struct {
	Access      string   `json:"access"`
	LeadingKeys []string `json:"leading_keys"`
}

const (
	// OrgPlaceholder stands for the organization in TenantGrants
	// (lambdaapp.OrgPlaceholder).
	OrgPlaceholder = "{org}"
	// OrgTag is the session tag naming the organization, and the tag of
	// its secrets (internal/secrets/aws).
	OrgTag = "org"
	// PrincipalOrg is the session's organization in a policy.
	PrincipalOrg = "${aws:PrincipalTag/" + OrgTag + "}"
	// OrgTagShape is the shape a session's org tag must have: an
	// organization id is a UUID (internal/auth). With OrgTagRefused it
	// keeps IAM's wildcards out of the keys the patterns are made of.
	OrgTagShape = "????????-????-????-????-????????????"
	// EnvTenantRoleARN is the tenant role of a function that has one
	// (internal/lambdaapp.EnvTenantRoleARN).
	EnvTenantRoleARN = "STEPGRAPH_TENANT_ROLE_ARN"
)

// OrgTagRefused are tag values a session may not carry: any holding a
// literal * or ? (${*}, ${?} in IAM's condition values).
var OrgTagRefused = []string{"*${*}*", "*${?}*"}

// checkTenant fails on a tenant grant of fn the stack does not know.
func checkTenant(fn string, g *TenantGrants, tables []string) error {
	if g == nil {
		return nil
	}
	if len(g.Tables) == 0 {
		return fmt.Errorf("function %s: tenant grants without tables", fn)
	}
	for _, t := range sortedKeys(g.Tables) {
		tt := g.Tables[t]
		if !slices.Contains(tables, t) {
			return fmt.Errorf("function %s: tenant grant on table %q, which the stack does not have", fn, t)
		}
		if _, ok := TableActions[tt.Access]; !ok {
			return fmt.Errorf("function %s: tenant table %s: access %q", fn, t, tt.Access)
		}
		if len(tt.LeadingKeys) == 0 {
			return fmt.Errorf("function %s: tenant table %s: no leading keys", fn, t)
		}
		for _, k := range tt.LeadingKeys {
			// The organization must be in the key, and no wildcard may
			// come before it: "T#*" would reach every organization.
			at := strings.Index(k, OrgPlaceholder)
			if at < 0 || strings.ContainsAny(k[:at], "*?") {
				return fmt.Errorf("function %s: tenant table %s: leading key %q does not start with the organization (%s before any wildcard)", fn, t, k, OrgPlaceholder)
			}
		}
	}
	access := map[string]string{}
	for t, tt := range g.Tables {
		access[t] = tt.Access
	}
	return checkGrants(fn+" (tenant)", Grants{Tables: access, Secrets: g.Secrets, Vault: g.Vault}, tables)
}

// tenantRole is what newTenantRole needs of the stack.
type tenantRole struct {
	stage, secretsPrefix string
	// worker is the role that may assume it.
	worker     awsiam.IRole
	tableARN   func(name string) string
	secretsARN func(kind string) string
	vaultKey   awskms.Key
}

// newTenantRole makes the tenant role of g. Its trust allows only r.worker,
// only with the session tag org (and no other), of an organization id's
// shape; its policy allows only what g lists, each statement under the
// session's org.
func (r tenantRole) newTenantRole(scope constructs.Construct, fn string, g *TenantGrants) awsiam.Role {
	trust := awsiam.NewPrincipalWithConditions(awsiam.NewSessionTagsPrincipal(awsiam.NewArnPrincipal(r.worker.RoleArn())),
		&map[string]any{
			"StringLike":                map[string]any{"aws:RequestTag/" + OrgTag: OrgTagShape},
			"StringNotLike":             map[string]any{"aws:RequestTag/" + OrgTag: OrgTagRefused},
			"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{OrgTag}},
		})
	// One inline policy: one resource fewer than a policy of its own
	// (CloudFormation takes 500 in a stack).
	doc := awsiam.NewPolicyDocument(nil)
	statement := func(sid string, actions, resources []string, cond map[string]any) {
		doc.AddStatements(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Actions: jsii.Strings(actions...), Resources: jsii.Strings(resources...),
			Conditions: &cond,
		}))
	}
	for _, name := range sortedKeys(g.Tables) {
		tt := g.Tables[name]
		statement("Tenant"+title(name), TableActions[tt.Access], []string{r.tableARN(name)}, map[string]any{
			"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": orgPatterns(tt.LeadingKeys)},
		})
	}
	for _, kind := range sortedKeys(g.Secrets) {
		var actions []string
		creates := false
		for _, a := range g.Secrets[kind] {
			for _, iam := range SecretActions[a] {
				if iam == "secretsmanager:CreateSecret" || iam == "secretsmanager:TagResource" {
					creates = true
					continue
				}
				if !slices.Contains(actions, iam) {
					actions = append(actions, iam)
				}
			}
		}
		sort.Strings(actions)
		statement("TenantSecrets"+title(kind), actions, []string{r.secretsARN(kind)}, map[string]any{
			"StringEquals": map[string]any{"secretsmanager:ResourceTag/" + OrgTag: PrincipalOrg},
		})
		if creates {
			// A new secret has no tags to check yet: it must be created
			// with the session's org as its tag and the stage's (the
			// teardown's mark), and those only.
			statement("TenantSecrets"+title(kind)+"Create", []string{"secretsmanager:CreateSecret", "secretsmanager:TagResource"},
				[]string{r.secretsARN(kind)}, map[string]any{
					"StringEquals": map[string]any{"aws:RequestTag/" + OrgTag: PrincipalOrg,
						"aws:RequestTag/" + RuntimeTagKey: r.secretsPrefix},
					"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{OrgTag, RuntimeTagKey}},
				})
		}
	}
	var kmsActions []string
	for _, a := range g.Vault {
		if VaultActions[a] != "" {
			kmsActions = append(kmsActions, VaultActions[a])
		}
	}
	sort.Strings(kmsActions)
	if len(kmsActions) > 0 && r.vaultKey != nil {
		statement("TenantVaultKey", kmsActions, []string{*r.vaultKey.KeyArn()}, map[string]any{
			"StringLike":                map[string]any{"kms:EncryptionContext:" + VaultContextKey: "agentauth/" + PrincipalOrg + "/*"},
			"ForAllValues:StringEquals": map[string]any{"kms:EncryptionContextKeys": []string{VaultContextKey}},
		})
	}
	return awsiam.NewRole(scope, jsii.String("Role-"+fn+"-tenant"), &awsiam.RoleProps{
		AssumedBy:          trust,
		Description:        jsii.String("stepgraph " + r.stage + " " + fn + ": one organization's session (tag org)"),
		MaxSessionDuration: awscdk.Duration_Hours(jsii.Number(1)),
		InlinePolicies:     &map[string]awsiam.PolicyDocument{"tenant": doc},
	})
}

// orgPatterns are patterns with the session's organization in IAM terms.
func orgPatterns(patterns []string) []string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = strings.ReplaceAll(p, OrgPlaceholder, PrincipalOrg)
	}
	return out
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
