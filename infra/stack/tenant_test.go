package stack

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The run worker's tenant role, exactly: assumed only by the run worker's
// role, only with the session tag org (and no other) of an organization
// id's shape; its policy allows only the organization's own partitions of
// each table (dynamodb:LeadingKeys), its tagged secrets and its vault
// values. The run worker may assume it and tag the session, nothing else
// may. MiniStack enforces no IAM: this test is what holds the policy.
func TestTenantRole(t *testing.T) {
	_, js := synth(t)
	id := roleNamed(t, js, "Rolerunworkertenant")
	workerRole := roleNamed(t, js, "Rolerunworker")
	if workerRole == id {
		for rid := range resources(js, "AWS::IAM::Role") {
			if strings.HasPrefix(rid, "Rolerunworker") && !strings.HasPrefix(rid, "Rolerunworkertenant") {
				workerRole = rid
			}
		}
	}
	role := props(resources(js, "AWS::IAM::Role")[id])
	trust, _ := json.Marshal(role["AssumeRolePolicyDocument"])
	wantTrust := `{"Statement":[{"Action":["sts:AssumeRole","sts:TagSession"],` +
		`"Condition":{"ForAllValues:StringEquals":{"aws:TagKeys":["org"]},` +
		`"StringLike":{"aws:RequestTag/org":"????????-????-????-????-????????????"},` +
		`"StringNotLike":{"aws:RequestTag/org":["*${*}*","*${?}*"]}},` +
		`"Effect":"Allow","Principal":{"AWS":{"Fn::GetAtt":["` + workerRole + `","Arn"]}}}],"Version":"2012-10-17"}`
	if string(trust) != wantTrust {
		t.Errorf("tenant role trust\n got %s\nwant %s", trust, wantTrust)
	}
	if role["MaxSessionDuration"] != float64(3600) {
		t.Errorf("MaxSessionDuration %v, want 3600", role["MaxSessionDuration"])
	}

	tableID := map[string]string{}
	for tid, tr := range resources(js, "AWS::DynamoDB::Table") {
		tableID[strings.TrimPrefix(props(tr)["TableName"].(string), TablePrefix(testStage))] = "{GetAtt:" + tid + ".Arn}"
	}
	const (
		read     = "dynamodb:GetItem,dynamodb:Query,dynamodb:ConditionCheckItem"
		write    = read + ",dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem,dynamodb:BatchWriteItem"
		org      = "${aws:PrincipalTag/org}"
		secrets  = "arn:{Ref:AWS::Partition}:secretsmanager:{Ref:AWS::Region}:{Ref:AWS::AccountId}:secret:stepgraph/test/"
		keysCond = "ForAllValues:StringLike"
	)
	leading := func(keys ...string) string {
		b, _ := json.Marshal(map[string]any{keysCond: map[string]any{"dynamodb:LeadingKeys": keys}})
		return string(b)
	}
	type want struct{ actions, resource, condition string }
	wants := map[string]want{
		"TenantAssistants":    {read, tableID["assistants"], leading(org)},
		"TenantDeployments":   {read, tableID["deployments"], leading("ORG#"+org, "DEP#"+org+"#*")},
		"TenantOrganizations": {write, tableID["organizations"], leading("ORG#" + org)},
		"TenantProviders": {write, tableID["providers"], leading(org, "agentauth-attempt#"+org, "agentauth-token#"+org+"#*",
			"agentauth-tokenid#"+org, "vault#agentauth/"+org+"/*")},
		"TenantThreads": {write, tableID["threads"], leading("T#"+org+"#*", "EVR#"+org+"#*", "SLOTS#"+org, "USAGE#"+org)},
		"TenantSecretsOrgs": {"secretsmanager:DeleteSecret,secretsmanager:GetSecretValue,secretsmanager:PutSecretValue,secretsmanager:UpdateSecretVersionStage",
			secrets + "orgs/*", `{"StringEquals":{"secretsmanager:ResourceTag/org":"` + org + `"}}`},
		"TenantSecretsOrgsCreate": {"secretsmanager:CreateSecret,secretsmanager:TagResource", secrets + "orgs/*",
			`{"ForAllValues:StringEquals":{"aws:TagKeys":["org","stepgraph:prefix"]},"StringEquals":{"aws:RequestTag/org":"` + org + `","aws:RequestTag/stepgraph:prefix":"stepgraph/test/"}}`},
		"TenantSecretsProviders": {"secretsmanager:GetSecretValue", secrets + "providers/*",
			`{"StringEquals":{"secretsmanager:ResourceTag/org":"` + org + `"}}`},
		"TenantVaultKey": {"kms:Decrypt,kms:GenerateDataKey", "{GetAtt:" + vaultKeyID(t, js) + ".Arn}",
			`{"ForAllValues:StringEquals":{"kms:EncryptionContextKeys":["stepgraph:vault"]},"StringLike":{"kms:EncryptionContext:stepgraph:vault":"agentauth/` + org + `/*"}}`},
	}
	got := map[string]want{}
	for _, st := range statementsOfRole(js, id) {
		sid, _ := st["Sid"].(string)
		cond, _ := json.Marshal(st["Condition"])
		if st["Effect"] != "Allow" || len(st.resources()) != 1 {
			t.Errorf("statement %s: %v on %v", sid, st["Effect"], st.resources())
		}
		got[sid] = want{st.actions(), strings.Join(st.resources(), ","), string(cond)}
	}
	if !reflect.DeepEqual(got, wants) {
		for sid := range wants {
			if got[sid] != wants[sid] {
				t.Errorf("tenant statement %s\n got %+v\nwant %+v", sid, got[sid], wants[sid])
			}
		}
		for sid := range got {
			if _, ok := wants[sid]; !ok {
				t.Errorf("tenant statement %s is not expected: %+v", sid, got[sid])
			}
		}
	}

	// Only the run worker may assume it.
	tenantARN := "{GetAtt:" + id + ".Arn}"
	for pid, r := range resources(js, "AWS::IAM::Policy") {
		doc, _ := props(r)["PolicyDocument"].(map[string]any)
		sts, _ := doc["Statement"].([]any)
		for _, s := range sts {
			st := statement(s.(map[string]any))
			if !strings.Contains(st.actions(), "sts:") {
				continue
			}
			roles, _ := props(r)["Roles"].([]any)
			if st.actions() != "sts:AssumeRole,sts:TagSession" || !slices.Equal(st.resources(), []string{tenantARN}) ||
				len(roles) != 1 || str(roles[0]) != "{Ref:"+workerRole+"}" {
				t.Errorf("policy %s: %s on %v for %v", pid, st.actions(), st.resources(), roles)
			}
		}
	}
	// The run worker learns the role from its environment.
	for _, r := range resources(js, "AWS::Lambda::Function") {
		p := props(r)
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		isWorker := p["FunctionName"] == ResourcePrefix(testStage)+FnRunWorker
		got := ""
		if v, ok := vars[EnvTenantRoleARN]; ok {
			got = str(v)
		}
		if (got == tenantARN) != isWorker || (!isWorker && got != "") {
			t.Errorf("%v: %s = %q", p["FunctionName"], EnvTenantRoleARN, got)
		}
	}
}

