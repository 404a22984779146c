package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// testClaimFairness: the per-organization cap on running runs (perOrg) and
// the organizations' turns, for ClaimRun and ClaimRunByID alike.
func testClaimFairness(t *testing.T, s store.Store) {
	// claimAt claims with ClaimRun and cap perOrg; "" when nothing was claimed.
	claimAt := func(t *testing.T, now time.Time, perOrg int) store.Run {
		t.Helper()
		r, ok, err := s.ClaimRun(ctx(), "w", now, now.Add(40*time.Second), perOrg)
		must(t, "ClaimRun", err)
		if !ok {
			return store.Run{}
		}
		return r
	}
	// runsOnThreads adds one run on a new thread of org per offset.
	runsOnThreads := func(t *testing.T, org string, offs ...int) []store.Run {
		t.Helper()
		var out []store.Run
		for _, off := range offs {
			th := createThread(t, s, org, 0)
			out = append(out, addRun(t, s, newRun(org, th.ID, off)))
		}
		return out
	}
	wantStatus := func(t *testing.T, r store.Run, want string) {
		t.Helper()
		if got := getRun(t, s, r); got.Status != want {
			t.Errorf("run %s: status %q, want %q", r.ID, got.Status, want)
		}
	}

	t.Run("CapPerOrganization", func(t *testing.T) {
		park(t, s)
		a, b := newOrg(t, s), newOrg(t, s)
		as := runsOnThreads(t, a, 1, 2, 3, 5)
		bs := runsOnThreads(t, b, 4)
		var got []string
		for r := claimAt(t, at(10), 2); r.ID != ""; r = claimAt(t, at(10), 2) {
			got = append(got, r.ID)
		}
		// a's two oldest and b's one; a's other runs wait for a free slot.
		checkRest(t, "runs claimed with 2 slots per organization", sorted(got), sorted([]string{as[0].ID, as[1].ID, bs[0].ID}))
		wantStatus(t, as[2], store.RunPending)

		must(t, "FinishRun", s.FinishRun(ctx(), finish(a, as[0].ThreadID, as[0].ID, "w", store.RunSuccess, store.ThreadIdle, at(11))))
		if r := claimAt(t, at(12), 2); r.ID != as[2].ID {
			t.Fatalf("after a run of the organization ended: claimed %q, want its next run %s", r.ID, as[2].ID)
		}
		if r := claimAt(t, at(12), 2); r.ID != "" {
			t.Fatalf("with both slots taken again: claimed %s", r.ID)
		}
		// Leases of a's runs expire: they are taken back, though a has no
		// free slot (each holds its own), and then a's last run still waits.
		var back []string
		for r := claimAt(t, at(60), 2); r.ID != ""; r = claimAt(t, at(60), 2) {
			back = append(back, r.ID)
		}
		checkRest(t, "runs taken back after their leases expired", sorted(back), sorted([]string{as[1].ID, as[2].ID, bs[0].ID}))
		wantStatus(t, as[3], store.RunPending)
		if r := claimAt(t, at(61), 0); r.ID != as[3].ID {
			t.Fatalf("without a cap: claimed %q, want %s", r.ID, as[3].ID)
		}
	})

	t.Run("CapByID", func(t *testing.T) {
		park(t, s)
		org := newOrg(t, s)
		rs := runsOnThreads(t, org, 1, 2, 3, 4)
		byID := func(r store.Run, owner string, now time.Time, perOrg int, want bool) {
			t.Helper()
			got, ok, err := s.ClaimRunByID(ctx(), r.ID, owner, now, now.Add(time.Minute), perOrg)
			must(t, "ClaimRunByID", err)
			if ok != want {
				t.Fatalf("ClaimRunByID(%s, perOrg %d) at %v: claimed %v, want %v (status %q)", r.ID, perOrg, now, ok, want, got.Status)
			}
			if !ok && got.ID != r.ID {
				t.Fatalf("ClaimRunByID(%s) not claimed: returned run %q, want the run as stored", r.ID, got.ID)
			}
		}
		byID(rs[0], "exec-0", at(10), 2, true)
		byID(rs[1], "exec-1", at(10), 2, true)
		byID(rs[2], "exec-2", at(10), 2, false) // no free slot
		wantStatus(t, rs[2], store.RunPending)
		if r := claimAt(t, at(10), 2); r.ID != "" {
			t.Fatalf("ClaimRun with the organization's slots taken by ClaimRunByID: claimed %s", r.ID)
		}
		byID(rs[0], "exec-0", at(11), 2, true) // a retried step: the run holds its slot
		byID(rs[3], "exec-3", at(11), 0, true) // no cap (ending a lost run)
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, rs[0].ThreadID, rs[0].ID, "exec-0", store.RunSuccess, store.ThreadIdle, at(12))))
		byID(rs[2], "exec-2", at(13), 2, false) // rs[1] and rs[3] run
		must(t, "FinishRun", s.FinishRun(ctx(), finish(org, rs[3].ThreadID, rs[3].ID, "exec-3", store.RunSuccess, store.ThreadIdle, at(14))))
		byID(rs[2], "exec-2", at(15), 2, true)
	})

	// Every way out of running frees the slot: finishing (also a temporary
	// run, whose thread goes with it, and a rolled back one) and deleting
	// the run's thread.
	t.Run("SlotFreedByEveryEnd", func(t *testing.T) {
		for _, end := range []string{"finish", "temporary", "rollback", "delete thread"} {
			t.Run(end, func(t *testing.T) {
				park(t, s)
				org := newOrg(t, s)
				r := newRun(org, newID(), 1)
				r.Temporary = end == "temporary"
				_, _, err := s.AddRun(ctx(), store.NewRun{Run: r, CreateThread: true})
				must(t, "AddRun", err)
				next := runsOnThreads(t, org, 2)[0]
				if got := claimAt(t, at(10), 1); got.ID != r.ID {
					t.Fatalf("claimed %q, want %s", got.ID, r.ID)
				}
				if got := claimAt(t, at(10), 1); got.ID != "" {
					t.Fatalf("with the one slot taken: claimed %s", got.ID)
				}
				switch end {
				case "rollback":
					_, err := s.CancelRun(ctx(), org, r.ThreadID, r.ID, store.CancelRollback, at(11))
					must(t, "CancelRun", err)
					fallthrough
				case "finish", "temporary":
					must(t, "FinishRun", s.FinishRun(ctx(), finish(org, r.ThreadID, r.ID, "w", store.RunSuccess, store.ThreadIdle, at(12))))
				case "delete thread":
					must(t, "DeleteThread", s.DeleteThread(ctx(), org, r.ThreadID))
				}
				if got := claimAt(t, at(13), 1); got.ID != next.ID {
					t.Fatalf("after the running run ended (%s): claimed %q, want %s", end, got.ID, next.ID)
				}
			})
		}
	})

	// Organizations take turns whatever the age of their runs: the oldest
	// runs all belong to x, yet no organization is served twice before
	// each other one with a claimable run was served once.
	t.Run("Turns", func(t *testing.T) {
		park(t, s)
		x, y, z := newOrg(t, s), newOrg(t, s), newOrg(t, s)
		byOrg := map[string][]store.Run{
			x: runsOnThreads(t, x, 1, 2, 3),
			y: runsOnThreads(t, y, 4, 5, 6),
			z: runsOnThreads(t, z, 7, 8, 9),
		}
		var orgs []string
		next := map[string]int{}
		for i := 0; i < 9; i++ {
			r := claimAt(t, at(10), 0)
			if r.ID == "" {
				t.Fatalf("claim %d: nothing claimed", i)
			}
			orgs = append(orgs, r.OrgID)
			if want := byOrg[r.OrgID][next[r.OrgID]]; r.ID != want.ID {
				t.Errorf("claim %d: run %s of its organization, want its oldest claimable %s", i, r.ID, want.ID)
			}
			next[r.OrgID]++
		}
		name := map[string]string{x: "x", y: "y", z: "z"}
		var seq []string
		for _, o := range orgs {
			seq = append(seq, name[o])
		}
		round := orgs[0] != orgs[1] && orgs[1] != orgs[2] && orgs[0] != orgs[2]
		for i := 3; i < len(orgs); i++ {
			round = round && orgs[i] == orgs[i-3]
		}
		if !round {
			t.Fatalf("organizations of the claims: %v, want a round of the three, repeated", seq)
		}
		if r := claimAt(t, at(10), 0); r.ID != "" {
			t.Fatalf("claimed %s after every run", r.ID)
		}
	})

	// An organization without a free slot loses its turn to the next one.
	t.Run("TurnsWithCap", func(t *testing.T) {
		park(t, s)
		x, y := newOrg(t, s), newOrg(t, s)
		xs, ys := runsOnThreads(t, x, 1, 2, 3), runsOnThreads(t, y, 4)
		var got []string
		for r := claimAt(t, at(10), 1); r.ID != ""; r = claimAt(t, at(10), 1) {
			got = append(got, r.ID)
		}
		checkRest(t, "claims with one slot per organization", sorted(got), sorted([]string{xs[0].ID, ys[0].ID}))
		must(t, "FinishRun", s.FinishRun(ctx(), finish(y, ys[0].ThreadID, ys[0].ID, "w", store.RunSuccess, store.ThreadIdle, at(11))))
		if r := claimAt(t, at(12), 1); r.ID != "" {
			t.Fatalf("y has nothing left and x no free slot: claimed %s", r.ID)
		}
		must(t, "FinishRun", s.FinishRun(ctx(), finish(x, xs[0].ThreadID, xs[0].ID, "w", store.RunSuccess, store.ThreadIdle, at(13))))
		if r := claimAt(t, at(14), 1); r.ID != xs[1].ID {
			t.Fatalf("claimed %q, want %s", r.ID, xs[1].ID)
		}
	})

	// The cap is decided with the claim: workers claiming at once never
	// start more than perOrg runs of an organization.
	t.Run("CapUnderConcurrency", func(t *testing.T) {
		const perOrg, n = 3, 8
		for _, by := range []string{"ClaimRun", "ClaimRunByID"} {
			t.Run(by, func(t *testing.T) {
				park(t, s)
				org := newOrg(t, s)
				var offs []int
				for i := 0; i < n; i++ {
					offs = append(offs, i+1)
				}
				rs := runsOnThreads(t, org, offs...)
				ok := make([]bool, n)
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						owner := fmt.Sprintf("w%d", i)
						if by == "ClaimRun" {
							_, ok[i], errs[i] = s.ClaimRun(ctx(), owner, at(20), at(80), perOrg)
						} else {
							_, ok[i], errs[i] = s.ClaimRunByID(ctx(), rs[i].ID, owner, at(20), at(80), perOrg)
						}
					}(i)
				}
				wg.Wait()
				claimed := 0
				for i := range ok {
					must(t, by, errs[i])
					if ok[i] {
						claimed++
					}
				}
				running := 0
				for _, r := range rs {
					if getRun(t, s, r).Status == store.RunRunning {
						running++
					}
				}
				if claimed != perOrg || running != perOrg {
					t.Errorf("%d concurrent claims with %d slots: %d claimed, %d running; want %d", n, perOrg, claimed, running, perOrg)
				}
			})
		}
	})
}
