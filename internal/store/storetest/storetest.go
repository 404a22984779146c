// Package storetest is the contract every store.Store adapter must honour: Run
// exercises each method of the port against the semantics documented in
// package store, and nothing beyond them.
//
// The suite never assumes the store is empty: the organizations, API key
// hashes, idempotency keys and the statuses it queries across organizations are
// new on every run, so an adapter may share one backing table or file between
// the stores open returns. Times carry nanoseconds in a non-UTC
// zone; adapters must give them back in UTC, equal to the written value
// truncated to the microsecond.
//
// ClaimRun is the one method that cannot be scoped: its tests first park every
// run left claimable by earlier tests (see RunsContract), so they assume no
// one else claims runs from the store while the suite runs.
//
// The suite's files follow the ports: storetest.go (the shared fixtures,
// organizations, API keys, providers, deployments, idempotency),
// orgsecrets.go, assistants.go, threads.go, runs.go (adding runs and what
// happens to the inflight ones, cancelling, listing, isolation,
// concurrency), claim.go (claims, leases, finishing), fairness.go (the
// per-organization cap and the organizations' turns), checkpoints.go with
// checkpointbatch.go, usage.go (the accounting of what each organization
// stores), sizes.go (documents far larger than a database item: a state
// past 1 MB, 5 MB results), and events.go: EventsContract, the suite of the store.Events
// port (an adapter's event log, run on its own), with threadevents.go:
// ThreadEventsContract, its thread-keyed half (which needs threads).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Run runs the contract suite. open must return a working store for t and
// arrange its cleanup with t.Cleanup; the suite may Close a store itself, so
// that cleanup must tolerate a store already closed.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Organizations", func(t *testing.T) { testOrganizations(t, open(t)) })
	t.Run("APIKeys", func(t *testing.T) { testAPIKeys(t, open(t)) })
	t.Run("Providers", func(t *testing.T) { testProviders(t, open(t)) })
	t.Run("Deployments", func(t *testing.T) { testDeployments(t, open(t)) })
	t.Run("DeploymentList", func(t *testing.T) { testDeploymentList(t, open(t)) })
	t.Run("DeploymentWrites", func(t *testing.T) { testDeploymentWrites(t, open(t)) })
	t.Run("Revisions", func(t *testing.T) { testRevisions(t, open(t)) })
	t.Run("AcrossOrganizations", func(t *testing.T) { testAcrossOrganizations(t, open(t)) })
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, open(t)) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, open(t)) })
	t.Run("OrganizationSecrets", func(t *testing.T) { runOrgSecrets(t, open) })
	t.Run("Runs", func(t *testing.T) { RunsContract(t, open) })
	t.Run("Crons", func(t *testing.T) { CronsContract(t, open) })
	t.Run("CallBudgets", func(t *testing.T) { testCallBudgets(t, open(t)) })
	t.Run("Close", func(t *testing.T) {
		if err := open(t).Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

// ---- fixtures and helpers ----------------------------------------------------

// zone is a non-UTC zone: adapters must hand times back in UTC.
var zone = time.FixedZone("UTC+5:30", 5*3600+1800)

// at returns a time with nanoseconds (below the guaranteed precision) that is
// offset seconds after a fixed instant in the past.
func at(offset int) time.Time {
	return time.Date(2024, 3, 9, 17, 4, 5, 123456789, zone).Add(time.Duration(offset) * time.Second)
}

func newID() string { return uuid.NewString() }

// unique returns prefix plus a random suffix.
func unique(prefix string) string { return prefix + "-" + uuid.NewString()[:13] }

// doc is an opaque document whose exact bytes (key order, spacing, escapes)
// must survive a round trip.
func doc(tag string) []byte {
	return []byte(fmt.Sprintf("{ \"z\": %q,\n\t\"a\" : [1, 2.50, \"\\u00e9 \\\"q\\\" ünï\"]  }", tag))
}

func ctx() context.Context { return context.Background() }

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error = %v, want %v", what, err, want)
	}
}

// checkTime compares a time read back with the one written.
func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if got.Location() != time.UTC {
		t.Errorf("%s: location %v, want UTC", what, got.Location())
	}
	if !got.Truncate(time.Microsecond).Equal(want.Truncate(time.Microsecond)) {
		t.Errorf("%s: %v, want %v (to the microsecond)", what, got.UTC(), want.UTC())
	}
}

// checkBytes compares opaque bytes exactly (nil and empty are the same).
func checkBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

