package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// testParking: a pending run keeps the token of its parked execution, the
// latest one; the thread's parked runs come in start order; a run no longer
// pending takes no token and is no longer listed; another organization
// sees nothing.
func testParking(t *testing.T, s store.Store) {
	p, ok := s.(store.RunParking)
	if !ok {
		t.Fatalf("%T does not implement store.RunParking", s)
	}
	org := newOrg(t, s)
	th := createThread(t, s, org, 0)
	first := addRun(t, s, newRun(org, th.ID, 1))
	second := addRun(t, s, newRun(org, th.ID, 2))
	early := newRun(org, th.ID, 3)
	early.NotBefore = at(0) // starts before second: NotBefore first
	early = addRun(t, s, early)

	listed := func(t *testing.T, want ...string) []store.ParkedRun {
		t.Helper()
		got, err := p.ParkedRuns(ctx(), org, th.ID)
		must(t, "ParkedRuns", err)
		var ids []string
		for _, r := range got {
			ids = append(ids, r.Run.ID+"="+r.Token)
		}
		if len(ids) != len(want) {
			t.Fatalf("parked runs %v, want %v", ids, want)
		}
		for i := range want {
			if ids[i] != want[i] {
				t.Fatalf("parked runs %v, want %v", ids, want)
			}
		}
		return got
	}
	listed(t)
	park := func(t *testing.T, r store.Run, token string, want bool) {
		t.Helper()
		ok, err := p.ParkRun(ctx(), org, th.ID, r.ID, token)
		must(t, "ParkRun", err)
		if ok != want {
			t.Fatalf("ParkRun(%s) = %v, want %v", r.ID, ok, want)
		}
	}
	park(t, second, "tok-2a", true)
	park(t, second, "tok-2b", true) // parked again: the latest token
	park(t, early, "tok-3", true)
	got := listed(t, early.ID+"=tok-3", second.ID+"=tok-2b")
	if got[1].Run.Status != store.RunPending || got[1].Run.ThreadID != th.ID || got[1].Run.OrgID != org {
		t.Errorf("parked run %+v: want the pending run of the thread", got[1].Run)
	}

	// Claimed: not pending any more, no longer listed, takes no token.
	if _, ok, err := s.ClaimRunByID(ctx(), early.ID, "exec-3", at(10), at(10).Add(time.Minute), 0); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	park(t, early, "tok-3b", false)
	listed(t, second.ID+"=tok-2b")
	must(t, "FinishRun", s.FinishRun(ctx(), finish(org, th.ID, early.ID, "exec-3", store.RunSuccess, store.ThreadIdle, at(11))))
	park(t, early, "tok-3c", false)
	// Cancelled while pending: not listed.
	if _, err := s.CancelRun(ctx(), org, th.ID, second.ID, store.CancelInterrupt, at(12)); err != nil {
		t.Fatal(err)
	}
	listed(t)
	park(t, first, "tok-1", true)
	listed(t, first.ID+"=tok-1")

	// Missing runs and threads; another organization.
	if _, err := p.ParkRun(ctx(), org, th.ID, "no-such-run", "tok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ParkRun of a missing run: %v, want ErrNotFound", err)
	}
	other := newOrg(t, s)
	if _, err := p.ParkRun(ctx(), other, th.ID, first.ID, "tok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ParkRun from another organization: %v, want ErrNotFound", err)
	}
	if got, err := p.ParkedRuns(ctx(), other, th.ID); err != nil || len(got) != 0 {
		t.Errorf("ParkedRuns from another organization: %v %v, want none", got, err)
	}
	if got, err := p.ParkedRuns(ctx(), org, "no-such-thread"); err != nil || len(got) != 0 {
		t.Errorf("ParkedRuns of a missing thread: %v %v, want none", got, err)
	}
	listed(t, first.ID+"=tok-1")
}
