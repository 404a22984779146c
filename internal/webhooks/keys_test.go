package webhooks_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets"
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

// keysEnv is a real SQLite store and secrets file with one organization.
func keysEnv(t *testing.T) (*sqlite.DB, *local.Store, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	org := uuid.NewString()
	if err := db.CreateOrganization(context.Background(), store.Organization{ID: org, Name: "rot", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return db, sec, org
}

// clock is a settable time shared by the holders of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Rotation, as a server (a) and the CLI (b, another process) see it: the
// server's cache notices the CLI's rotation on its next call, both secrets
// sign during the overlap, the old one stops at its end (whatever was
// cached) and its value leaves the secrets store; a later rotation with a
// shorter overlap ends the older ones too; overlap 0 drops them at once.
func TestRotation(t *testing.T) {
	db, sec, org := keysEnv(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	server := &webhooks.OrgKeys{Store: db, Secrets: sec, Now: c.now}
	cli := func() *webhooks.OrgKeys { return &webhooks.OrgKeys{Store: db, Secrets: sec, Now: c.now} }
	signing := func(k *webhooks.OrgKeys) []string {
		t.Helper()
		got, err := k.SigningSecrets(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	rotate := func(overlap time.Duration) (string, time.Time) {
		t.Helper()
		s, until, err := cli().Rotate(ctx, org, overlap)
		if err != nil || !strings.HasPrefix(s, "whsec_") {
			t.Fatalf("rotate: %q %v", s, err)
		}
		return s, until
	}
	want := func(step string, got []string, secrets ...string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(secrets, " ") {
			t.Errorf("%s: signing with %d secrets %v, want %d %v", step, len(got), got, len(secrets), secrets)
		}
	}

	s1 := signing(server)[0]
	s2, until := rotate(time.Hour)
	if !until.Equal(c.now().Add(time.Hour)) {
		t.Errorf("the overlap ends at %v, want an hour from now", until)
	}
	want("after the CLI's rotation", signing(server), s2, s1)
	want("a new process", signing(cli()), s2, s1)
	c.add(59 * time.Minute)
	want("within the overlap", signing(server), s2, s1)
	c.add(time.Minute)
	want("at the overlap's end", signing(server), s2)
	ref1, _ := db.OrganizationSecretRef(ctx, org, "webhook_signing")
	if _, err := sec.Get(ctx, ref1); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("the rotated-away secret is still in the secrets store: %v", err)
	}
	want("a new process after the overlap", signing(cli()), s2)

	s3, _ := rotate(time.Hour)
	s4, _ := rotate(2 * time.Hour)
	want("two rotations", signing(server), s4, s3, s2)
	c.add(time.Hour)
	want("the first overlap ended", signing(server), s4, s3)
	c.add(time.Hour)
	want("both ended", signing(server), s4)

	s5, _ := rotate(3 * time.Hour)
	s6, _ := rotate(time.Minute) // a shorter overlap: s5 and s4 end with it
	want("short after long", signing(server), s6, s5, s4)
	c.add(time.Minute)
	want("the short overlap ended", signing(server), s6)

	s7, _ := rotate(0)
	want("overlap 0", signing(server), s7)
	for i := 0; i < 9; i++ { // a cold process finds the newest of many
		rotate(0)
	}
	latest, _ := rotate(time.Hour)
	if got := signing(cli()); len(got) != 2 || got[0] != latest {
		t.Errorf("a new process after 18 generations: %v, want the latest and its predecessor", got)
	}
	for _, bad := range []time.Duration{-time.Second, webhooks.MaxOverlap + time.Second} {
		if _, _, err := cli().Rotate(ctx, org, bad); err == nil || !strings.HasPrefix(err.Error(), "overlap: must be between") {
			t.Errorf("overlap %v: %v, want a rule naming overlap", bad, err)
		}
	}
}

// Processes rotating at once: each rotation either wins a generation or is
// refused with a conflict; the generations have no gap and the server signs
// with the last winner.
func TestConcurrentRotations(t *testing.T) {
	db, sec, org := keysEnv(t)
	ctx := context.Background()
	server := &webhooks.OrgKeys{Store: db, Secrets: sec}
	if _, err := server.SigningSecrets(ctx, org); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]bool{}
	for range 6 {
		wg.Go(func() {
			s, _, err := (&webhooks.OrgKeys{Store: db, Secrets: sec}).Rotate(ctx, org, 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won[s] = true
			case fail.KindOf(err) != fail.KindConflict:
				t.Errorf("rotation failed otherwise than by a conflict: %v", err)
			}
		})
	}
	wg.Wait()
	got, err := server.SigningSecrets(ctx, org)
	if err != nil || len(got) != 1 || !won[got[0]] {
		t.Errorf("signing with %v (%v), want one of the %d winners", got, err, len(won))
	}
	for g := 2; g <= len(won)+1; g++ {
		if _, err := db.OrganizationSecretRef(ctx, org, "webhook_signing."+strconv.Itoa(g)); err != nil {
			t.Errorf("generation %d of %d winners: %v", g, len(won), err)
		}
	}
}

// A secret made before rotation existed (whsec_ and 64 hex digits, stored
// bare) keeps signing, and rotates like the others.
func TestLegacySecretRotates(t *testing.T) {
	db, sec, org := keysEnv(t)
	ctx := context.Background()
	legacy := "whsec_" + strings.Repeat("3f", 32)
	ref, err := sec.Create(ctx, "orgs/"+org+"/webhook", []byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetOrganizationSecretRef(ctx, org, "webhook_signing", ref); err != nil {
		t.Fatal(err)
	}
	k := &webhooks.OrgKeys{Store: db, Secrets: sec}
	if got, err := k.SigningSecrets(ctx, org); err != nil || len(got) != 1 || got[0] != legacy {
		t.Fatalf("legacy secret: %v %v", got, err)
	}
	s, _, err := k.Rotate(ctx, org, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := k.SigningSecrets(ctx, org); len(got) != 2 || got[0] != s || got[1] != legacy {
		t.Errorf("after rotating a legacy secret: %v", got)
	}
	if _, err := webhooks.Sign([]string{s, legacy}, "msg_1", 1, []byte("{}")); err != nil {
		t.Errorf("signing with both: %v", err)
	}
}