func checkRest(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func eqOrganization(t *testing.T, got, want store.Organization) {
	t.Helper()
	checkTime(t, "organization CreatedAt", got.CreatedAt, want.CreatedAt)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	checkRest(t, "organization", got, want)
}

func eqAPIKey(t *testing.T, got, want store.APIKey) {
	t.Helper()
	checkTime(t, "api key CreatedAt", got.CreatedAt, want.CreatedAt)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	checkRest(t, "api key", got, want)
}

func eqProvider(t *testing.T, got, want store.Provider) {
	t.Helper()
	checkTime(t, "provider CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "provider UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	checkRest(t, "provider", got, want)
}

func eqDeployment(t *testing.T, got, want store.Deployment) {
	t.Helper()
	checkTime(t, "deployment CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "deployment UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkBytes(t, "deployment Doc", got.Doc, want.Doc)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Doc, want.Doc = nil, nil
	checkRest(t, "deployment", got, want)
}

func eqRevision(t *testing.T, got, want store.Revision) {
	t.Helper()
	checkTime(t, "revision CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "revision UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkBytes(t, "revision Doc", got.Doc, want.Doc)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	got.Doc, want.Doc = nil, nil
	checkRest(t, "revision", got, want)
}

func eqIdempotency(t *testing.T, got, want store.IdempotencyRecord) {
	t.Helper()
	checkTime(t, "idempotency CreatedAt", got.CreatedAt, want.CreatedAt)
	checkBytes(t, "idempotency Body", got.Body, want.Body)
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.Body, want.Body = nil, nil
	checkRest(t, "idempotency record", got, want)
}

// newOrg creates an organization and returns its ID. Adapters need not
// require one for providers or deployments, but may.
func newOrg(t *testing.T, s store.Store) string {
	t.Helper()
	org := store.Organization{ID: newID(), Name: unique("org"), CreatedAt: at(0)}
	must(t, "CreateOrganization", s.CreateOrganization(ctx(), org))
	return org.ID
}

func newProvider(orgID, providerID string, created time.Time) store.Provider {
	return store.Provider{
		ID:                      newID(),
		OrgID:                   orgID,
		ProviderID:              providerID,
		Name:                    "Provider " + providerID,
		ClientID:                "client-" + providerID,
		ClientSecretRef:         "secret/" + providerID,
		AuthURL:                 "https://auth.example.com/authorize",
		TokenURL:                "https://auth.example.com/token",
		UsesPKCE:                true,
		CodeChallengeMethod:     "S256",
		ProviderType:            "",
		TokenEndpointAuthMethod: "client_secret_post",
		CreatedAt:               created,
		UpdatedAt:               created.Add(time.Millisecond),
	}
}

// newDeployment returns a deployment and its first revision, created at created.
func newDeployment(orgID, name string, created time.Time) (store.Deployment, store.Revision) {
	rev := store.Revision{
		ID:           newID(),
		OrgID:        orgID,
		Status:       "pending",
		StatusReason: "created",
		Doc:          doc("rev-" + name),
		Version:      7, // ignored: stored Versions start at 1
		CreatedAt:    created,
		UpdatedAt:    created,
	}
	d := store.Deployment{
		ID:               newID(),
		OrgID:            orgID,
		Name:             name,
		Status:           "pending",
		LatestRevisionID: rev.ID,
		Doc:              doc("dep-" + name),
		Version:          42, // ignored: stored Versions start at 1
		CreatedAt:        created,
		UpdatedAt:        created,
	}
	rev.DeploymentID = d.ID
	return d, rev
}

// createDeployment stores a new deployment and returns it and its first
// revision as they must read back.
func createDeployment(t *testing.T, s store.Store, orgID, name string, created time.Time) (store.Deployment, store.Revision) {
	t.Helper()
	d, r := newDeployment(orgID, name, created)
	must(t, "CreateDeployment "+name, s.CreateDeployment(ctx(), d, r))
	d.Version, r.Version = 1, 1
	return d, r
}

func deploymentNames(ds []store.Deployment) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

// idsOf returns the ID field of each record, in order ([]string{} for none).
func idsOf[T any](records []T) []string {
	out := []string{}
	for _, r := range records {
		out = append(out, reflect.ValueOf(r).FieldByName("ID").String())
	}
	return out
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// ---- organizations and API keys ---------------------------------------------

func testOrganizations(t *testing.T, s store.Store) {
	org := store.Organization{ID: newID(), Name: unique("acme"), CreatedAt: at(0)}
	must(t, "CreateOrganization", s.CreateOrganization(ctx(), org))

	got, err := s.OrganizationByName(ctx(), org.Name)
	must(t, "OrganizationByName", err)
	eqOrganization(t, got, org)

	err = s.CreateOrganization(ctx(), store.Organization{ID: newID(), Name: org.Name, CreatedAt: at(1)})
	wantErr(t, "CreateOrganization with a taken name", err, store.ErrConflict)
	got, err = s.OrganizationByName(ctx(), org.Name)
	must(t, "OrganizationByName after conflict", err)
	eqOrganization(t, got, org)

	other := store.Organization{ID: newID(), Name: unique("other"), CreatedAt: at(2)}
	must(t, "CreateOrganization other", s.CreateOrganization(ctx(), other))
	got, err = s.OrganizationByName(ctx(), other.Name)
	must(t, "OrganizationByName other", err)
	eqOrganization(t, got, other)

	for _, name := range []string{unique("missing"), "", org.Name + "x", org.Name[:len(org.Name)-1]} {
		_, err = s.OrganizationByName(ctx(), name)
		wantErr(t, fmt.Sprintf("OrganizationByName(%q)", name), err, store.ErrNotFound)
	}
}

func testAPIKeys(t *testing.T, s store.Store) {
	orgA, orgB := newOrg(t, s), newOrg(t, s)
	key := store.APIKey{ID: newID(), OrgID: orgA, Hash: unique("hash"), CreatedAt: at(3)}
	must(t, "CreateAPIKey", s.CreateAPIKey(ctx(), key))
	keyB := store.APIKey{ID: newID(), OrgID: orgB, Hash: unique("hash"), CreatedAt: at(4)}
	must(t, "CreateAPIKey org B", s.CreateAPIKey(ctx(), keyB))

	got, err := s.APIKeyByHash(ctx(), key.Hash)
	must(t, "APIKeyByHash", err)
	eqAPIKey(t, got, key)
	got, err = s.APIKeyByHash(ctx(), keyB.Hash)
	must(t, "APIKeyByHash org B", err)
	eqAPIKey(t, got, keyB)

	tests := []struct {
		name string
		key  store.APIKey
		want error
	}{
		{"duplicate hash", store.APIKey{ID: newID(), OrgID: orgA, Hash: key.Hash, CreatedAt: at(5)}, store.ErrConflict},
		{"duplicate hash in another org", store.APIKey{ID: newID(), OrgID: orgB, Hash: key.Hash, CreatedAt: at(5)}, store.ErrConflict},
		{"duplicate ID", store.APIKey{ID: key.ID, OrgID: orgA, Hash: unique("hash"), CreatedAt: at(5)}, store.ErrConflict},
		{"unknown organization", store.APIKey{ID: newID(), OrgID: newID(), Hash: unique("hash"), CreatedAt: at(5)}, store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "CreateAPIKey", s.CreateAPIKey(ctx(), tc.key), tc.want)
			if tc.key.Hash != key.Hash {
				_, err := s.APIKeyByHash(ctx(), tc.key.Hash)
				wantErr(t, "APIKeyByHash of the rejected key", err, store.ErrNotFound)
			}
		})
	}
	got, err = s.APIKeyByHash(ctx(), key.Hash)
	must(t, "APIKeyByHash after conflicts", err)
	eqAPIKey(t, got, key)

	_, err = s.APIKeyByHash(ctx(), unique("hash"))
	wantErr(t, "APIKeyByHash unknown", err, store.ErrNotFound)

	// Revocation: the key is gone, the other org's key stays, and its ID
	// is free again.
	must(t, "DeleteAPIKey", s.DeleteAPIKey(ctx(), key.Hash))
	_, err = s.APIKeyByHash(ctx(), key.Hash)
	wantErr(t, "APIKeyByHash after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteAPIKey twice", s.DeleteAPIKey(ctx(), key.Hash), store.ErrNotFound)
	got, err = s.APIKeyByHash(ctx(), keyB.Hash)
	must(t, "APIKeyByHash of the other key after delete", err)
	eqAPIKey(t, got, keyB)
	must(t, "CreateAPIKey reusing a revoked key's ID", s.CreateAPIKey(ctx(), store.APIKey{ID: key.ID, OrgID: orgA, Hash: unique("hash"), CreatedAt: at(6)}))
}

// ---- providers ----------------------------------------------------------------

func testProviders(t *testing.T, s store.Store) {
	orgA, orgB := newOrg(t, s), newOrg(t, s)

	t.Run("CreateAndGet", func(t *testing.T) {
		p := newProvider(orgA, "github", at(10))
		must(t, "CreateProvider", s.CreateProvider(ctx(), p))
		got, err := s.Provider(ctx(), orgA, "github")
		must(t, "Provider", err)
		eqProvider(t, got, p)

		dup := newProvider(orgA, "github", at(11))
		dup.Name = "Duplicate"
		wantErr(t, "CreateProvider duplicate provider_id", s.CreateProvider(ctx(), dup), store.ErrConflict)
		got, err = s.Provider(ctx(), orgA, "github")
		must(t, "Provider after conflict", err)
		eqProvider(t, got, p)

		inB := newProvider(orgB, "github", at(12))
		inB.ClientID = "client-of-b"
		inB.UsesPKCE = false
		inB.ProviderType = "github"
		must(t, "CreateProvider same provider_id in another org", s.CreateProvider(ctx(), inB))
		got, err = s.Provider(ctx(), orgB, "github")
		must(t, "Provider org B", err)
		eqProvider(t, got, inB)
		got, err = s.Provider(ctx(), orgA, "github")
		must(t, "Provider org A untouched", err)
		eqProvider(t, got, p)
	})

	t.Run("NotFound", func(t *testing.T) {
		p := newProvider(orgA, "only-in-a", at(13))
		must(t, "CreateProvider", s.CreateProvider(ctx(), p))
		tests := []struct{ org, id string }{
			{orgA, "missing"},
			{orgB, "only-in-a"}, // another organization's record
			{newID(), "only-in-a"},
			{"", "only-in-a"},
		}
		for _, tc := range tests {
			_, err := s.Provider(ctx(), tc.org, tc.id)
			wantErr(t, fmt.Sprintf("Provider(%q, %q)", tc.org, tc.id), err, store.ErrNotFound)
		}
	})

	t.Run("ListOldestFirst", func(t *testing.T) {
		org, other := newOrg(t, s), newOrg(t, s)
		// Inserted out of time order: the list follows CreatedAt.
		for _, c := range []struct {
			id  string
			off int
		}{{"p2", 2}, {"p0", 0}, {"p3", 3}, {"p1", 1}} {
			must(t, "CreateProvider "+c.id, s.CreateProvider(ctx(), newProvider(org, c.id, at(100+c.off))))
		}
		must(t, "CreateProvider other org", s.CreateProvider(ctx(), newProvider(other, "p9", at(99))))

		got, err := s.ListProviders(ctx(), org)
		must(t, "ListProviders", err)
		var ids []string
		for _, p := range got {
			ids = append(ids, p.ProviderID)
			if p.OrgID != org {
				t.Errorf("ListProviders returned provider %s of org %s", p.ProviderID, p.OrgID)
			}
		}
		checkRest(t, "ListProviders order", ids, []string{"p0", "p1", "p2", "p3"})
		if len(got) > 0 {
			eqProvider(t, got[0], func() store.Provider {
				want := newProvider(org, "p0", at(100))
				want.ID = got[0].ID
				return want
			}())
		}

		empty, err := s.ListProviders(ctx(), newID())
		must(t, "ListProviders of an org without providers", err)
		if len(empty) != 0 {
			t.Errorf("ListProviders of an empty org = %d providers, want 0", len(empty))
		}
	})

	t.Run("Update", func(t *testing.T) {
		p := newProvider(orgA, "to-update", at(20))
		must(t, "CreateProvider", s.CreateProvider(ctx(), p))
		inB := newProvider(orgB, "to-update", at(20))
		must(t, "CreateProvider org B", s.CreateProvider(ctx(), inB))

		u := p
		u.Name = "Renamed"
		u.ClientID = "new-client"
		u.ClientSecretRef = ""
		u.AuthURL = "https://login.example.org/oauth/authorize"
		u.TokenURL = "https://login.example.org/oauth/token"
		u.RevocationURL = "https://login.example.org/oauth/revoke"
		u.UsesPKCE = false
		u.CodeChallengeMethod = ""
		u.ProviderType = "google"
		u.TokenEndpointAuthMethod = "client_secret_basic"
		u.UpdatedAt = at(21)
		must(t, "UpdateProvider", s.UpdateProvider(ctx(), u))
		got, err := s.Provider(ctx(), orgA, "to-update")
		must(t, "Provider after update", err)
		eqProvider(t, got, u)

		got, err = s.Provider(ctx(), orgB, "to-update")
		must(t, "Provider org B after update in A", err)
		eqProvider(t, got, inB)

		missing := newProvider(orgA, "never-created", at(22))
		wantErr(t, "UpdateProvider missing", s.UpdateProvider(ctx(), missing), store.ErrNotFound)
		_, err = s.Provider(ctx(), orgA, "never-created")
		wantErr(t, "Provider after failed update", err, store.ErrNotFound)

		foreign := newProvider(newID(), "to-update", at(22))
		wantErr(t, "UpdateProvider in an org without it", s.UpdateProvider(ctx(), foreign), store.ErrNotFound)
	})

	t.Run("Delete", func(t *testing.T) {
		p := newProvider(orgA, "to-delete", at(30))
		must(t, "CreateProvider", s.CreateProvider(ctx(), p))
		inB := newProvider(orgB, "to-delete", at(30))
		must(t, "CreateProvider org B", s.CreateProvider(ctx(), inB))

		wantErr(t, "DeleteProvider from another org", s.DeleteProvider(ctx(), newID(), "to-delete"), store.ErrNotFound)
		must(t, "DeleteProvider", s.DeleteProvider(ctx(), orgA, "to-delete"))
		_, err := s.Provider(ctx(), orgA, "to-delete")
		wantErr(t, "Provider after delete", err, store.ErrNotFound)
		wantErr(t, "DeleteProvider again", s.DeleteProvider(ctx(), orgA, "to-delete"), store.ErrNotFound)
		wantErr(t, "DeleteProvider missing", s.DeleteProvider(ctx(), orgA, "never-created"), store.ErrNotFound)

		got, err := s.Provider(ctx(), orgB, "to-delete")
		must(t, "Provider org B after delete in A", err)
		eqProvider(t, got, inB)

		// The key is free again.
		again := newProvider(orgA, "to-delete", at(31))
		must(t, "CreateProvider after delete", s.CreateProvider(ctx(), again))
		got, err = s.Provider(ctx(), orgA, "to-delete")
		must(t, "Provider re-created", err)
		eqProvider(t, got, again)
	})
}

// ---- deployments ---------------------------------------------------------------

func testDeployments(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	t.Run("CreateAndGet", func(t *testing.T) {
		d, r := newDeployment(org, "web", at(40))
		must(t, "CreateDeployment", s.CreateDeployment(ctx(), d, r))
		d.Version, r.Version = 1, 1

		got, err := s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment", err)
		eqDeployment(t, got, d)
		rev, err := s.Revision(ctx(), org, d.ID, r.ID)
		must(t, "Revision", err)
		eqRevision(t, rev, r)
		revs, err := s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{})
		must(t, "ListRevisions", err)
		checkRest(t, "revisions of a new deployment", idsOf(revs), []string{r.ID})

		for _, c := range []struct{ org, id string }{{other, d.ID}, {newID(), d.ID}, {org, newID()}} {
			_, err := s.Deployment(ctx(), c.org, c.id)
			wantErr(t, fmt.Sprintf("Deployment(%q, %q)", c.org, c.id), err, store.ErrNotFound)
		}
	})

	t.Run("DuplicateName", func(t *testing.T) {
		first, firstRev := createDeployment(t, s, org, "api", at(41))

		d, r := newDeployment(org, "api", at(42))
		wantErr(t, "CreateDeployment duplicate name", s.CreateDeployment(ctx(), d, r), store.ErrConflict)
		_, err := s.Deployment(ctx(), org, d.ID)
		wantErr(t, "Deployment of the rejected create", err, store.ErrNotFound)
		_, err = s.Revision(ctx(), org, d.ID, r.ID)
		wantErr(t, "Revision of the rejected create", err, store.ErrNotFound)
		_, err = s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{})
		wantErr(t, "ListRevisions of the rejected create", err, store.ErrNotFound)

		got, err := s.Deployment(ctx(), org, first.ID)
		must(t, "Deployment of the first", err)
		eqDeployment(t, got, first)
		revs, err := s.ListRevisions(ctx(), org, first.ID, store.RevisionFilter{})
		must(t, "ListRevisions of the first", err)
		checkRest(t, "revisions of the first", idsOf(revs), []string{firstRev.ID})

		// The same name in another organization is fine.
		createDeployment(t, s, other, "api", at(43))
	})

	t.Run("Delete", func(t *testing.T) {
		d, r := createDeployment(t, s, org, "to-delete", at(44))
		d2, err := s.AddRevision(ctx(), d, store.Revision{
			ID: newID(), OrgID: org, DeploymentID: d.ID, Status: "pending",
			Doc: doc("second"), CreatedAt: at(45), UpdatedAt: at(45),
		})
		must(t, "AddRevision", err)
		revs, err := s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{})
		must(t, "ListRevisions", err)
		if len(revs) != 2 {
			t.Fatalf("ListRevisions = %d revisions, want 2", len(revs))
		}

		wantErr(t, "DeleteDeployment from another org", s.DeleteDeployment(ctx(), other, d.ID), store.ErrNotFound)
		_, err = s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after a foreign delete", err)

		must(t, "DeleteDeployment", s.DeleteDeployment(ctx(), org, d.ID))
		_, err = s.Deployment(ctx(), org, d.ID)
		wantErr(t, "Deployment after delete", err, store.ErrNotFound)
		for _, rev := range revs {
			_, err = s.Revision(ctx(), org, d.ID, rev.ID)
			wantErr(t, "Revision after delete", err, store.ErrNotFound)
		}
		_, err = s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{})
		wantErr(t, "ListRevisions after delete", err, store.ErrNotFound)
		_, err = s.UpdateDeployment(ctx(), d2)
		wantErr(t, "UpdateDeployment after delete", err, store.ErrNotFound)
		_, err = s.UpdateRevision(ctx(), r)
		wantErr(t, "UpdateRevision after delete", err, store.ErrNotFound)
		wantErr(t, "DeleteDeployment again", s.DeleteDeployment(ctx(), org, d.ID), store.ErrNotFound)
		wantErr(t, "DeleteDeployment missing", s.DeleteDeployment(ctx(), org, newID()), store.ErrNotFound)

		// The name is free again.
		createDeployment(t, s, org, "to-delete", at(46))
	})
}

