package sqlite

import (
	"context"
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/storetest"
)

func TestAgentAuthContract(t *testing.T) {
	storetest.AgentAuthContract(t, func(t *testing.T) storetest.AgentAuthStore {
		db, _ := openTemp(t)
		return db
	})
}

// TestAgentScopeMigration: tokens and attempts stored before migration
// 0026 are the users' unscoped ones afterwards, in their order, and an
// agent's token can then be stored beside them.
func TestAgentScopeMigration(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	if err := db.CreateOrganization(ctx, store.Organization{ID: "o1", Name: "o1"}); err != nil {
		t.Fatal(err)
	}
	// Back to the schema before 0026 (0012's tables), with rows in it.
	for _, q := range []string{
		`DROP TABLE agent_tokens`,
		`CREATE TABLE agent_tokens (
			seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
			org_id TEXT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
			user_id TEXT NOT NULL, provider_id TEXT NOT NULL, scopes TEXT NOT NULL, secret_ref TEXT NOT NULL,
			expires_at INTEGER, usable INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
			UNIQUE (org_id, provider_id, user_id, scopes))`,
		`ALTER TABLE auth_attempts DROP COLUMN agent_id`,
		`DELETE FROM schema_migrations WHERE version = 26`,
		`INSERT INTO agent_tokens VALUES (7, 't-late', 'o1', 'u1', 'gh', 'b', 'ref-late', NULL, 1, 1, 1)`,
		`INSERT INTO agent_tokens VALUES (3, 't-early', 'o1', 'u1', 'gh', 'a', 'ref-early', NULL, 1, 1, 1)`,
		`INSERT INTO auth_attempts VALUES ('att', 'o1', 'u1', 'gh', 'a', 'hash', 'pending', '', '', 1, 2, 1)`,
	} {
		if _, err := db.exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	toks, err := db.AgentTokens(ctx, "o1", "gh", "u1")
	if err != nil || len(toks) != 2 || toks[0].ID != "t-early" || toks[1].ID != "t-late" {
		t.Fatalf("tokens after the migration: %+v %v", toks, err)
	}
	for _, tok := range toks {
		if tok.AgentID != "" {
			t.Errorf("token %s migrated with agent %q, want unscoped", tok.ID, tok.AgentID)
		}
	}
	if a, err := db.AuthAttempt(ctx, "o1", "att"); err != nil || a.AgentID != "" {
		t.Errorf("attempt after the migration: %+v %v", a, err)
	}
	scoped := store.AgentToken{ID: "t-agent", OrgID: "o1", UserID: "u1", ProviderID: "gh", Scopes: []string{"a"},
		AgentID: "asst-1", SecretRef: "ref-agent", Usable: true}
	if replaced, err := db.PutAgentToken(ctx, scoped); err != nil || replaced != "" {
		t.Errorf("an agent's token beside the migrated one: replaced %q, %v", replaced, err)
	}
}
