package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/store"
)

// AgentAuthStore is what the agent-auth contract needs of an adapter: the
// port and organizations to own the records.
type AgentAuthStore interface {
	store.AgentAuth
	store.Organizations
}

// AgentAuthContract is the suite of the store.AgentAuth port (agent-auth
// attempts and token records), run by every adapter that has it.
func AgentAuthContract(t *testing.T, open func(t *testing.T) AgentAuthStore) {
	t.Run("Attempts", func(t *testing.T) { testAuthAttempts(t, open(t)) })
	t.Run("Tokens", func(t *testing.T) { testAgentTokens(t, open(t)) })
	t.Run("AgentScope", func(t *testing.T) { testAgentScope(t, open(t)) })
}

func authOrg(t *testing.T, s AgentAuthStore) string {
	t.Helper()
	o := store.Organization{ID: uuid.NewString(), Name: "agentauth-" + uuid.NewString(), CreatedAt: time.Now()}
	if err := s.CreateOrganization(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// when is a time with nanoseconds in a non-UTC zone (see the package doc).
func when(d time.Duration) time.Time {
	return time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("x", 3600)).Add(d)
}

func testAuthAttempts(t *testing.T, s AgentAuthStore) {
	ctx := context.Background()
	org, other := authOrg(t, s), authOrg(t, s)
	a := store.AuthAttempt{ID: uuid.NewString(), OrgID: org, UserID: "u1", ProviderID: "gh", Scopes: []string{"a", "b"},
		StateHash: uuid.NewString(), Status: "pending", CreatedAt: when(0), UpdatedAt: when(0), ExpiresAt: when(time.Minute)}
	if err := s.CreateAuthAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.AuthAttempt(ctx, org, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != "u1" || !slices.Equal(got.Scopes, []string{"a", "b"}) || got.Status != "pending" ||
		!got.ExpiresAt.Equal(when(time.Minute).Truncate(time.Microsecond)) || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("read back %+v", got)
	}
	if _, err := s.AuthAttempt(ctx, other, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another org reads the attempt: %v", err)
	}
	if byState, err := s.AuthAttemptByState(ctx, a.StateHash); err != nil || byState.ID != a.ID {
		t.Errorf("by state: %v %v", byState.ID, err)
	}
	if _, err := s.AuthAttemptByState(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown state: %v", err)
	}
	// Duplicate state hashes are refused (a state names one attempt).
	dup := a
	dup.ID = uuid.NewString()
	if err := s.CreateAuthAttempt(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate state: %v, want ErrConflict", err)
	}

	// Of two concurrent moves from pending, exactly one wins.
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			next := a
			next.Status, next.UpdatedAt = "exchanging", when(time.Second)
			results[i] = s.SetAuthAttemptStatus(ctx, next, "pending")
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrStale):
			t.Errorf("a losing move: %v, want ErrStale", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d moves from pending won, want 1", wins)
	}
	done := a
	done.Status, done.TokenID, done.Error = "completed", "tok-1", ""
	if err := s.SetAuthAttemptStatus(ctx, done, "exchanging"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AuthAttempt(ctx, org, a.ID); got.Status != "completed" || got.TokenID != "tok-1" {
		t.Errorf("after completion %+v", got)
	}
	ghost := a
	ghost.ID = uuid.NewString()
	if err := s.SetAuthAttemptStatus(ctx, ghost, "pending"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown attempt: %v", err)
	}
	// Expired attempts go, with their states; later ones and other
	// organizations' stay.
	later := store.AuthAttempt{ID: uuid.NewString(), OrgID: org, UserID: "u2", ProviderID: "gh", Scopes: []string{},
		StateHash: uuid.NewString(), Status: "pending", CreatedAt: when(0), UpdatedAt: when(0), ExpiresAt: when(time.Hour)}
	theirs := later
	theirs.ID, theirs.OrgID, theirs.StateHash, theirs.ExpiresAt = uuid.NewString(), other, uuid.NewString(), when(time.Minute)
	for _, x := range []store.AuthAttempt{later, theirs} {
		if err := s.CreateAuthAttempt(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.DeleteExpiredAuthAttempts(ctx, org, when(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("delete expired: %d %v, want 1", n, err)
	}
	if _, err := s.AuthAttempt(ctx, org, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired attempt kept: %v", err)
	}
	if _, err := s.AuthAttemptByState(ctx, a.StateHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired attempt's state kept: %v", err)
	}
	if _, err := s.AuthAttempt(ctx, org, later.ID); err != nil {
		t.Errorf("unexpired attempt deleted: %v", err)
	}
	if _, err := s.AuthAttempt(ctx, other, theirs.ID); err != nil {
		t.Errorf("another organization's attempt deleted: %v", err)
	}
}

func testAgentTokens(t *testing.T, s AgentAuthStore) {
	ctx := context.Background()
	org, other := authOrg(t, s), authOrg(t, s)
	tok := func(user string, scopes []string, ref string) store.AgentToken {
		return store.AgentToken{ID: uuid.NewString(), OrgID: org, UserID: user, ProviderID: "gh", Scopes: scopes,
			SecretRef: ref, ExpiresAt: when(time.Hour), Usable: true, CreatedAt: when(0), UpdatedAt: when(0)}
	}
	t1 := tok("u1", []string{"a"}, "ref-1")
	if replaced, err := s.PutAgentToken(ctx, t1); err != nil || replaced != "" {
		t.Fatalf("first put: %q %v", replaced, err)
	}
	// The same key replaces, handing back the replaced value's reference.
	t2 := tok("u1", []string{"a"}, "ref-2")
	if replaced, err := s.PutAgentToken(ctx, t2); err != nil || replaced != "ref-1" {
		t.Fatalf("replacing put: %q %v", replaced, err)
	}
	t3 := tok("u1", []string{"a", "b"}, "ref-3")
	t4 := tok("u2", []string{"a"}, "ref-4")
	t4.ExpiresAt = time.Time{}
	for _, x := range []store.AgentToken{t3, t4} {
		if _, err := s.PutAgentToken(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ts []store.AgentToken) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.SecretRef)
		}
		slices.Sort(out)
		return out
	}
	if got, err := s.AgentTokens(ctx, org, "gh", "u1"); err != nil || !slices.Equal(ids(got), []string{"ref-2", "ref-3"}) {
		t.Errorf("u1's tokens: %v %v", ids(got), err)
	}
	if got, _ := s.AgentTokens(ctx, org, "gh", ""); !slices.Equal(ids(got), []string{"ref-2", "ref-3", "ref-4"}) {
		t.Errorf("all tokens: %v", ids(got))
	}
	if got, _ := s.AgentTokens(ctx, other, "gh", ""); len(got) != 0 {
		t.Errorf("another org lists %v", ids(got))
	}
	if got, err := s.AgentToken(ctx, org, t4.ID); err != nil || !got.ExpiresAt.IsZero() || !got.Usable {
		t.Errorf("no expiry read back as %v (%v)", got.ExpiresAt, err)
	}
	if _, err := s.AgentToken(ctx, other, t4.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another org reads a token: %v", err)
	}

	// Compare-and-swap on the secret reference.
	next := t2
	next.SecretRef, next.ExpiresAt = "ref-2b", when(2*time.Hour)
	if err := s.UpdateAgentToken(ctx, next, "ref-2"); err != nil {
		t.Fatal(err)
	}
	stale := t2
	stale.SecretRef = "ref-2c"
	if err := s.UpdateAgentToken(ctx, stale, "ref-2"); !errors.Is(err, store.ErrStale) {
		t.Errorf("stale update: %v, want ErrStale", err)
	}
	unusable := next
	unusable.Usable = false
	if err := s.UpdateAgentToken(ctx, unusable, "ref-2b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AgentToken(ctx, org, t2.ID); got.Usable || got.SecretRef != "ref-2b" || !got.ExpiresAt.Equal(when(2*time.Hour).Truncate(time.Microsecond)) {
		t.Errorf("after updates %+v", got)
	}
	gone := t2
	gone.ID = uuid.NewString()
	if err := s.UpdateAgentToken(ctx, gone, "ref-2b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown token: %v", err)
	}

	// Deleting one token by id: another organization's id is unknown; a
	// deleted one is gone from the list and by id; twice is ErrNotFound.
	if _, err := s.DeleteAgentToken(ctx, other, t3.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another org deletes a token: %v, want ErrNotFound", err)
	}
	if del, err := s.DeleteAgentToken(ctx, org, t3.ID); err != nil || del.SecretRef != "ref-3" || del.UserID != "u1" {
		t.Errorf("delete one: %+v %v", del, err)
	}
	if _, err := s.DeleteAgentToken(ctx, org, t3.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete one twice: %v, want ErrNotFound", err)
	}
	if _, err := s.AgentToken(ctx, org, t3.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted token read: %v", err)
	}
	if got, _ := s.AgentTokens(ctx, org, "gh", "u1"); !slices.Equal(ids(got), []string{"ref-2b"}) {
		t.Errorf("u1's tokens after deleting one: %v", ids(got))
	}
	// The same key can be stored again.
	t3b := tok("u1", []string{"a", "b"}, "ref-3")
	if _, err := s.PutAgentToken(ctx, t3b); err != nil {
		t.Fatal(err)
	}

	// Deleting one user's, then everyone's.
	if del, err := s.DeleteAgentTokens(ctx, org, "gh", "u2"); err != nil || !slices.Equal(ids(del), []string{"ref-4"}) {
		t.Errorf("delete u2: %v %v", ids(del), err)
	}
	if del, _ := s.DeleteAgentTokens(ctx, other, "gh", ""); len(del) != 0 {
		t.Errorf("another org deleted %v", ids(del))
	}
	if del, err := s.DeleteAgentTokens(ctx, org, "gh", ""); err != nil || !slices.Equal(ids(del), []string{"ref-2b", "ref-3"}) {
		t.Errorf("delete all: %v %v", ids(del), err)
	}
	if got, _ := s.AgentTokens(ctx, org, "gh", ""); len(got) != 0 {
		t.Errorf("left after delete: %v", ids(got))
	}
}

// testAgentScope: the agent is part of a token's key. Tokens of one user,
// provider and scopes for agent A, agent B and unscoped ("") are three
// records; a put replaces only the one of its own agent; the agent reads
// back everywhere (by id, in lists, from deletions); an attempt carries its
// agent to the callback.
func testAgentScope(t *testing.T, s AgentAuthStore) {
	ctx := context.Background()
	org := authOrg(t, s)
	a := store.AuthAttempt{ID: uuid.NewString(), OrgID: org, UserID: "u1", ProviderID: "gh", Scopes: []string{"a"},
		AgentID: "agent-a", StateHash: uuid.NewString(), Status: "pending", CreatedAt: when(0), UpdatedAt: when(0), ExpiresAt: when(time.Minute)}
	if err := s.CreateAuthAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AuthAttemptByState(ctx, a.StateHash); err != nil || got.AgentID != "agent-a" {
		t.Errorf("the attempt's agent read back as %q (%v)", got.AgentID, err)
	}

	tok := func(agent, ref string) store.AgentToken {
		return store.AgentToken{ID: uuid.NewString(), OrgID: org, UserID: "u1", ProviderID: "gh", Scopes: []string{"a"},
			AgentID: agent, SecretRef: ref, ExpiresAt: when(time.Hour), Usable: true, CreatedAt: when(0), UpdatedAt: when(0)}
	}
	unscoped, forA, forB := tok("", "ref-none"), tok("agent-a", "ref-a"), tok("agent-b", "ref-b")
	for _, x := range []store.AgentToken{unscoped, forA, forB} {
		if replaced, err := s.PutAgentToken(ctx, x); err != nil || replaced != "" {
			t.Fatalf("put for agent %q: replaced %q, %v (another agent's token is another key)", x.AgentID, replaced, err)
		}
	}
	agents := func(ts []store.AgentToken) map[string]string {
		out := map[string]string{}
		for _, x := range ts {
			out[x.AgentID] = x.SecretRef
		}
		return out
	}
	want := map[string]string{"": "ref-none", "agent-a": "ref-a", "agent-b": "ref-b"}
	if got, err := s.AgentTokens(ctx, org, "gh", "u1"); err != nil || len(got) != 3 || !maps.Equal(agents(got), want) {
		t.Errorf("u1's tokens by agent: %v %v, want %v", agents(got), err, want)
	}
	if got, err := s.AgentToken(ctx, org, forA.ID); err != nil || got.AgentID != "agent-a" || got.SecretRef != "ref-a" {
		t.Errorf("agent A's token by id: %+v %v", got, err)
	}

	// A put for agent A replaces A's token only.
	forA2 := tok("agent-a", "ref-a2")
	if replaced, err := s.PutAgentToken(ctx, forA2); err != nil || replaced != "ref-a" {
		t.Fatalf("replacing A's token: %q %v", replaced, err)
	}
	want["agent-a"] = "ref-a2"
	if got, _ := s.AgentTokens(ctx, org, "gh", ""); len(got) != 3 || !maps.Equal(agents(got), want) {
		t.Errorf("after replacing A's token: %v, want %v", agents(got), want)
	}
	if _, err := s.AgentToken(ctx, org, forA.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the replaced token of A is still read by id: %v", err)
	}

	// Updating and deleting an agent's token by id touch it alone.
	next := forA2
	next.Usable = false
	if err := s.UpdateAgentToken(ctx, next, "ref-a2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.AgentToken(ctx, org, unscoped.ID); !got.Usable {
		t.Errorf("marking A's token unusable marked the unscoped one")
	}
	if del, err := s.DeleteAgentToken(ctx, org, forB.ID); err != nil || del.AgentID != "agent-b" {
		t.Errorf("delete B's token: %+v %v", del, err)
	}
	delete(want, "agent-b")
	if del, err := s.DeleteAgentTokens(ctx, org, "gh", "u1"); err != nil || !maps.Equal(agents(del), want) {
		t.Errorf("delete u1's tokens: %v %v, want every agent's and the unscoped one %v", agents(del), err, want)
	}
	if got, _ := s.AgentTokens(ctx, org, "gh", ""); len(got) != 0 {
		t.Errorf("left: %v", agents(got))
	}
}