func testDeploymentList(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	// Created out of time order: the list follows CreatedAt, newest first.
	fixtures := []struct {
		name, status string
		off          int
	}{
		{"beta-api", "ready", 3},
		{"alpha-api", "failed", 1},
		{"Alpha-web", "ready", 4},
		{"gamma-worker", "pending", 2},
		{"delta-API", "ready", 0},
	}
	for _, f := range fixtures {
		d, r := newDeployment(org, f.name, at(200+f.off))
		d.Status = f.status
		must(t, "CreateDeployment "+f.name, s.CreateDeployment(ctx(), d, r))
	}
	for _, name := range []string{"alpha-api", "other-api"} {
		d, r := newDeployment(other, name, at(250))
		d.Status = "ready"
		must(t, "CreateDeployment other org "+name, s.CreateDeployment(ctx(), d, r))
	}

	tests := []struct {
		name   string
		filter store.DeploymentFilter
		want   []string
	}{
		{"all newest first", store.DeploymentFilter{}, []string{"Alpha-web", "beta-api", "gamma-worker", "alpha-api", "delta-API"}},
		{"name contains", store.DeploymentFilter{NameContains: "api"}, []string{"beta-api", "alpha-api"}},
		{"name contains is case-sensitive", store.DeploymentFilter{NameContains: "Alpha"}, []string{"Alpha-web"}},
		{"name contains lower case", store.DeploymentFilter{NameContains: "alpha"}, []string{"alpha-api"}},
		{"name contains upper case", store.DeploymentFilter{NameContains: "API"}, []string{"delta-API"}},
		{"name contains inner substring", store.DeploymentFilter{NameContains: "ha-w"}, []string{"Alpha-web"}},
		{"name contains whole name", store.DeploymentFilter{NameContains: "gamma-worker"}, []string{"gamma-worker"}},
		{"name contains nothing matches", store.DeploymentFilter{NameContains: "zeta"}, nil},
		{"name exactly", store.DeploymentFilter{Name: "alpha-api"}, []string{"alpha-api"}},
		{"name exactly is case-sensitive", store.DeploymentFilter{Name: "Alpha-API"}, nil},
		{"name exactly is not a substring", store.DeploymentFilter{Name: "alpha"}, nil},
		{"name exactly and contains", store.DeploymentFilter{Name: "delta-API", NameContains: "API"}, []string{"delta-API"}},
		{"name contains is not a pattern", store.DeploymentFilter{NameContains: "%"}, nil},
		{"name contains is not a wildcard", store.DeploymentFilter{NameContains: "_"}, nil},
		{"status", store.DeploymentFilter{Status: "ready"}, []string{"Alpha-web", "beta-api", "delta-API"}},
		{"status none", store.DeploymentFilter{Status: "deleting"}, nil},
		{"status and name", store.DeploymentFilter{Status: "ready", NameContains: "api"}, []string{"beta-api"}},
		{"limit", store.DeploymentFilter{Limit: 2}, []string{"Alpha-web", "beta-api"}},
		{"limit and offset", store.DeploymentFilter{Limit: 2, Offset: 2}, []string{"gamma-worker", "alpha-api"}},
		{"offset only", store.DeploymentFilter{Offset: 3}, []string{"alpha-api", "delta-API"}},
		{"offset past the end", store.DeploymentFilter{Offset: 5}, nil},
		{"filter then page", store.DeploymentFilter{Status: "ready", Limit: 1, Offset: 1}, []string{"beta-api"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListDeployments(ctx(), org, tc.filter)
			must(t, "ListDeployments", err)
			names := deploymentNames(got)
			if len(names) == 0 {
				names = nil
			}
			checkRest(t, fmt.Sprintf("ListDeployments(%+v)", tc.filter), names, tc.want)
			for _, d := range got {
				if d.OrgID != org {
					t.Errorf("ListDeployments returned %s of org %s", d.Name, d.OrgID)
				}
			}
		})
	}

	t.Run("records", func(t *testing.T) {
		d, r := newDeployment(org, "full-record", at(300))
		d.ActiveRevisionID = r.ID
		d.Status = "ready"
		must(t, "CreateDeployment", s.CreateDeployment(ctx(), d, r))
		d.Version = 1
		got, err := s.ListDeployments(ctx(), org, store.DeploymentFilter{Limit: 1})
		must(t, "ListDeployments", err)
		if len(got) != 1 {
			t.Fatalf("ListDeployments = %d, want 1", len(got))
		}
		eqDeployment(t, got[0], d)
	})

	t.Run("default page of 20", func(t *testing.T) {
		big := newOrg(t, s)
		var want []string // newest first
		for i := 0; i < 25; i++ {
			name := fmt.Sprintf("dep-%02d", i)
			d, r := newDeployment(big, name, at(400+i))
			must(t, "CreateDeployment "+name, s.CreateDeployment(ctx(), d, r))
			want = append([]string{name}, want...)
		}
		pages := []struct {
			filter store.DeploymentFilter
			want   []string
		}{
			{store.DeploymentFilter{}, want[:20]},
			{store.DeploymentFilter{Offset: 20}, want[20:]},
			{store.DeploymentFilter{Limit: 10, Offset: 5}, want[5:15]},
			{store.DeploymentFilter{Limit: 100}, want},
			{store.DeploymentFilter{Offset: 30}, nil},
		}
		for _, p := range pages {
			got, err := s.ListDeployments(ctx(), big, p.filter)
			must(t, "ListDeployments", err)
			names := deploymentNames(got)
			if len(names) == 0 {
				names = nil
			}
			checkRest(t, fmt.Sprintf("ListDeployments(%+v)", p.filter), names, p.want)
		}
	})

	t.Run("empty organization", func(t *testing.T) {
		got, err := s.ListDeployments(ctx(), newID(), store.DeploymentFilter{})
		must(t, "ListDeployments", err)
		if len(got) != 0 {
			t.Errorf("ListDeployments of an empty org = %d, want 0", len(got))
		}
	})
}

