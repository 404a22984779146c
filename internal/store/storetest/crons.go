package storetest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// CronsContract is the suite of store.Crons.
func CronsContract(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("RoundTrip", func(t *testing.T) { testCronRoundTrip(t, open(t)) })
	t.Run("Limit", func(t *testing.T) { testCronLimit(t, open(t)) })
	t.Run("SearchAndCount", func(t *testing.T) { testCronSearch(t, open(t)) })
	t.Run("Update", func(t *testing.T) { testCronUpdate(t, open(t)) })
	t.Run("DueAndClaim", func(t *testing.T) { testCronDue(t, open(t)) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testCronConcurrentClaims(t, open(t)) })
}

func eqCron(t *testing.T, got, want store.Cron) {
	t.Helper()
	checkTime(t, "cron CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, "cron UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	checkTime(t, "cron EndTime", got.EndTime, want.EndTime)
	checkTime(t, "cron NextRunDate", got.NextRunDate, want.NextRunDate)
	checkBytes(t, "cron Payload", got.Payload, want.Payload)
	checkBytes(t, "cron Metadata", got.Metadata, want.Metadata)
	got.CreatedAt, want.CreatedAt, got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	got.EndTime, want.EndTime, got.NextRunDate, want.NextRunDate = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	got.Payload, want.Payload, got.Metadata, want.Metadata = nil, nil, nil, nil
	checkRest(t, "cron", got, want)
}

func newCron(org string, created time.Time, metadata string) store.Cron {
	return store.Cron{
		ID: newID(), OrgID: org, AssistantID: newID(), UserID: "",
		Schedule: "*/5 * * * *", Timezone: "Europe/Paris",
		OnRunCompleted: "delete", Enabled: true,
		Payload: doc("payload"), Metadata: []byte(metadata),
		NextRunDate: created.Add(5 * time.Minute), Version: 1,
		CreatedAt: created, UpdatedAt: created,
	}
}

func testCronRoundTrip(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	c := newCron(org, at(0), `{"team": "ü"}`)
	c.EndTime = at(3600)
	must(t, "CreateCron", s.CreateCron(ctx(), c, 0))
	got, err := s.Cron(ctx(), org, c.ID)
	must(t, "Cron", err)
	eqCron(t, got, c)

	onThread := newCron(org, at(1), `{}`)
	onThread.ThreadID, onThread.OnRunCompleted, onThread.Timezone, onThread.UserID = newID(), "", "", "user-1"
	onThread.NextRunDate, onThread.Enabled = time.Time{}, false
	must(t, "CreateCron on a thread", s.CreateCron(ctx(), onThread, 0))
	got, err = s.Cron(ctx(), org, onThread.ID)
	must(t, "Cron on a thread", err)
	eqCron(t, got, onThread)

	dup := newCron(org, at(2), `{}`)
	dup.ID = c.ID
	wantErr(t, "CreateCron with a taken ID", s.CreateCron(ctx(), dup, 0), store.ErrConflict)
	_, err = s.Cron(ctx(), other, c.ID)
	wantErr(t, "Cron of another organization", err, store.ErrNotFound)
	wantErr(t, "DeleteCron of another organization", s.DeleteCron(ctx(), other, c.ID), store.ErrNotFound)
	elsewhere := newCron(other, at(2), `{}`)
	elsewhere.ID = c.ID
	must(t, "CreateCron with the same ID in another org", s.CreateCron(ctx(), elsewhere, 0))

	must(t, "DeleteCron", s.DeleteCron(ctx(), org, c.ID))
	_, err = s.Cron(ctx(), org, c.ID)
	wantErr(t, "Cron after DeleteCron", err, store.ErrNotFound)
	wantErr(t, "DeleteCron twice", s.DeleteCron(ctx(), org, c.ID), store.ErrNotFound)
	if _, err := s.Cron(ctx(), other, c.ID); err != nil {
		t.Fatalf("the other organization's cron with the same ID: %v", err)
	}
}

func testCronLimit(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	for i := range 2 {
		must(t, "CreateCron under the limit", s.CreateCron(ctx(), newCron(org, at(i), `{}`), 2))
	}
	wantErr(t, "CreateCron at the limit", s.CreateCron(ctx(), newCron(org, at(3), `{}`), 2), store.ErrLimit)
	if n, err := s.CountCrons(ctx(), org, store.CronFilter{}); err != nil || n != 2 {
		t.Fatalf("CountCrons after a refused create = %d, %v; want 2", n, err)
	}
	must(t, "CreateCron in another organization", s.CreateCron(ctx(), newCron(other, at(3), `{}`), 2))

	// Racing creates never pass the limit together.
	race := newOrg(t, s)
	const tries, limit = 8, 3
	var wg sync.WaitGroup
	errs := make([]error, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateCron(ctx(), newCron(race, at(i), `{}`), limit)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrLimit):
			t.Fatalf("racing CreateCron: %v", err)
		}
	}
	n, err := s.CountCrons(ctx(), race, store.CronFilter{})
	must(t, "CountCrons", err)
	if ok != limit || n != limit {
		t.Fatalf("racing creates under a limit of %d: %d succeeded, %d stored", limit, ok, n)
	}
}

