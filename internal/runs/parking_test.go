package runs

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// tokens records the wake-ups sent.
type tokens struct {
	mu    sync.Mutex
	woken []string
}

func (w *tokens) Wake(_ context.Context, token string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.woken = append(w.woken, token)
	return nil
}

func (w *tokens) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.woken
	w.woken = nil
	return out
}

func parkingService(t *testing.T) (*Service, *tokens) {
	t.Helper()
	s, _ := newStepService(t)
	w := &tokens{}
	s.Parking = Parking{Store: s.Store.(*sqlite.DB), Waker: w}
	return s, w
}

// Review #12: a run queued behind another run of its thread parks (one
// wait, no polling) and the end of the run ahead wakes it; the token is
// stored with the run, so whoever ends the run ahead finds it.
func TestQueuedRunParksAndIsWoken(t *testing.T) {
	s, w := parkingService(t)
	ctx := context.Background()
	thread := "7d4c5b8e-33a1-4f0e-9a55-2b1f0c6d7e01"
	first, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"counter","input":{"steps":3},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`))
	if err != nil {
		t.Fatal(err)
	}
	third, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`))
	if err != nil {
		t.Fatal(err)
	}
	// Behind a pending run, and behind it once it runs: park, naming the thread.
	for _, r := range []Run{second, third} {
		res, err := s.StepRun(ctx, r.RunID, 0, nil)
		if err != nil || res.Status != StepPark || res.OrgID != "org" || res.ThreadID != thread || res.WaitSeconds != 0 {
			t.Fatalf("run queued behind another = %+v, %v; want park with its thread", res, err)
		}
	}
	if res, err := s.StepRun(ctx, first.RunID, 0, nil); err != nil || res.Status != StepContinue {
		t.Fatalf("first run's step = %+v, %v", res, err)
	}
	for tok, r := range map[string]Run{"tok-2": second, "tok-3": third} {
		if err := s.ParkRun(ctx, "org", thread, r.RunID, tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.take(); len(got) != 0 {
		t.Fatalf("woken %v while the first run runs", got)
	}
	drive(t, s, first.RunID) // ends it: the next run, and only it, is woken
	if got := w.take(); !slices.Equal(got, []string{"tok-2"}) {
		t.Fatalf("woken %v after the first run ended, want the second's token", got)
	}
	if steps, waits := drive(t, s, second.RunID); waits != 0 || steps == 0 {
		t.Fatalf("woken run: %d steps, %d waits", steps, waits)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-3"}) {
		t.Fatalf("woken %v after the second run ended, want the third's", got)
	}
	drive(t, s, third.RunID)
	if got := w.take(); len(got) != 0 {
		t.Fatalf("woken %v with nothing parked", got)
	}
}

// The run ahead ends between the step that asked to park and the park
// itself: its worker found no token, so the park wakes its own run.
func TestParkAfterTheRunAheadEndedWakesItself(t *testing.T) {
	s, w := parkingService(t)
	ctx := context.Background()
	thread := "0c3b2a19-8d7e-4f6a-b5c4-d3e2f1a0b9c8"
	first, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := s.StepRun(ctx, second.RunID, 0, nil); res.Status != StepPark {
		t.Fatalf("second = %+v, want park", res)
	}
	drive(t, s, first.RunID)
	if got := w.take(); len(got) != 0 {
		t.Fatalf("woken %v before any token was stored", got)
	}
	if err := s.ParkRun(ctx, "org", thread, second.RunID, "tok-late", nil); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-late"}) {
		t.Fatalf("woken %v, want the late park to wake itself", got)
	}
	// A park of a run that is no longer pending (claimed, or gone) wakes
	// it too: its next step says what to do.
	drive(t, s, second.RunID)
	for _, id := range []string{second.RunID, "no-such-run"} {
		if err := s.ParkRun(ctx, "org", thread, id, "tok-"+id, nil); err != nil {
			t.Fatal(err)
		}
		if got := w.take(); !slices.Equal(got, []string{"tok-" + id}) {
			t.Fatalf("park of %s woke %v, want itself", id, got)
		}
	}
}

