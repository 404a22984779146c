package webhooks_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/webhooks"
)

// One secret per organization, the same from every caller and after a
// restart, different between organizations.
func TestOrgKeys(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	orgs := []string{uuid.NewString(), uuid.NewString()}
	for i, id := range orgs {
		if err := db.CreateOrganization(ctx, store.Organization{ID: id, Name: "o" + string(rune('a'+i)), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// Two independent holders (two processes) race for the first secret.
	a, b := &webhooks.OrgKeys{Store: db, Secrets: sec}, &webhooks.OrgKeys{Store: db, Secrets: sec}
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := a
			if i%2 == 1 {
				k = b
			}
			got[i] = first(k.SigningSecrets(ctx, orgs[0]))
		}(i)
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) < 32 || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("secret %d = %q, want one shared secret", i, got[i])
		}
	}
	other := first(a.SigningSecrets(ctx, orgs[1]))
	if bytes.Equal(other, got[0]) {
		t.Errorf("second org secret %q", other)
	}
	again := first((&webhooks.OrgKeys{Store: db, Secrets: sec}).SigningSecrets(ctx, orgs[0]))
	if !bytes.Equal(again, got[0]) {
		t.Errorf("after restart: %q", again)
	}
}

func first(secrets []string, err error) []byte {
	if err != nil || len(secrets) == 0 {
		return nil
	}
	return []byte(secrets[0])
}