func testDeploymentWrites(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)

	t.Run("UpdateDeployment", func(t *testing.T) {
		d, _ := createDeployment(t, s, org, "upd", at(500))

		u := d
		u.Status = "ready"
		u.ActiveRevisionID = d.LatestRevisionID
		u.Doc = doc("updated")
		u.UpdatedAt = at(501)
		got, err := s.UpdateDeployment(ctx(), u)
		must(t, "UpdateDeployment", err)
		want := u
		want.Version = 2
		eqDeployment(t, got, want)
		read, err := s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after update", err)
		eqDeployment(t, read, want)

		// A second writer still holding Version 1 loses.
		stale := d
		stale.Status = "failed"
		stale.Doc = doc("stale")
		stale.UpdatedAt = at(502)
		_, err = s.UpdateDeployment(ctx(), stale)
		wantErr(t, "UpdateDeployment with a stale Version", err, store.ErrStale)
		ahead := want
		ahead.Version = 5
		ahead.Status = "failed"
		_, err = s.UpdateDeployment(ctx(), ahead)
		wantErr(t, "UpdateDeployment with a Version ahead", err, store.ErrStale)
		read, err = s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after stale updates", err)
		eqDeployment(t, read, want)

		// Chained updates keep counting.
		next := read
		next.Status = "updating"
		next.UpdatedAt = at(503)
		got, err = s.UpdateDeployment(ctx(), next)
		must(t, "UpdateDeployment chained", err)
		if got.Version != 3 {
			t.Errorf("Version after two updates = %d, want 3", got.Version)
		}

		missing, _ := newDeployment(org, "never-created", at(504))
		missing.Version = 1
		_, err = s.UpdateDeployment(ctx(), missing)
		wantErr(t, "UpdateDeployment missing", err, store.ErrNotFound)

		foreign := got
		foreign.OrgID = other
		_, err = s.UpdateDeployment(ctx(), foreign)
		wantErr(t, "UpdateDeployment from another org", err, store.ErrNotFound)
		read, err = s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after a foreign update", err)
		eqDeployment(t, read, got)
	})

	t.Run("UpdateDeploymentRename", func(t *testing.T) {
		createDeployment(t, s, org, "taken", at(510))
		d, _ := createDeployment(t, s, org, "renamed-from", at(511))

		u := d
		u.Name = "taken"
		_, err := s.UpdateDeployment(ctx(), u)
		wantErr(t, "UpdateDeployment to a taken name", err, store.ErrConflict)
		read, err := s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after conflict", err)
		eqDeployment(t, read, d)

		u.Name = "renamed-to"
		got, err := s.UpdateDeployment(ctx(), u)
		must(t, "UpdateDeployment rename", err)
		if got.Name != "renamed-to" || got.Version != 2 {
			t.Errorf("after rename: Name %q Version %d, want renamed-to 2", got.Name, got.Version)
		}
	})

	t.Run("AddRevision", func(t *testing.T) {
		d, first := createDeployment(t, s, org, "add-rev", at(520))

		r := store.Revision{
			ID: newID(), OrgID: org, DeploymentID: d.ID, Status: "pending",
			StatusReason: "", Doc: doc("rev-2"), Version: 9, CreatedAt: at(521), UpdatedAt: at(521),
		}
		u := d
		u.LatestRevisionID = r.ID
		u.Status = "updating"
		u.UpdatedAt = at(521)
		got, err := s.AddRevision(ctx(), u, r)
		must(t, "AddRevision", err)
		want := u
		want.Version = 2
		eqDeployment(t, got, want)
		read, err := s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after AddRevision", err)
		eqDeployment(t, read, want)
		rev, err := s.Revision(ctx(), org, d.ID, r.ID)
		must(t, "Revision after AddRevision", err)
		if rev.Version < 1 {
			t.Errorf("new revision Version = %d, want >= 1", rev.Version)
		}
		wantRev := r
		wantRev.Version = rev.Version
		eqRevision(t, rev, wantRev)

		// A writer still holding Version 1 loses, and its revision is not kept.
		lost := store.Revision{
			ID: newID(), OrgID: org, DeploymentID: d.ID, Status: "pending",
			Doc: doc("lost"), CreatedAt: at(522), UpdatedAt: at(522),
		}
		staleD := d
		staleD.LatestRevisionID = lost.ID
		staleD.UpdatedAt = at(522)
		_, err = s.AddRevision(ctx(), staleD, lost)
		wantErr(t, "AddRevision with a stale Version", err, store.ErrStale)
		_, err = s.Revision(ctx(), org, d.ID, lost.ID)
		wantErr(t, "Revision of the stale AddRevision", err, store.ErrNotFound)
		read, err = s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment after stale AddRevision", err)
		eqDeployment(t, read, want)
		revs, err := s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{})
		must(t, "ListRevisions", err)
		checkRest(t, "revisions after AddRevision", idsOf(revs), []string{r.ID, first.ID})

		// A missing or foreign deployment gets no revision.
		ghost, _ := newDeployment(org, "ghost", at(523))
		ghost.Version = 1
		orphan := store.Revision{ID: newID(), OrgID: org, DeploymentID: ghost.ID, Status: "pending", CreatedAt: at(523), UpdatedAt: at(523)}
		_, err = s.AddRevision(ctx(), ghost, orphan)
		wantErr(t, "AddRevision to a missing deployment", err, store.ErrNotFound)
		_, err = s.Revision(ctx(), org, ghost.ID, orphan.ID)
		wantErr(t, "Revision of the missing deployment", err, store.ErrNotFound)

		foreign := read
		foreign.OrgID = other
		stray := store.Revision{ID: newID(), OrgID: other, DeploymentID: d.ID, Status: "pending", CreatedAt: at(524), UpdatedAt: at(524)}
		_, err = s.AddRevision(ctx(), foreign, stray)
		wantErr(t, "AddRevision from another org", err, store.ErrNotFound)
		for _, o := range []string{org, other} {
			_, err = s.Revision(ctx(), o, d.ID, stray.ID)
			wantErr(t, "Revision of the foreign AddRevision", err, store.ErrNotFound)
		}
	})
}

