package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/store"
)

// storedRequestHash reads the request hash the server recorded for an
// Idempotency-Key: reserving a key that exists answers its record.
func storedRequestHash(t *testing.T, idem store.Idempotency, orgID, scope, key string) string {
	t.Helper()
	got, fresh, err := idem.ReserveIdempotencyKey(context.Background(),
		store.IdempotencyRecord{OrgID: orgID, Scope: scope, Key: key, RequestHash: "probe", CreatedAt: time.Now().UTC()}, time.Hour)
	if err != nil || fresh {
		t.Fatalf("no record for key %s (fresh %v): %v", key, fresh, err)
	}
	return got.RequestHash
}

// plainHash is the request hash as versions before F18 stored it: SHA-256
// of the canonical body.
func plainHash(body map[string]any) string {
	b, _ := json.Marshal(body)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The request hash of an idempotency record is keyed with a server-held
// secret (security review F18): a database that leaks does not let anyone
// test guesses of a low-entropy client_secret or deployment secret against
// it. Replays behave exactly as before.
func TestIdempotencyRequestHashIsKeyed(t *testing.T) {
	var idem store.Idempotency
	e := newEnv(t, func(c *api.Config) { idem = c.Idempotency })
	weak := secret("hunter2-idem")

	provider := with(validProvider("idem-weak"), "client_secret", weak)
	first := e.do("POST", "/v2/auth/providers", e.keyA, provider, "Idempotency-Key", "weak-1")
	if first.Status != 200 {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	orgID, _ := first.json(t)["organization_id"].(string)
	deployment := map[string]any{"name": "idem-weak", "source": "external_docker", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "ghcr.io/acme/agent:1"},
		"secrets":                []any{map[string]any{"name": "TOKEN", "value": weak}}}
	e.must(201, "POST", "/v2/deployments", e.keyA, deployment, "Idempotency-Key", "weak-2")

	for _, c := range []struct {
		scope, key string
		body       map[string]any
	}{{"createProvider", "weak-1", provider}, {"createDeployment", "weak-2", deployment}} {
		got := storedRequestHash(t, idem, orgID, c.scope, c.key)
		if plain := plainHash(c.body); strings.Contains(got, plain) {
			t.Errorf("%s: the stored request hash is the plain SHA-256 of the body", c.scope)
		}
		if !strings.HasPrefix(got, "hmac-sha256:") {
			t.Errorf("%s: stored request hash %q is not keyed", c.scope, got)
		}
	}

	// Same body: the first answer; another secret only: a conflict.
	again := e.do("POST", "/v2/auth/providers", e.keyA, provider, "Idempotency-Key", "weak-1")
	if again.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %s", again.Status, again.Body)
	}
	other := e.do("POST", "/v2/auth/providers", e.keyA, with(provider, "client_secret", secret("hunter3-idem")), "Idempotency-Key", "weak-1")
	if other.Status != 409 || !strings.Contains(other.detail(t), "Idempotency-Key") {
		t.Errorf("same key, another secret: %d %s", other.Status, other.Body)
	}
}

// A record stored before the hash was keyed (a plain SHA-256) still
// replays for the same body and conflicts for another, across the upgrade.
func TestIdempotencyLegacyRecordsStillReplay(t *testing.T) {
	var idem store.Idempotency
	e := newEnv(t, func(c *api.Config) { idem = c.Idempotency })
	probe := e.must(200, "POST", "/v2/auth/providers", e.keyA, validProvider("probe"))
	orgID := probe["organization_id"].(string)

	body := validProvider("legacy")
	ctx := context.Background()
	rec := store.IdempotencyRecord{OrgID: orgID, Scope: "createProvider", Key: "old", RequestHash: plainHash(body), CreatedAt: time.Now().UTC()}
	if _, fresh, err := idem.ReserveIdempotencyKey(ctx, rec, time.Hour); err != nil || !fresh {
		t.Fatalf("seed the legacy record: fresh %v, %v", fresh, err)
	}
	if err := idem.CompleteIdempotencyKey(ctx, orgID, "createProvider", "old", 200, []byte(`{"provider_id":"legacy","replayed":"from the old record"}`)); err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", "/v2/auth/providers", e.keyA, body, "Idempotency-Key", "old")
	if r.Status != 200 || !strings.Contains(string(r.Body), "from the old record") {
		t.Errorf("legacy replay: %d %s", r.Status, r.Body)
	}
	r = e.do("POST", "/v2/auth/providers", e.keyA, with(body, "name", "Other"), "Idempotency-Key", "old")
	if r.Status != 409 {
		t.Errorf("legacy record, another body: %d %s", r.Status, r.Body)
	}
}