func testCronSearch(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	asst, thread := newID(), newID()
	a := newCron(org, at(0), `{"env": "prod", "n": 1}`)
	a.AssistantID, a.NextRunDate = asst, at(500)
	b := newCron(org, at(10), `{"env": "dev"}`)
	b.AssistantID, b.ThreadID, b.OnRunCompleted, b.NextRunDate = asst, thread, "", at(100)
	c := newCron(org, at(20), `{"env": "prod"}`)
	c.Enabled, c.NextRunDate, c.EndTime = false, at(300), at(400)
	for _, x := range []store.Cron{a, b, c, newCron(other, at(5), `{"env": "prod"}`)} {
		must(t, "CreateCron", s.CreateCron(ctx(), x, 0))
	}
	yes, no := true, false
	cases := []struct {
		name string
		f    store.CronFilter
		want []store.Cron
	}{
		{"all, newest first", store.CronFilter{}, []store.Cron{c, b, a}},
		{"oldest first", store.CronFilter{Ascending: true}, []store.Cron{a, b, c}},
		{"by next_run_date", store.CronFilter{SortBy: store.CronSortNextRunDate, Ascending: true}, []store.Cron{b, c, a}},
		{"by end_time, missing first ascending", store.CronFilter{SortBy: store.CronSortEndTime, Ascending: true, Offset: 2}, []store.Cron{c}},
		{"by end_time descending", store.CronFilter{SortBy: store.CronSortEndTime, Limit: 1}, []store.Cron{c}},
		{"assistant", store.CronFilter{AssistantID: asst}, []store.Cron{b, a}},
		{"thread", store.CronFilter{ThreadID: thread}, []store.Cron{b}},
		{"enabled", store.CronFilter{Enabled: &yes}, []store.Cron{b, a}},
		{"disabled", store.CronFilter{Enabled: &no}, []store.Cron{c}},
		{"metadata", store.CronFilter{Metadata: []byte(`{"env": "prod"}`)}, []store.Cron{c, a}},
		{"metadata number", store.CronFilter{Metadata: []byte(`{"n": 1.0}`)}, []store.Cron{a}},
		{"metadata and assistant", store.CronFilter{Metadata: []byte(`{"env": "prod"}`), AssistantID: asst}, []store.Cron{a}},
		{"page", store.CronFilter{Limit: 1, Offset: 1}, []store.Cron{b}},
		{"page with metadata", store.CronFilter{Metadata: []byte(`{"env": "prod"}`), Limit: 1, Offset: 1}, []store.Cron{a}},
		{"past the end", store.CronFilter{Offset: 3}, nil},
		{"nothing", store.CronFilter{AssistantID: newID()}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SearchCrons(ctx(), org, tc.f)
			must(t, "SearchCrons", err)
			if g, w := idsOf(got), idsOf(tc.want); !slices.Equal(g, w) {
				t.Fatalf("SearchCrons(%+v) = %v, want %v", tc.f, g, w)
			}
			if tc.f.Limit == 0 && tc.f.Offset == 0 {
				n, err := s.CountCrons(ctx(), org, tc.f)
				must(t, "CountCrons", err)
				if n != len(tc.want) {
					t.Fatalf("CountCrons(%+v) = %d, want %d", tc.f, n, len(tc.want))
				}
			}
		})
	}
	got, err := s.SearchCrons(ctx(), org, store.CronFilter{AssistantID: asst, ThreadID: thread})
	must(t, "SearchCrons", err)
	if len(got) != 1 {
		t.Fatalf("SearchCrons by assistant and thread: %d crons, want 1", len(got))
	}
	eqCron(t, got[0], b)
}

func testCronUpdate(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	c := newCron(org, at(0), `{"a": 1}`)
	must(t, "CreateCron", s.CreateCron(ctx(), c, 0))
	read, err := s.Cron(ctx(), org, c.ID)
	must(t, "Cron", err)

	upd := read
	upd.Schedule, upd.Timezone, upd.Enabled, upd.EndTime = "0 9 * * 1", "", false, at(7200)
	upd.Payload, upd.Metadata, upd.NextRunDate, upd.UpdatedAt = doc("new"), []byte(`{"a": 2}`), at(900), at(60)
	upd.OnRunCompleted = "keep"
	upd.CreatedAt = at(-100) // not changed by an update
	stored, err := s.UpdateCron(ctx(), upd)
	must(t, "UpdateCron", err)
	want := upd
	want.Version, want.CreatedAt = read.Version+1, c.CreatedAt
	eqCron(t, stored, want)
	got, err := s.Cron(ctx(), org, c.ID)
	must(t, "Cron after UpdateCron", err)
	eqCron(t, got, want)

	_, err = s.UpdateCron(ctx(), upd) // the Version it read is old now
	wantErr(t, "UpdateCron with a stale Version", err, store.ErrStale)
	cleared := stored
	cleared.EndTime, cleared.NextRunDate = time.Time{}, time.Time{}
	stored, err = s.UpdateCron(ctx(), cleared)
	must(t, "UpdateCron clearing the times", err)
	if !stored.EndTime.IsZero() || !stored.NextRunDate.IsZero() {
		t.Fatalf("cleared times read back as %v, %v", stored.EndTime, stored.NextRunDate)
	}
	ghost := stored
	ghost.OrgID = other
	_, err = s.UpdateCron(ctx(), ghost)
	wantErr(t, "UpdateCron in another organization", err, store.ErrNotFound)
}