// ---- revisions -----------------------------------------------------------------

func testRevisions(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	d, first := createDeployment(t, s, org, "revs", at(600))

	// Revisions r1..r4 after the first (r0), statuses alternating.
	ids := []string{first.ID}
	statuses := []string{"pending", "ready", "failed", "ready", "superseded"}
	cur := d
	for i := 1; i <= 4; i++ {
		r := store.Revision{
			ID: newID(), OrgID: org, DeploymentID: d.ID, Status: statuses[i],
			StatusReason: fmt.Sprintf("reason %d", i), Doc: doc(fmt.Sprintf("r%d", i)),
			CreatedAt: at(600 + i), UpdatedAt: at(600 + i),
		}
		cur.LatestRevisionID = r.ID
		var err error
		cur, err = s.AddRevision(ctx(), cur, r)
		must(t, "AddRevision", err)
		ids = append(ids, r.ID)
	}
	// Another deployment's revisions never show up.
	createDeployment(t, s, org, "revs-sibling", at(650))

	rev := func(i int) string { return ids[i] }
	tests := []struct {
		name   string
		filter store.RevisionFilter
		want   []string
	}{
		{"all newest first", store.RevisionFilter{}, []string{rev(4), rev(3), rev(2), rev(1), rev(0)}},
		{"one status", store.RevisionFilter{Statuses: []string{"ready"}}, []string{rev(3), rev(1)}},
		{"several statuses", store.RevisionFilter{Statuses: []string{"pending", "failed"}}, []string{rev(2), rev(0)}},
		{"unknown status", store.RevisionFilter{Statuses: []string{"deleting"}}, nil},
		{"limit", store.RevisionFilter{Limit: 2}, []string{rev(4), rev(3)}},
		{"limit and offset", store.RevisionFilter{Limit: 2, Offset: 1}, []string{rev(3), rev(2)}},
		{"offset only", store.RevisionFilter{Offset: 3}, []string{rev(1), rev(0)}},
		{"offset past the end", store.RevisionFilter{Offset: 5}, nil},
		{"statuses then page", store.RevisionFilter{Statuses: []string{"ready", "superseded"}, Limit: 1, Offset: 1}, []string{rev(3)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListRevisions(ctx(), org, d.ID, tc.filter)
			must(t, "ListRevisions", err)
			got2 := idsOf(got)
			if len(got2) == 0 {
				got2 = nil
			}
			checkRest(t, fmt.Sprintf("ListRevisions(%+v)", tc.filter), got2, tc.want)
		})
	}

	t.Run("default page of 20", func(t *testing.T) {
		d, first := createDeployment(t, s, org, "many-revs", at(700))
		want := []string{first.ID}
		cur := d
		for i := 1; i < 23; i++ {
			r := store.Revision{ID: newID(), OrgID: org, DeploymentID: d.ID, Status: "pending", CreatedAt: at(700 + i), UpdatedAt: at(700 + i)}
			var err error
			cur, err = s.AddRevision(ctx(), cur, r)
			must(t, "AddRevision", err)
			want = append([]string{r.ID}, want...)
		}
		got, err := s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{})
		must(t, "ListRevisions", err)
		checkRest(t, "first page", idsOf(got), want[:20])
		got, err = s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{Offset: 20})
		must(t, "ListRevisions", err)
		checkRest(t, "second page", idsOf(got), want[20:])
	})

	t.Run("Get", func(t *testing.T) {
		got, err := s.Revision(ctx(), org, d.ID, first.ID)
		must(t, "Revision", err)
		eqRevision(t, got, first)
		got, err = s.Revision(ctx(), org, d.ID, rev(2))
		must(t, "Revision r2", err)
		if got.Status != "failed" || got.StatusReason != "reason 2" || !bytes.Equal(got.Doc, doc("r2")) {
			t.Errorf("Revision r2 = %+v", got)
		}
		sibling, _ := createDeployment(t, s, org, "revs-other", at(660))
		for _, c := range []struct{ org, dep, id string }{
			{other, d.ID, first.ID},               // another organization
			{org, sibling.ID, first.ID},           // another deployment
			{org, d.ID, newID()},                  // missing revision
			{org, newID(), first.ID},              // missing deployment
			{newID(), newID(), first.ID},          // nothing matches
			{other, sibling.ID, newID()},          // nothing matches
			{org, d.ID, sibling.LatestRevisionID}, // revision of the sibling
		} {
			_, err := s.Revision(ctx(), c.org, c.dep, c.id)
			wantErr(t, fmt.Sprintf("Revision(%q, %q, %q)", c.org, c.dep, c.id), err, store.ErrNotFound)
		}
	})

	t.Run("ListMissing", func(t *testing.T) {
		_, err := s.ListRevisions(ctx(), org, newID(), store.RevisionFilter{})
		wantErr(t, "ListRevisions of a missing deployment", err, store.ErrNotFound)
		_, err = s.ListRevisions(ctx(), other, d.ID, store.RevisionFilter{})
		wantErr(t, "ListRevisions from another org", err, store.ErrNotFound)
	})

	t.Run("UpdateRevision", func(t *testing.T) {
		dep, r := createDeployment(t, s, org, "upd-rev", at(800))
		read, err := s.Revision(ctx(), org, dep.ID, r.ID)
		must(t, "Revision", err)

		u := read
		u.Status = "ready"
		u.StatusReason = "deployed"
		u.UpdatedAt = at(801)
		got, err := s.UpdateRevision(ctx(), u)
		must(t, "UpdateRevision", err)
		want := u
		want.Version = read.Version + 1
		eqRevision(t, got, want)
		again, err := s.Revision(ctx(), org, dep.ID, r.ID)
		must(t, "Revision after update", err)
		eqRevision(t, again, want)

		stale := read
		stale.Status = "failed"
		stale.UpdatedAt = at(802)
		_, err = s.UpdateRevision(ctx(), stale)
		wantErr(t, "UpdateRevision with a stale Version", err, store.ErrStale)
		again, err = s.Revision(ctx(), org, dep.ID, r.ID)
		must(t, "Revision after stale update", err)
		eqRevision(t, again, want)

		missing := want
		missing.ID = newID()
		_, err = s.UpdateRevision(ctx(), missing)
		wantErr(t, "UpdateRevision missing", err, store.ErrNotFound)
		foreign := want
		foreign.OrgID = other
		_, err = s.UpdateRevision(ctx(), foreign)
		wantErr(t, "UpdateRevision from another org", err, store.ErrNotFound)
		again, err = s.Revision(ctx(), org, dep.ID, r.ID)
		must(t, "Revision after foreign update", err)
		eqRevision(t, again, want)

		// The deployment is not touched by a revision update.
		depRead, err := s.Deployment(ctx(), org, dep.ID)
		must(t, "Deployment", err)
		eqDeployment(t, depRead, dep)
	})
}