// A tenant grant whose key does not begin with the organization, or of an
// unknown table or word, fails the synth.
func TestCheckTenant(t *testing.T) {
	tables := []string{"threads", "providers"}
	ok := &TenantGrants{Tables: map[string]TenantTable{"threads": {"write", []string{"T#{org}#*"}}}}
	if err := checkTenant("fn", ok, tables); err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*TenantGrants{
		"no tables":           {},
		"wildcard first":      {Tables: map[string]TenantTable{"threads": {"write", []string{"T#*{org}"}}}},
		"no organization":     {Tables: map[string]TenantTable{"threads": {"write", []string{"RUNID#*"}}}},
		"no keys":             {Tables: map[string]TenantTable{"threads": {"write", nil}}},
		"unknown table":       {Tables: map[string]TenantTable{"crons": {"read", []string{"{org}"}}}},
		"unknown access":      {Tables: map[string]TenantTable{"threads": {"admin", []string{"{org}"}}}},
		"unknown secret":      {Tables: ok.Tables, Secrets: map[string][]string{"keys": {"get"}}},
		"vault w/o its table": {Tables: ok.Tables, Vault: []string{"get"}},
	} {
		if err := checkTenant("fn", g, tables); err == nil {
			t.Errorf("%s: went unnoticed", name)
		}
	}
}
