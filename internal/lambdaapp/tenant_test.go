package lambdaapp

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go/middleware"
)

func TestStringLike(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"T#o1#*", "T#o1#th", true}, {"T#o1#*", "T#o1#", true}, {"T#o1#*", "T#o12#th", false},
		{"SLOTS#o1", "SLOTS#o1", true}, {"SLOTS#o1", "SLOTS#o1x", false}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"*", "", true}, {"vault#agentauth/o1/*", "vault#agentauth/o2/x", false},
	} {
		if got := stringLike(c.pattern, c.s); got != c.want {
			t.Errorf("stringLike(%q, %q) = %v", c.pattern, c.s, got)
		}
	}
}

func key(pk string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"}}
}

// What a request of organization o1's run reaches decides who signs it:
// its session (only o1's keys), the worker's role (stage-wide keys, alone
// or with o1's, other services), or nobody (another organization's key).
func TestTenantRulesDecideWhoSigns(t *testing.T) {
	f, _ := FunctionNamed("run-worker")
	r := tenantRules{tablePrefix: "p-", secretsPrefix: "s/", grants: f.Grants.Tenant}
	const org = "o1"
	tx := func(pks ...string) *dynamodb.TransactWriteItemsInput {
		in := &dynamodb.TransactWriteItemsInput{}
		for _, pk := range pks {
			in.TransactItems = append(in.TransactItems, ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String("p-threads"), Key: key(pk)}})
		}
		return in
	}
	for name, c := range map[string]struct {
		in   any
		want reach
	}{
		"thread item":          {&dynamodb.GetItemInput{TableName: aws.String("p-threads"), Key: key("T#o1#th")}, reachTenant},
		"claim":                {tx("T#o1#th", "SLOTS#o1", "USAGE#o1"), reachTenant},
		"another's thread":     {&dynamodb.GetItemInput{TableName: aws.String("p-threads"), Key: key("T#o2#th")}, reachForeign},
		"another's in a claim": {tx("T#o1#th", "SLOTS#o2"), reachForeign},
		"run marker":           {&dynamodb.GetItemInput{TableName: aws.String("p-threads"), Key: key("RUNID#r1")}, reachStage},
		"temporary run's end":  {tx("T#o1#th", "RUNID#r1"), reachStage},
		"unknown kind":         {&dynamodb.GetItemInput{TableName: aws.String("p-organizations"), Key: key("KEY#h")}, reachForeign},
		"table not granted":    {&dynamodb.GetItemInput{TableName: aws.String("p-crons"), Key: key("o1")}, reachForeign},
		"assistant":            {&dynamodb.GetItemInput{TableName: aws.String("p-assistants"), Key: key("o1")}, reachTenant},
		"another's assistant":  {&dynamodb.GetItemInput{TableName: aws.String("p-assistants"), Key: key("o2")}, reachForeign},
		"partition query": {&dynamodb.QueryInput{TableName: aws.String("p-threads"), KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: "T#o1#th"}}}, reachTenant},
		"expiry index": {&dynamodb.QueryInput{TableName: aws.String("p-threads"), IndexName: aws.String("lease"), KeyConditionExpression: aws.String("lpk = :x"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":x": &ddbtypes.AttributeValueMemberS{Value: "X"}}}, reachStage},
		"webhook key":         {&secretsmanager.GetSecretValueInput{SecretId: aws.String("s/orgs/o1/values.0")}, reachTenant},
		"another's key":       {&secretsmanager.GetSecretValueInput{SecretId: aws.String("s/orgs/o2/values.0")}, reachForeign},
		"deployment secret":   {&secretsmanager.GetSecretValueInput{SecretId: aws.String("s/deployments/d1/values.0")}, reachStage},
		"vault value":         {&kms.DecryptInput{EncryptionContext: map[string]string{"stepgraph:vault": "agentauth/o1/gh/u"}}, reachTenant},
		"another's vault":     {&kms.DecryptInput{EncryptionContext: map[string]string{"stepgraph:vault": "agentauth/o2/gh/u"}}, reachForeign},
		"payload object (S3)": {&s3.GetObjectInput{Key: aws.String("p/threads/abc")}, reachStage},
	} {
		if got, _ := r.request(c.in, org); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// A foreign key is refused before the call; an unscoped context and stage
// keys sign with the base credentials, a tenant request with the
// organization's session.
func TestTenantScopeMiddleware(t *testing.T) {
	f, _ := FunctionNamed("run-worker")
	r := tenantRules{tablePrefix: "p-", grants: f.Grants.Tenant}
	run := func(ctx context.Context, in any) (string, error) {
		st := middleware.NewStack("test", nil)
		if err := r.scope(st); err != nil {
			t.Fatal(err)
		}
		var signedAs string
		_, _, err := st.Initialize.HandleMiddleware(ctx, in, middleware.HandlerFunc(func(ctx context.Context, _ any) (any, middleware.Metadata, error) {
			signedAs, _ = ctx.Value(signAsKey{}).(string)
			return nil, middleware.Metadata{}, nil
		}))
		return signedAs, err
	}
	mine := &dynamodb.GetItemInput{TableName: aws.String("p-threads"), Key: key("T#o1#th")}
	if as, err := run(WithTenant(context.Background(), "o1"), mine); err != nil || as != "o1" {
		t.Errorf("o1's thread in o1's run: signed as %q, %v", as, err)
	}
	if as, err := run(context.Background(), mine); err != nil || as != "" {
		t.Errorf("unscoped: signed as %q, %v", as, err)
	}
	marker := &dynamodb.GetItemInput{TableName: aws.String("p-threads"), Key: key("RUNID#r")}
	if as, err := run(WithTenant(context.Background(), "o1"), marker); err != nil || as != "" {
		t.Errorf("run marker: signed as %q, %v", as, err)
	}
	// A nested call within a tenant request starts unsigned again.
	nested := context.WithValue(WithTenant(context.Background(), "o1"), signAsKey{}, "o1")
	if as, _ := run(nested, &s3.GetObjectInput{}); as != "" {
		t.Errorf("an S3 call within a tenant request: signed as %q", as)
	}
	var foreign *ForeignKeyError
	if _, err := run(WithTenant(context.Background(), "o2"), mine); !errors.As(err, &foreign) || foreign.Org != "o2" {
		t.Errorf("o1's thread in o2's run: %v", err)
	}
	if _, err := run(stageContext(WithTenant(context.Background(), "o2")), mine); err != nil {
		t.Errorf("o1's thread in stage-wide work: %v", err)
	}
}

type countingCreds struct{ id string }

func (c countingCreds) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: c.id}, nil
}

// Sessions are kept per organization, at most tenantSessionsCached (least
// recently used go), and the base credentials sign what is not a tenant's.
func TestTenantSessionsAreBounded(t *testing.T) {
	made := map[string]int{}
	ts := &tenantSessions{base: countingCreds{"BASE"}, max: 2, assume: func(org string) aws.CredentialsProvider {
		made[org]++
		return countingCreds{"ASIA-" + org}
	}}
	ts.lru, ts.orgs = newLRU()
	get := func(org string) string {
		c, err := ts.Retrieve(context.WithValue(context.Background(), signAsKey{}, org))
		if err != nil {
			t.Fatal(err)
		}
		return c.AccessKeyID
	}
	if get("") != "BASE" || get("a") != "ASIA-a" || get("b") != "ASIA-b" || get("a") != "ASIA-a" {
		t.Fatal("wrong credentials")
	}
	get("c") // evicts b, the least recently used
	get("a")
	get("b")
	if made["a"] != 1 || made["b"] != 2 || made["c"] != 1 || len(ts.orgs) != 2 {
		t.Errorf("sessions made %v, cached %d", made, len(ts.orgs))
	}
}