func testAcrossOrganizations(t *testing.T, s store.Store) {
	orgA, orgB := newOrg(t, s), newOrg(t, s)
	// Statuses unique to this run, so records of other runs sharing the
	// backing store cannot show up.
	building, queued, idle := unique("building"), unique("queued"), unique("idle")

	mk := func(org, name string, off int, depStatus, revStatus string) (store.Deployment, store.Revision) {
		d, r := newDeployment(org, name, at(900+off))
		d.Status, r.Status = depStatus, revStatus
		must(t, "CreateDeployment "+name, s.CreateDeployment(ctx(), d, r))
		d.Version, r.Version = 1, 1
		return d, r
	}
	dA1, rA1 := mk(orgA, "a1", 0, building, building)
	dA2, rA2 := mk(orgA, "a2", 1, idle, queued)
	dB1, rB1 := mk(orgB, "b1", 2, building, idle)

	// A later revision of a2 that is unsettled too.
	rA2b := store.Revision{ID: newID(), OrgID: orgA, DeploymentID: dA2.ID, Status: building, CreatedAt: at(903), UpdatedAt: at(903)}
	dA2.LatestRevisionID = rA2b.ID
	var err error
	dA2, err = s.AddRevision(ctx(), dA2, rA2b)
	must(t, "AddRevision", err)

	t.Run("UnsettledRevisions", func(t *testing.T) {
		tests := []struct {
			name     string
			statuses []string
			want     []string
		}{
			{"one status", []string{queued}, []string{rA2.ID}},
			{"two statuses", []string{building, queued}, []string{rA1.ID, rA2.ID, rA2b.ID}},
			{"across organizations", []string{idle, queued}, []string{rA2.ID, rB1.ID}},
			{"no such status", []string{unique("none")}, nil},
			{"no statuses", nil, nil},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.UnsettledRevisions(ctx(), tc.statuses)
				must(t, "UnsettledRevisions", err)
				ids := sorted(idsOf(got))
				if len(ids) == 0 {
					ids = nil
				}
				checkRest(t, fmt.Sprintf("UnsettledRevisions(%v)", tc.statuses), ids, sorted(tc.want))
			})
		}
		got, err := s.UnsettledRevisions(ctx(), []string{idle})
		must(t, "UnsettledRevisions", err)
		if len(got) == 1 {
			eqRevision(t, got[0], rB1)
		} else {
			t.Errorf("UnsettledRevisions(idle) = %d revisions, want 1", len(got))
		}
	})

	t.Run("DeploymentsInStatus", func(t *testing.T) {
		got, err := s.DeploymentsInStatus(ctx(), building)
		must(t, "DeploymentsInStatus", err)
		checkRest(t, "DeploymentsInStatus(building)", sorted(deploymentNames(got)), []string{"a1", "b1"})
		for _, d := range got {
			switch d.ID {
			case dA1.ID:
				eqDeployment(t, d, dA1)
			case dB1.ID:
				eqDeployment(t, d, dB1)
			}
		}
		got, err = s.DeploymentsInStatus(ctx(), idle)
		must(t, "DeploymentsInStatus", err)
		if len(got) != 1 {
			t.Fatalf("DeploymentsInStatus(idle) = %d deployments, want 1", len(got))
		}
		eqDeployment(t, got[0], dA2)
		got, err = s.DeploymentsInStatus(ctx(), unique("none"))
		must(t, "DeploymentsInStatus", err)
		if len(got) != 0 {
			t.Errorf("DeploymentsInStatus(none) = %d deployments, want 0", len(got))
		}
	})
}

