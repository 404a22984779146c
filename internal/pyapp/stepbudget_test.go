package pyapp_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/pyapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// stepper drives each run as the run machine does on AWS: StepRun with a
// budget, again while it answers continue (a Wait state for wait).
type stepper struct {
	s      *runs.Service
	budget time.Duration
	// steps counts StepRun calls; failed records a step's error.
	steps  atomic.Int32
	failed atomic.Value
}

func (d *stepper) Dispatch(_ context.Context, run store.Run) error {
	go func() {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		for {
			res, err := d.s.StepRunWithin(context.Background(), run.ID, 0, d.budget, log)
			d.steps.Add(1)
			switch {
			case err != nil:
				d.failed.Store(err.Error())
				return
			case res.Status == runs.StepContinue:
			case res.Status == runs.StepWait:
				time.Sleep(time.Duration(res.WaitSeconds) * time.Second) // the machine's Wait state
			default:
				return
			}
		}
	}()
	return nil
}

func (d *stepper) Lost(context.Context, store.Run) (bool, error) { return false, nil }

// A LangGraph app's run longer than one run-worker step (here a budget of
// a nanosecond, and a runtime yielding after every superstep): each step
// ends on the call that yielded, its checkpoint stored, and the next step
// continues the run from it. The answers, states and histories are those
// of the same runs made in one call each.
func TestRunsLongerThanAStep(t *testing.T) {
	rt := startRuntime(t, basicApp(t))
	want := newEnvWith(t, filepath.Join(t.TempDir(), "db"), rt, nil)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	var d *stepper
	stepped := newEnvDispatched(t, db, rt, nil, nil, &pyapp.YieldBudget{Bytes: 1}, func(s *runs.Service) runs.Dispatcher {
		d = &stepper{s: s, budget: time.Nanosecond}
		return d
	})
	runsMade := 0
	for _, sc := range scenarios {
		runsMade += len(sc.steps)
		if sc.update != nil {
			runsMade++
		}
		if w, got := want.play(t, sc), stepped.play(t, sc); !reflect.DeepEqual(w, got) {
			t.Errorf("%s differs:\none call  %v\nstepped   %v", sc.name, w, got)
		}
	}
	if msg := d.failed.Load(); msg != nil {
		t.Errorf("a step failed: %v", msg)
	}
	if n := int(d.steps.Load()); n < 2*runsMade {
		t.Errorf("%d steps for %d runs: the runs did not continue across steps", n, runsMade)
	}
	t.Logf("%d steps for %d runs", d.steps.Load(), runsMade)
}
