//go:build !stepgraph_faults

package lambdaapp

import (
	"log/slog"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// faultyRuns is s itself: fault injection exists only in binaries built
// with -tags stepgraph_faults (the end-to-end tests' run-worker).
func faultyRuns(s runs.Store, _ *slog.Logger) runs.Store { return s }

// localReposFromEnv: a deployed function never takes EnvLocalRepoDirs
// (git sources on AWS are https:// only).
const localReposFromEnv = false
