package dynamo

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/storetest"
)

func TestAgentAuthContract(t *testing.T) {
	storetest.AgentAuthContract(t, func(t *testing.T) storetest.AgentAuthStore { return openShared(t) })
}

// TestAgentTokenItemsBeforeAgentScope: a token written before agent
// scoping (no agent in its sort key, its item or its id pointer) reads as
// the user's unscoped token, and an unscoped put replaces it.
func TestAgentTokenItemsBeforeAgentScope(t *testing.T) {
	db := openShared(t)
	org, id := "org-"+uuid.NewString(), uuid.NewString()
	for _, it := range []map[string]types.AttributeValue{
		with(key(aaToken+org+"#gh", "u1"+userEnd+"a b"), map[string]types.AttributeValue{
			"id": s(id), "org": s(org), "user": s("u1"), "provider_id": s("gh"), "scopes": s("a b"),
			"secret_ref": s("ref-old"), "usable": boolean(true), "created": n(1), "updated": n(1), "ins": s(insStamp())}),
		with(tokenIDKey(org, id), map[string]types.AttributeValue{"provider_id": s("gh"), "user": s("u1"), "scopes": s("a b")}),
	} {
		if _, err := db.client.PutItem(ctxT(), &dynamodb.PutItemInput{TableName: aws.String(db.tables.providers), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.AgentToken(ctxT(), org, id); err != nil || got.AgentID != "" || got.SecretRef != "ref-old" {
		t.Fatalf("the old token by id: %+v %v", got, err)
	}
	if got, err := db.AgentTokens(ctxT(), org, "gh", "u1"); err != nil || len(got) != 1 || got[0].AgentID != "" {
		t.Fatalf("the old token listed: %+v %v", got, err)
	}
	next := store.AgentToken{ID: uuid.NewString(), OrgID: org, UserID: "u1", ProviderID: "gh", Scopes: []string{"a", "b"},
		SecretRef: "ref-new", Usable: true}
	if replaced, err := db.PutAgentToken(ctxT(), next); err != nil || replaced != "ref-old" {
		t.Errorf("an unscoped put over the old token: replaced %q, %v", replaced, err)
	}
	if _, err := db.AgentToken(ctxT(), org, id); err == nil {
		t.Errorf("the replaced old token is still read by id")
	}
}
