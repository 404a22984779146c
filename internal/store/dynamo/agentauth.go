package dynamo

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Agent auth (store.AgentAuth) lives in the providers table, in partitions
// of its own (a provider's partition is its organization's id, which has no
// '#'):
//
//	attempt:        pk agentauth-attempt#<org>            sk <id>
//	its state:      pk agentauth-state#<state hash>        sk -        → org, id
//	token:          pk agentauth-token#<org>#<provider>    sk <user>\x1f<scopes>[\x1f<agent>]
//	its id:         pk agentauth-tokenid#<org>             sk <id>     → provider, user, scopes, agent
//
// User and agent ids hold no control characters and scopes are printable
// ASCII (internal/agentauth), so \x1f ends the user in a token's sort key
// (a user's tokens are one prefix) and the scopes of an agent's token. An
// unscoped token's key has no agent part: items written before agent
// scoping are the users' unscoped tokens.

const (
	aaAttempt = "agentauth-attempt#"
	aaState   = "agentauth-state#"
	aaToken   = "agentauth-token#"
	aaTokenID = "agentauth-tokenid#"
	userEnd   = "\x1f"
)

func attemptKey(orgID, id string) map[string]types.AttributeValue { return key(aaAttempt+orgID, id) }
func stateKey(hash string) map[string]types.AttributeValue        { return key(aaState+hash, "-") }
func tokenKey(orgID, providerID, userID string, scopes []string, agentID string) map[string]types.AttributeValue {
	sk := userID + userEnd + strings.Join(scopes, " ")
	if agentID != "" {
		sk += userEnd + agentID
	}
	return key(aaToken+orgID+"#"+providerID, sk)
}

func tokenKeyOf(t store.AgentToken) map[string]types.AttributeValue {
	return tokenKey(t.OrgID, t.ProviderID, t.UserID, t.Scopes, t.AgentID)
}
func tokenIDKey(orgID, id string) map[string]types.AttributeValue { return key(aaTokenID+orgID, id) }

func splitScopes(v string) []string {
	if v == "" {
		return []string{}
	}
	return strings.Split(v, " ")
}

func attemptItem(a store.AuthAttempt) map[string]types.AttributeValue {
	return with(attemptKey(a.OrgID, a.ID), map[string]types.AttributeValue{
		"id": s(a.ID), "org": s(a.OrgID), "user": s(a.UserID), "provider_id": s(a.ProviderID),
		"scopes": s(strings.Join(a.Scopes, " ")), "agent": s(a.AgentID), "state_hash": s(a.StateHash), "status": s(a.Status),
		"error": s(a.Error), "token_id": s(a.TokenID),
		"created": n(micros(a.CreatedAt)), "expires": n(micros(a.ExpiresAt)), "updated": n(micros(a.UpdatedAt)),
	})
}

func attemptFrom(it item) store.AuthAttempt {
	return store.AuthAttempt{ID: it.str("id"), OrgID: it.str("org"), UserID: it.str("user"), ProviderID: it.str("provider_id"),
		Scopes: splitScopes(it.str("scopes")), AgentID: it.str("agent"), StateHash: it.str("state_hash"), Status: it.str("status"),
		Error: it.str("error"), TokenID: it.str("token_id"),
		CreatedAt: it.time("created"), ExpiresAt: it.time("expires"), UpdatedAt: it.time("updated")}
}

// CreateAuthAttempt implements store.AgentAuth: the attempt and its state
// marker in one transaction (a state names one attempt).
func (db *DB) CreateAuthAttempt(ctx context.Context, a store.AuthAttempt) error {
	t := db.tables.providers
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(t), Item: with(stateKey(a.StateHash), map[string]types.AttributeValue{
			"org": s(a.OrgID), "id": s(a.ID), "expires": n(micros(a.ExpiresAt))}), ConditionExpression: aws.String(notExists)}},
		{Put: &types.Put{TableName: aws.String(t), Item: attemptItem(a), ConditionExpression: aws.String(notExists)}},
	})
	if err != nil {
		return wrap("create auth attempt", err)
	}
	if reasons != nil {
		if txFailedAt(reasons, 0) || txFailedAt(reasons, 1) {
			return store.ErrConflict
		}
		return txErr("create auth attempt", reasons)
	}
	return nil
}