// ---- idempotency ---------------------------------------------------------------

func testIdempotency(t *testing.T, s store.Store) {
	now := time.Now().In(zone)
	rec := func(org, scope, key, hash string, created time.Time) store.IdempotencyRecord {
		return store.IdempotencyRecord{OrgID: org, Scope: scope, Key: key, RequestHash: hash, CreatedAt: created}
	}
	const scope = "createDeployment"

	t.Run("ReserveCompleteReplay", func(t *testing.T) {
		org, key := newOrg(t, s), unique("key")
		first := rec(org, scope, key, "hash-1", now)
		got, fresh, err := s.ReserveIdempotencyKey(ctx(), first, time.Hour)
		must(t, "Reserve", err)
		if !fresh {
			t.Fatal("Reserve of a new key: fresh = false")
		}
		eqIdempotency(t, got, first)

		// A retry sees the in-progress record, whatever its own body.
		got, fresh, err = s.ReserveIdempotencyKey(ctx(), rec(org, scope, key, "hash-2", now.Add(time.Second)), time.Hour)
		must(t, "Reserve again", err)
		if fresh {
			t.Fatal("Reserve of a reserved key: fresh = true")
		}
		eqIdempotency(t, got, first)

		body := []byte("{\"id\": \"d-1\",  \"name\":\"web\"}\n")
		must(t, "Complete", s.CompleteIdempotencyKey(ctx(), org, scope, key, 201, body))
		got, fresh, err = s.ReserveIdempotencyKey(ctx(), rec(org, scope, key, "hash-1", now.Add(2*time.Second)), time.Hour)
		must(t, "Reserve after complete", err)
		if fresh {
			t.Fatal("Reserve of a completed key: fresh = true")
		}
		want := first
		want.Status, want.Body = 201, body
		eqIdempotency(t, got, want)
	})

	t.Run("StaleInProgressIsReplaced", func(t *testing.T) {
		org, key := newOrg(t, s), unique("key")
		old := rec(org, scope, key, "hash-old", now.Add(-time.Hour))
		_, fresh, err := s.ReserveIdempotencyKey(ctx(), old, 10*time.Minute)
		must(t, "Reserve", err)
		if !fresh {
			t.Fatal("Reserve of a new key: fresh = false")
		}
		takeover := rec(org, scope, key, "hash-new", now)
		got, fresh, err := s.ReserveIdempotencyKey(ctx(), takeover, 10*time.Minute)
		must(t, "Reserve over a stale reservation", err)
		if !fresh {
			t.Fatal("Reserve over a stale in-progress record: fresh = false")
		}
		eqIdempotency(t, got, takeover)

		// The replacement is what is stored now.
		got, fresh, err = s.ReserveIdempotencyKey(ctx(), rec(org, scope, key, "hash-3", now.Add(time.Second)), 10*time.Minute)
		must(t, "Reserve after takeover", err)
		if fresh {
			t.Fatal("Reserve after takeover: fresh = true")
		}
		eqIdempotency(t, got, takeover)
	})

	t.Run("RecentInProgressIsKept", func(t *testing.T) {
		org, key := newOrg(t, s), unique("key")
		first := rec(org, scope, key, "hash-1", now.Add(-time.Minute))
		_, _, err := s.ReserveIdempotencyKey(ctx(), first, time.Hour)
		must(t, "Reserve", err)
		got, fresh, err := s.ReserveIdempotencyKey(ctx(), rec(org, scope, key, "hash-2", now), time.Hour)
		must(t, "Reserve again", err)
		if fresh {
			t.Fatal("Reserve over a recent in-progress record: fresh = true")
		}
		eqIdempotency(t, got, first)
	})

	t.Run("CompletedIsNeverReplaced", func(t *testing.T) {
		org, key := newOrg(t, s), unique("key")
		old := rec(org, scope, key, "hash-old", now.Add(-24*time.Hour))
		_, _, err := s.ReserveIdempotencyKey(ctx(), old, time.Minute)
		must(t, "Reserve", err)
		must(t, "Complete", s.CompleteIdempotencyKey(ctx(), org, scope, key, 200, []byte(`{"ok":true}`)))
		got, fresh, err := s.ReserveIdempotencyKey(ctx(), rec(org, scope, key, "hash-new", now), time.Minute)
		must(t, "Reserve over a completed record", err)
		if fresh {
			t.Fatal("Reserve over an old completed record: fresh = true")
		}
		want := old
		want.Status, want.Body = 200, []byte(`{"ok":true}`)
		eqIdempotency(t, got, want)
	})

	t.Run("Release", func(t *testing.T) {
		org, key := newOrg(t, s), unique("key")
		_, _, err := s.ReserveIdempotencyKey(ctx(), rec(org, scope, key, "hash-1", now), time.Hour)
		must(t, "Reserve", err)
		must(t, "Release", s.ReleaseIdempotencyKey(ctx(), org, scope, key))
		retry := rec(org, scope, key, "hash-2", now.Add(time.Second))
		got, fresh, err := s.ReserveIdempotencyKey(ctx(), retry, time.Hour)
		must(t, "Reserve after release", err)
		if !fresh {
			t.Fatal("Reserve after release: fresh = false")
		}
		eqIdempotency(t, got, retry)
	})

	t.Run("ScopedByOrganizationAndScope", func(t *testing.T) {
		orgA, orgB, key := newOrg(t, s), newOrg(t, s), unique("key")
		base := rec(orgA, scope, key, "hash-a", now)
		_, _, err := s.ReserveIdempotencyKey(ctx(), base, time.Hour)
		must(t, "Reserve", err)
		must(t, "Complete", s.CompleteIdempotencyKey(ctx(), orgA, scope, key, 201, []byte(`"a"`)))

		others := []store.IdempotencyRecord{
			rec(orgB, scope, key, "hash-b", now),            // same key, other org
			rec(orgA, "createProvider", key, "hash-c", now), // same key, other scope
			rec(orgA, scope, unique("key"), "hash-d", now),  // other key
		}
		for _, other := range others {
			got, fresh, err := s.ReserveIdempotencyKey(ctx(), other, time.Hour)
			must(t, "Reserve", err)
			if !fresh {
				t.Fatalf("Reserve(%s, %s, %s) shares a record with (%s, %s, %s)", other.OrgID, other.Scope, other.Key, base.OrgID, base.Scope, base.Key)
			}
			eqIdempotency(t, got, other)
		}
		completedBase := base
		completedBase.Status, completedBase.Body = 201, []byte(`"a"`)

		// Completing or releasing one record leaves the others as they are.
		for i, gone := range others {
			must(t, "Complete", s.CompleteIdempotencyKey(ctx(), gone.OrgID, gone.Scope, gone.Key, 500, []byte("x")))
			must(t, "Release", s.ReleaseIdempotencyKey(ctx(), gone.OrgID, gone.Scope, gone.Key))
			probe := base
			probe.RequestHash = "probe"
			got, fresh, err := s.ReserveIdempotencyKey(ctx(), probe, time.Hour)
			must(t, "Reserve probe", err)
			if fresh {
				t.Fatalf("releasing (%s, %s, %s) released (%s, %s, %s)", gone.OrgID, gone.Scope, gone.Key, base.OrgID, base.Scope, base.Key)
			}
			eqIdempotency(t, got, completedBase)
			for _, kept := range others[i+1:] {
				probe := kept
				probe.RequestHash = "probe"
				got, fresh, err := s.ReserveIdempotencyKey(ctx(), probe, time.Hour)
				must(t, "Reserve probe", err)
				if fresh {
					t.Fatalf("releasing (%s, %s, %s) released (%s, %s, %s)", gone.OrgID, gone.Scope, gone.Key, kept.OrgID, kept.Scope, kept.Key)
				}
				eqIdempotency(t, got, kept)
			}
		}
	})
}