// A run held back only by its organization's cap (no run of its thread
// ahead of it) keeps polling: no run of its thread would wake it. An
// abandoned run ahead wakes the next one like a finished one.
func TestParkingRules(t *testing.T) {
	s, w := parkingService(t)
	s.MaxRunningPerOrg = 1
	ctx := context.Background()
	busy, err := s.CreateRun(ctx, "org", "1a2b3c4d-0000-4000-8000-000000000001", request(t, `{"assistant_id":"counter","input":{"steps":3},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := s.StepRun(ctx, busy.RunID, 0, nil); res.Status != StepContinue {
		t.Fatalf("busy run = %+v", res)
	}
	thread := "1a2b3c4d-0000-4000-8000-000000000002"
	capped, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"if_not_exists":"create"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := s.StepRun(ctx, capped.RunID, 0, nil); res.Status != StepWait {
		t.Fatalf("a run held by its organization's cap = %+v, want wait (poll)", res)
	}
	behind, err := s.CreateRun(ctx, "org", thread, request(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := s.StepRun(ctx, behind.RunID, 0, nil); res.Status != StepPark {
		t.Fatalf("a run behind it = %+v, want park", res)
	}
	if err := s.ParkRun(ctx, "org", thread, behind.RunID, "tok-behind", nil); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); len(got) != 0 {
		t.Fatalf("woken %v while the run ahead is pending", got)
	}
	if err := s.AbandonRun(ctx, capped.RunID, "its execution was aborted"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Store.Run(ctx, "org", thread, capped.RunID)
	if err != nil || got.Status != store.RunError { // first on its thread: ended with ExecutionLost
		t.Fatalf("abandoned pending run: %s %v", got.Status, err)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-behind"}) {
		t.Fatalf("woken %v after the run ahead was abandoned, want the run behind", got)
	}
}

// Runs ended by a request rather than by a worker wake what parked on
// them: cancelling a pending run wakes its own parked execution (its next
// step finds it cancelled) and the run now first in line; deleting a
// thread wakes every parked execution of its runs (each finds its run
// gone). Without this they wait for their parks' timeout.
func TestRunsEndedByARequestWakeTheParkedRuns(t *testing.T) {
	s, w := parkingService(t)
	ctx := context.Background()
	thread := "5e8f2c1a-7b3d-4a6e-9f0c-1d2e3f4a5b6c"
	create := func(body string) Run {
		t.Helper()
		r, err := s.CreateRun(ctx, "org", thread, request(t, body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// first is pending and not yet stepped (its execution has not claimed
	// it); second and third park behind it.
	first := create(`{"assistant_id":"echo","input":{"messages":[]},"if_not_exists":"create"}`)
	second := create(`{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`)
	third := create(`{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`)
	for tok, r := range map[string]Run{"tok-2": second, "tok-3": third} {
		if res, err := s.StepRun(ctx, r.RunID, 0, nil); err != nil || res.Status != StepPark {
			t.Fatalf("step of a queued run = %+v, %v; want park", res, err)
		}
		if err := s.ParkRun(ctx, "org", thread, r.RunID, tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.take(); len(got) != 0 {
		t.Fatalf("woken %v while the first run is pending", got)
	}

	if _, err := s.CancelRun(ctx, "org", thread, first.RunID, ""); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-2"}) {
		t.Fatalf("cancelling the unparked head woke %v, want the next run's token", got)
	}
	if _, err := s.CancelRun(ctx, "org", thread, second.RunID, "rollback"); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-2", "tok-3"}) {
		t.Fatalf("cancelling a parked head woke %v, want its own token, then the next run's", got)
	}
	if err := s.DeleteThread(ctx, "org", thread); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-3"}) {
		t.Fatalf("deleting the thread woke %v, want its parked run's token", got)
	}

	// Pruning deletes threads as DeleteThread does.
	pruned := "6f9a3d2b-8c4e-4b7f-a01d-2e3f4a5b6c7d"
	if _, err := s.CreateRun(ctx, "org", pruned, request(t, `{"assistant_id":"echo","input":{"messages":[]},"if_not_exists":"create"}`)); err != nil {
		t.Fatal(err)
	}
	queued, err := s.CreateRun(ctx, "org", pruned, request(t, `{"assistant_id":"echo","input":{"messages":[]},"multitask_strategy":"enqueue"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.StepRun(ctx, queued.RunID, 0, nil); err != nil || res.Status != StepPark {
		t.Fatalf("step of a queued run = %+v, %v; want park", res, err)
	}
	if err := s.ParkRun(ctx, "org", pruned, queued.RunID, "tok-pruned", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneThreads(ctx, "org", ThreadPrune{ThreadIDs: []string{pruned}}); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); !slices.Equal(got, []string{"tok-pruned"}) {
		t.Fatalf("pruning the thread woke %v, want its parked run's token", got)
	}
}