// AuthAttempt implements store.AgentAuth.
func (db *DB) AuthAttempt(ctx context.Context, orgID, id string) (store.AuthAttempt, error) {
	if orgID == "" || id == "" {
		return store.AuthAttempt{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.providers, attemptKey(orgID, id))
	if err != nil {
		return store.AuthAttempt{}, wrap("auth attempt", err)
	}
	if it == nil {
		return store.AuthAttempt{}, store.ErrNotFound
	}
	return attemptFrom(it), nil
}

// AuthAttemptByState implements store.AgentAuth.
func (db *DB) AuthAttemptByState(ctx context.Context, stateHash string) (store.AuthAttempt, error) {
	if stateHash == "" {
		return store.AuthAttempt{}, store.ErrNotFound
	}
	ptr, err := db.get(ctx, db.tables.providers, stateKey(stateHash))
	if err != nil {
		return store.AuthAttempt{}, wrap("auth attempt by state", err)
	}
	if ptr == nil {
		return store.AuthAttempt{}, store.ErrNotFound
	}
	return db.AuthAttempt(ctx, ptr.str("org"), ptr.str("id"))
}

// SetAuthAttemptStatus implements store.AgentAuth: one conditional update.
func (db *DB) SetAuthAttemptStatus(ctx context.Context, a store.AuthAttempt, from string) error {
	if a.OrgID == "" || a.ID == "" {
		return store.ErrNotFound
	}
	u := newUpd().set("status", s(a.Status)).set("error", s(a.Error)).set("token_id", s(a.TokenID)).
		set("updated", n(micros(a.UpdatedAt))).cond("", exists, nil).cond("status", "$ = ?", s(from))
	failed, old, err := db.write1(ctx, u.update(db.tables.providers, attemptKey(a.OrgID, a.ID)))
	if err != nil {
		return wrap("set auth attempt status", err)
	}
	if failed {
		if old == nil {
			if it, err := db.get(ctx, db.tables.providers, attemptKey(a.OrgID, a.ID)); err != nil {
				return wrap("set auth attempt status", err)
			} else if it == nil {
				return store.ErrNotFound
			}
		}
		return store.ErrStale
	}
	return nil
}

// DeleteExpiredAuthAttempts implements store.AgentAuth: the
// organization's attempts partition is read and the expired ones deleted
// with their state markers. The service calls it on every new attempt, so
// the partition stays small.
func (db *DB) DeleteExpiredAuthAttempts(ctx context.Context, orgID string, t time.Time) (int, error) {
	if orgID == "" {
		return 0, nil
	}
	items, err := db.queryPartition(ctx, db.tables.providers, aaAttempt+orgID, "")
	if err != nil {
		return 0, wrap("delete expired auth attempts", err)
	}
	var keys []map[string]types.AttributeValue
	gone := 0
	for _, it := range items {
		if it.num("expires") < micros(t) {
			keys = append(keys, attemptKey(orgID, it.str("id")), stateKey(it.str("state_hash")))
			gone++
		}
	}
	if err := db.batchWrite(ctx, db.tables.providers, deletes(keys)); err != nil {
		return 0, wrap("delete expired auth attempts", err)
	}
	return gone, nil
}

func agentTokenItem(t store.AgentToken) map[string]types.AttributeValue {
	it := with(tokenKeyOf(t), map[string]types.AttributeValue{
		"id": s(t.ID), "org": s(t.OrgID), "user": s(t.UserID), "provider_id": s(t.ProviderID),
		"scopes": s(strings.Join(t.Scopes, " ")), "agent": s(t.AgentID), "secret_ref": s(t.SecretRef), "usable": boolean(t.Usable),
		"created": n(micros(t.CreatedAt)), "updated": n(micros(t.UpdatedAt)), "ins": s(insStamp()),
	})
	if !t.ExpiresAt.IsZero() {
		it["expires"] = n(micros(t.ExpiresAt))
	}
	return it
}

func agentTokenFrom(it item) store.AgentToken {
	t := store.AgentToken{ID: it.str("id"), OrgID: it.str("org"), UserID: it.str("user"), ProviderID: it.str("provider_id"),
		Scopes: splitScopes(it.str("scopes")), AgentID: it.str("agent"), SecretRef: it.str("secret_ref"), Usable: it.boolean("usable"),
		CreatedAt: it.time("created"), UpdatedAt: it.time("updated")}
	if it.has("expires") {
		t.ExpiresAt = it.time("expires")
	}
	return t
}

// PutAgentToken implements store.AgentAuth: the token and its id marker in
// one transaction, on condition that the replaced token (if any) is still
// the one read.
func (db *DB) PutAgentToken(ctx context.Context, t store.AgentToken) (string, error) {
	tbl := db.tables.providers
	for attempt := 0; ; attempt++ {
		old, err := db.get(ctx, tbl, tokenKeyOf(t))
		if err != nil {
			return "", wrap("put agent token", err)
		}
		items := []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(tbl), Item: with(tokenIDKey(t.OrgID, t.ID), map[string]types.AttributeValue{
				"provider_id": s(t.ProviderID), "user": s(t.UserID), "scopes": s(strings.Join(t.Scopes, " ")), "agent": s(t.AgentID)})}},
		}
		put := &types.Put{TableName: aws.String(tbl), Item: agentTokenItem(t)}
		replaced := ""
		if old == nil {
			put.ConditionExpression = aws.String(notExists)
		} else {
			replaced = old.str("secret_ref")
			put.ConditionExpression = aws.String("secret_ref = :old")
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":old": s(replaced)}
			if oldID := old.str("id"); oldID != t.ID {
				items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(tbl), Key: tokenIDKey(t.OrgID, oldID)}})
			}
		}
		items = append([]types.TransactWriteItem{{Put: put}}, items...)
		reasons, err := db.transact(ctx, items)
		if err != nil {
			return "", wrap("put agent token", err)
		}
		if reasons == nil {
			return replaced, nil
		}
		if !txFailedAt(reasons, 0) || attempt >= 5 {
			return "", txErr("put agent token", reasons)
		}
		// Another put replaced it meanwhile: read again.
	}
}