// ---- concurrency -----------------------------------------------------------------

func testConcurrency(t *testing.T, s store.Store) {
	const n = 20

	t.Run("UpdateDeployment", func(t *testing.T) {
		org := newOrg(t, s)
		d, _ := createDeployment(t, s, org, "contended", at(1000))
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				u := d
				u.Status = fmt.Sprintf("writer-%d", i)
				u.UpdatedAt = at(1001 + i)
				_, errs[i] = s.UpdateDeployment(ctx(), u)
			}(i)
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Errorf("writers %d and %d both succeeded", winner, i)
				}
				winner = i
			case !errors.Is(err, store.ErrStale):
				t.Errorf("writer %d: error %v, want ErrStale", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer succeeded")
		}
		got, err := s.Deployment(ctx(), org, d.ID)
		must(t, "Deployment", err)
		if got.Version != 2 || got.Status != fmt.Sprintf("writer-%d", winner) {
			t.Errorf("after the race: Version %d Status %q, want 2 and writer-%d", got.Version, got.Status, winner)
		}
	})

	t.Run("AddRevision", func(t *testing.T) {
		org := newOrg(t, s)
		d, first := createDeployment(t, s, org, "contended-rev", at(1100))
		errs := make([]error, n)
		revs := make([]store.Revision, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			revs[i] = store.Revision{ID: newID(), OrgID: org, DeploymentID: d.ID, Status: "pending", CreatedAt: at(1101 + i), UpdatedAt: at(1101 + i)}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				u := d
				u.LatestRevisionID = revs[i].ID
				_, errs[i] = s.AddRevision(ctx(), u, revs[i])
			}(i)
		}
		wg.Wait()
		var won []string
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, revs[i].ID)
			case !errors.Is(err, store.ErrStale):
				t.Errorf("writer %d: error %v, want ErrStale", i, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d AddRevision calls succeeded, want 1", len(won))
		}
		got, err := s.ListRevisions(ctx(), org, d.ID, store.RevisionFilter{Limit: 100})
		must(t, "ListRevisions", err)
		checkRest(t, "revisions after the race", idsOf(got), []string{won[0], first.ID})
	})

	t.Run("ReserveIdempotencyKey", func(t *testing.T) {
		org, key := newOrg(t, s), unique("key")
		fresh := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := store.IdempotencyRecord{OrgID: org, Scope: "race", Key: key, RequestHash: fmt.Sprint(i), CreatedAt: time.Now()}
				_, fresh[i], errs[i] = s.ReserveIdempotencyKey(ctx(), r, time.Hour)
			}(i)
		}
		wg.Wait()
		count := 0
		for i := range fresh {
			must(t, "Reserve", errs[i])
			if fresh[i] {
				count++
			}
		}
		if count != 1 {
			t.Errorf("%d concurrent reservations of one key were fresh, want 1", count)
		}
	})

	t.Run("CreateOrganization", func(t *testing.T) {
		name := unique("race-org")
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = s.CreateOrganization(ctx(), store.Organization{ID: newID(), Name: name, CreatedAt: at(i)})
			}(i)
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("creator %d: error %v, want ErrConflict", i, err)
			}
		}
		if ok != 1 {
			t.Errorf("%d concurrent creates of one name succeeded, want 1", ok)
		}
	})
}
