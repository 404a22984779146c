//go:build !stepgraph_faults

package lambdaapp

import (
	"log/slog"

	"github.com/stepgraph/stepgraph/internal/store"
)

// faultyRuns is s itself: fault injection exists only in binaries built
// with -tags stepgraph_faults (the end-to-end tests' run-worker).
func faultyRuns(s store.Runs, _ *slog.Logger) store.Runs { return s }