// AgentToken implements store.AgentAuth.
func (db *DB) AgentToken(ctx context.Context, orgID, id string) (store.AgentToken, error) {
	if orgID == "" || id == "" {
		return store.AgentToken{}, store.ErrNotFound
	}
	ptr, err := db.get(ctx, db.tables.providers, tokenIDKey(orgID, id))
	if err != nil {
		return store.AgentToken{}, wrap("agent token", err)
	}
	if ptr == nil {
		return store.AgentToken{}, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.providers, tokenKey(orgID, ptr.str("provider_id"), ptr.str("user"), splitScopes(ptr.str("scopes")), ptr.str("agent")))
	if err != nil {
		return store.AgentToken{}, wrap("agent token", err)
	}
	if it == nil || it.str("id") != id {
		return store.AgentToken{}, store.ErrNotFound
	}
	return agentTokenFrom(it), nil
}

// AgentTokens implements store.AgentAuth.
func (db *DB) AgentTokens(ctx context.Context, orgID, providerID, userID string) ([]store.AgentToken, error) {
	out := []store.AgentToken{}
	if orgID == "" || providerID == "" {
		return out, nil
	}
	prefix := ""
	if userID != "" {
		prefix = userID + userEnd
	}
	items, err := db.queryPartition(ctx, db.tables.providers, aaToken+orgID+"#"+providerID, prefix)
	if err != nil {
		return nil, wrap("list agent tokens", err)
	}
	sort.SliceStable(items, func(i, j int) bool {
		ci, cj := items[i].num("created"), items[j].num("created")
		if ci != cj {
			return ci < cj
		}
		return items[i].str("ins") < items[j].str("ins")
	})
	for _, it := range items {
		out = append(out, agentTokenFrom(it))
	}
	return out, nil
}

// UpdateAgentToken implements store.AgentAuth: conditional on the secret
// reference read.
func (db *DB) UpdateAgentToken(ctx context.Context, t store.AgentToken, fromRef string) error {
	cur, err := db.AgentToken(ctx, t.OrgID, t.ID)
	if err != nil {
		return err
	}
	u := newUpd().set("secret_ref", s(t.SecretRef)).set("usable", boolean(t.Usable)).set("updated", n(micros(t.UpdatedAt)))
	if t.ExpiresAt.IsZero() {
		u.remove("expires")
	} else {
		u.set("expires", n(micros(t.ExpiresAt)))
	}
	u.cond("", exists, nil).cond("secret_ref", "$ = ?", s(fromRef)).cond("id", "$ = ?", s(t.ID))
	failed, _, err := db.write1(ctx, u.update(db.tables.providers, tokenKeyOf(cur)))
	if err != nil {
		return wrap("update agent token", err)
	}
	if failed {
		if _, err := db.AgentToken(ctx, t.OrgID, t.ID); err != nil {
			return err
		}
		return store.ErrStale
	}
	return nil
}

// DeleteAgentTokens implements store.AgentAuth.
func (db *DB) DeleteAgentTokens(ctx context.Context, orgID, providerID, userID string) ([]store.AgentToken, error) {
	toks, err := db.AgentTokens(ctx, orgID, providerID, userID)
	if err != nil {
		return nil, err
	}
	var keys []map[string]types.AttributeValue
	for _, t := range toks {
		keys = append(keys, tokenKeyOf(t), tokenIDKey(t.OrgID, t.ID))
	}
	if err := db.batchWrite(ctx, db.tables.providers, deletes(keys)); err != nil {
		return nil, wrap("delete agent tokens", err)
	}
	return toks, nil
}

// DeleteAgentToken implements store.AgentAuth: the token and its id
// pointer in one transaction, conditional on the token still being this
// one (a put may have replaced it under the same key).
func (db *DB) DeleteAgentToken(ctx context.Context, orgID, id string) (store.AgentToken, error) {
	t, err := db.AgentToken(ctx, orgID, id)
	if err != nil {
		return store.AgentToken{}, err
	}
	tbl := db.tables.providers
	reasons, err := db.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String(tbl), Key: tokenKeyOf(t),
			ConditionExpression:       aws.String("id = :id"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": s(id)}}},
		{Delete: &types.Delete{TableName: aws.String(tbl), Key: tokenIDKey(orgID, id)}},
	})
	if err != nil {
		return store.AgentToken{}, wrap("delete agent token", err)
	}
	if reasons != nil {
		if txFailedAt(reasons, 0) {
			return store.AgentToken{}, store.ErrNotFound // replaced or deleted meanwhile
		}
		return store.AgentToken{}, txErr("delete agent token", reasons)
	}
	return t, nil
}

var _ store.AgentAuth = (*DB)(nil)