// cronEpoch is a time no other test's crons use, so DueCrons (across
// organizations) sees only this suite's; a random offset keeps two runs of
// the suite on one store apart.
func cronEpoch() time.Time {
	return time.Date(1981, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rand.IntN(1_000_000)) * time.Hour)
}

func testCronDue(t *testing.T, s store.Store) {
	org, other := newOrg(t, s), newOrg(t, s)
	epoch := cronEpoch()
	now := epoch.Add(time.Hour)
	mk := func(orgID string, next time.Time, edit func(*store.Cron)) store.Cron {
		c := newCron(orgID, epoch, `{}`)
		c.NextRunDate = next
		if edit != nil {
			edit(&c)
		}
		must(t, "CreateCron", s.CreateCron(ctx(), c, 0))
		return c
	}
	due1 := mk(org, now.Add(-30*time.Minute), nil)
	due2 := mk(other, now.Add(-20*time.Minute), func(c *store.Cron) { c.EndTime = now.Add(time.Minute) })
	dueNow := mk(org, now, nil)
	mk(org, now.Add(time.Second), nil)                                                        // not yet
	mk(org, now.Add(-time.Minute), func(c *store.Cron) { c.Enabled = false })                 // disabled
	mk(org, now.Add(-time.Minute), func(c *store.Cron) { c.EndTime = now.Add(-time.Second) }) // ended
	mk(org, time.Time{}, nil)                                                                 // no next run

	got, err := s.DueCrons(ctx(), now, 100)
	must(t, "DueCrons", err)
	mine := []string{}
	for _, c := range got {
		if !c.NextRunDate.Before(epoch) {
			mine = append(mine, c.ID)
		}
	}
	if want := idsOf([]store.Cron{due1, due2, dueNow}); !slices.Equal(mine, want) {
		t.Fatalf("DueCrons = %v, want %v (earliest first)", mine, want)
	}
	first, err := s.DueCrons(ctx(), now, 1)
	must(t, "DueCrons with limit 1", err)
	if len(first) != 1 || first[0].NextRunDate.After(due1.NextRunDate) {
		t.Fatalf("DueCrons(limit 1) = %v, want the earliest", idsOf(first))
	}

	next := due1.NextRunDate.Add(time.Hour)
	claimed, err := s.ClaimCronFiring(ctx(), org, due1.ID, due1.NextRunDate, next)
	must(t, "ClaimCronFiring", err)
	checkTime(t, "NextRunDate after a claim", claimed.NextRunDate, next)
	if claimed.Version != due1.Version+1 {
		t.Fatalf("Version after a claim = %d, want %d", claimed.Version, due1.Version+1)
	}
	checkTime(t, "UpdatedAt after a claim", claimed.UpdatedAt, due1.UpdatedAt)
	_, err = s.ClaimCronFiring(ctx(), org, due1.ID, due1.NextRunDate, next)
	wantErr(t, "ClaimCronFiring of a slot claimed already", err, store.ErrStale)
	_, err = s.ClaimCronFiring(ctx(), other, due1.ID, next, next.Add(time.Hour))
	wantErr(t, "ClaimCronFiring in another organization", err, store.ErrNotFound)

	last, err := s.ClaimCronFiring(ctx(), org, dueNow.ID, dueNow.NextRunDate, time.Time{})
	must(t, "ClaimCronFiring of the last slot", err)
	if !last.NextRunDate.IsZero() {
		t.Fatalf("NextRunDate after the last slot = %v, want none", last.NextRunDate)
	}
	got, err = s.DueCrons(ctx(), now, 100)
	must(t, "DueCrons after claims", err)
	for _, c := range got {
		if c.ID == due1.ID || c.ID == dueNow.ID {
			t.Fatalf("DueCrons still lists the claimed cron %s", c.ID)
		}
	}
	// An update that read before the claim cannot undo it.
	stale := due2
	stale.OrgID = other
	_, err = s.ClaimCronFiring(ctx(), other, due2.ID, due2.NextRunDate, now.Add(time.Hour))
	must(t, "ClaimCronFiring", err)
	_, err = s.UpdateCron(ctx(), stale)
	wantErr(t, "UpdateCron with the Version read before a claim", err, store.ErrStale)
}

func testCronConcurrentClaims(t *testing.T, s store.Store) {
	org := newOrg(t, s)
	c := newCron(org, at(0), `{}`)
	must(t, "CreateCron", s.CreateCron(ctx(), c, 0))
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.ClaimCronFiring(ctx(), org, c.ID, c.NextRunDate, c.NextRunDate.Add(time.Duration(i+1)*time.Minute))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrStale):
			t.Fatalf("racing ClaimCronFiring: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing claims of one slot succeeded, want exactly 1", won, racers)
	}
}
