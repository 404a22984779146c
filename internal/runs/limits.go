package runs

import "github.com/stepgraph/stepgraph/internal/graph"

// Defaults of Limits: generous for real graphs, and still bounded, so that
// no request, tenant or graph document can exhaust the memory, the CPU or
// the workers shared by all (docs/reliability.md, "Limits and quotas").
const (
	DefaultMaxRecursionLimit = 10000
	DefaultMaxStateBytes     = 16 << 20
	DefaultMaxNodeExecutions = 25000
	DefaultMaxSubgraphDepth  = 8
	DefaultMaxAttempts       = 10
	DefaultMaxMetadataBytes  = 64 << 10
)

// Limits bound what one run may use and what one organization may store.
// A zero field takes its default (above); the quotas, MaxThreads and
// MaxStoredBytes, are off when zero.
type Limits struct {
	// MaxRecursionLimit is the largest config.recursion_limit a run may ask
	// for (a larger one is refused with 422), and the bound of runs stored
	// before it was set (they end with an error).
	MaxRecursionLimit int
	// MaxStateBytes bounds a run's state, as JSON (graph.Limits).
	MaxStateBytes int
	// MaxNodeExecutions bounds the node executions of a run, its subgraphs'
	// included (graph.Limits).
	MaxNodeExecutions int
	// MaxSubgraphDepth bounds the nesting of subgraph runs (graph.Limits);
	// deployed graphs nesting deeper are refused when deployed.
	MaxSubgraphDepth int
	// MaxAttempts bounds how many times an in-process worker starts a run
	// (store.Run.Attempt): a run whose executions keep ending without it
	// finishing — its process crashed each time, or lost its lease — ends
	// with an error instead of crash-looping the server. A normal restart
	// counts too. On AWS the run state machine's retry policy bounds it.
	MaxAttempts int
	// MaxMetadataBytes bounds each metadata object (of a thread, a run, an
	// assistant), as JSON; a larger one is refused with 422.
	MaxMetadataBytes int
	// MaxThreads is the quota of threads per organization (0: none).
	MaxThreads int64
	// MaxStoredBytes is the quota of bytes an organization's threads may
	// hold (0: none): their metadata, their runs' requests and results,
	// their checkpoints (store.Usage).
	MaxStoredBytes int64
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (l Limits) maxRecursionLimit() int {
	return orDefault(l.MaxRecursionLimit, DefaultMaxRecursionLimit)
}
func (l Limits) maxAttempts() int      { return orDefault(l.MaxAttempts, DefaultMaxAttempts) }
func (l Limits) maxMetadataBytes() int { return orDefault(l.MaxMetadataBytes, DefaultMaxMetadataBytes) }

// Graph returns the engine's limits of a run.
func (l Limits) Graph() graph.Limits {
	return graph.Limits{
		MaxStateBytes:     orDefault(l.MaxStateBytes, DefaultMaxStateBytes),
		MaxNodeExecutions: orDefault(l.MaxNodeExecutions, DefaultMaxNodeExecutions),
		MaxSubgraphDepth:  orDefault(l.MaxSubgraphDepth, DefaultMaxSubgraphDepth),
	}
}
