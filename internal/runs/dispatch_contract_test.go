package runs_test

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/runs/dispatchtest"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// The in-process workers (a nil Dispatcher) honour the dispatcher
// contract, on a SQLite store: two workers, so that a run dispatched again
// could be claimed twice.
func TestInProcessDispatchContract(t *testing.T) {
	dispatchtest.Run(t, func(t *testing.T) *runs.Service {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "stepgraph.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc := &runs.Service{Store: db, Graphs: graph.NewRegistry(), PollInterval: 10 * time.Millisecond}
		stop := svc.StartWorkers(2, slog.New(slog.DiscardHandler))
		t.Cleanup(stop)
		return svc
	})
}
