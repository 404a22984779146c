package dynamo

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

func providerKey(orgID, providerID string) map[string]types.AttributeValue {
	return key(orgID, providerID)
}

func providerItem(p store.Provider) map[string]types.AttributeValue {
	return with(providerKey(p.OrgID, p.ProviderID), map[string]types.AttributeValue{
		"id": s(p.ID), "org": s(p.OrgID), "provider_id": s(p.ProviderID), "name": s(p.Name),
		"client_id": s(p.ClientID), "client_secret_ref": s(p.ClientSecretRef),
		"auth_url": s(p.AuthURL), "token_url": s(p.TokenURL), "uses_pkce": boolean(p.UsesPKCE),
		"code_challenge_method": s(p.CodeChallengeMethod), "provider_type": s(p.ProviderType),
		"token_endpoint_auth_method": s(p.TokenEndpointAuthMethod), "revocation_url": s(p.RevocationURL),
		"created": n(micros(p.CreatedAt)), "updated": n(micros(p.UpdatedAt)), "ins": s(insStamp()),
	})
}

func providerFrom(it item) store.Provider {
	return store.Provider{
		ID: it.str("id"), OrgID: it.str("org"), ProviderID: it.str("provider_id"), Name: it.str("name"),
		ClientID: it.str("client_id"), ClientSecretRef: it.str("client_secret_ref"),
		AuthURL: it.str("auth_url"), TokenURL: it.str("token_url"), UsesPKCE: it.boolean("uses_pkce"),
		CodeChallengeMethod: it.str("code_challenge_method"), ProviderType: it.str("provider_type"),
		TokenEndpointAuthMethod: it.str("token_endpoint_auth_method"), RevocationURL: it.str("revocation_url"),
		CreatedAt: it.time("created"), UpdatedAt: it.time("updated"),
	}
}

// CreateProvider implements store.Providers.
func (db *DB) CreateProvider(ctx context.Context, p store.Provider) error {
	failed, _, err := db.write1(ctx, newUpd().cond("", notExists, nil).put(db.tables.providers, providerItem(p)))
	if failed {
		return store.ErrConflict
	}
	return wrap("create provider", err)
}

// Provider implements store.Providers.
func (db *DB) Provider(ctx context.Context, orgID, providerID string) (store.Provider, error) {
	if orgID == "" || providerID == "" {
		return store.Provider{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.providers, providerKey(orgID, providerID))
	if err != nil {
		return store.Provider{}, wrap("provider", err)
	}
	if it == nil {
		return store.Provider{}, store.ErrNotFound
	}
	return providerFrom(it), nil
}

// ListProviders implements store.Providers: oldest first, ties in insertion
// order.
func (db *DB) ListProviders(ctx context.Context, orgID string) ([]store.Provider, error) {
	out := []store.Provider{}
	if orgID == "" {
		return out, nil
	}
	items, err := db.queryPartition(ctx, db.tables.providers, orgID, "")
	if err != nil {
		return nil, wrap("list providers", err)
	}
	sort.SliceStable(items, func(i, j int) bool {
		ci, cj := items[i].num("created"), items[j].num("created")
		if ci != cj {
			return ci < cj
		}
		return items[i].str("ins") < items[j].str("ins")
	})
	for _, it := range items {
		out = append(out, providerFrom(it))
	}
	return out, nil
}

// UpdateProvider implements store.Providers. The stored ID and CreatedAt are
// kept; every other field is replaced.
func (db *DB) UpdateProvider(ctx context.Context, p store.Provider) error {
	if p.OrgID == "" || p.ProviderID == "" {
		return store.ErrNotFound
	}
	_, err := db.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(db.tables.providers), Key: providerKey(p.OrgID, p.ProviderID),
		ConditionExpression: aws.String(exists),
		UpdateExpression: aws.String("SET #name = :name, client_id = :cid, client_secret_ref = :ref, " +
			"auth_url = :au, token_url = :tu, uses_pkce = :pkce, code_challenge_method = :ccm, " +
			"provider_type = :pt, token_endpoint_auth_method = :team, updated = :up, revocation_url = :ru"),
		ExpressionAttributeNames: map[string]string{"#name": "name"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":name": s(p.Name), ":cid": s(p.ClientID), ":ref": s(p.ClientSecretRef),
			":au": s(p.AuthURL), ":tu": s(p.TokenURL), ":pkce": boolean(p.UsesPKCE),
			":ccm": s(p.CodeChallengeMethod), ":pt": s(p.ProviderType),
			":team": s(p.TokenEndpointAuthMethod), ":up": n(micros(p.UpdatedAt)), ":ru": s(p.RevocationURL),
		},
	})
	if isCondFailed(err) {
		return store.ErrNotFound
	}
	return wrap("update provider", err)
}

// DeleteProvider implements store.Providers.
func (db *DB) DeleteProvider(ctx context.Context, orgID, providerID string) error {
	if orgID == "" || providerID == "" {
		return store.ErrNotFound
	}
	failed, _, err := db.write1(ctx, newUpd().cond("", exists, nil).del(db.tables.providers, providerKey(orgID, providerID)))
	if failed {
		return store.ErrNotFound
	}
	return wrap("delete provider", err)
}
