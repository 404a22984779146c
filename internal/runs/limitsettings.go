package runs

import (
	"fmt"
	"math"
)

// LimitSetting is one of the integer limits and quotas of Limits as an
// operator sets it: the local server's flag and environment variable, the
// AWS functions' environment variable (the same name), its least value and
// its default. The roots read them from here, so the two shapes cannot
// disagree on a name or a bound.
type LimitSetting struct {
	Flag    string // serve flag, without its dash
	Env     string // environment variable
	Min     int64  // least value (quotas take 0: off)
	Default int64
	Usage   string
	// field is the setting's place in Limits: an *int, or an *int64 for
	// the quotas.
	field func(*Limits) any
}

// LimitSettings are every integer setting of Limits, in the order of the
// documentation (docs/reliability.md, "Limits and quotas").
var LimitSettings = []LimitSetting{
	{"max-recursion-limit", "STEPGRAPH_MAX_RECURSION_LIMIT", 1, DefaultMaxRecursionLimit,
		"largest config.recursion_limit a run may ask for; above it: 422",
		func(l *Limits) any { return &l.MaxRecursionLimit }},
	{"max-state-bytes", "STEPGRAPH_MAX_STATE_BYTES", 1024, DefaultMaxStateBytes,
		"largest state of a run, as JSON (and input, and writes of a step); past it the run ends with an error",
		func(l *Limits) any { return &l.MaxStateBytes }},
	{"max-node-executions", "STEPGRAPH_MAX_NODE_EXECUTIONS", 1, DefaultMaxNodeExecutions,
		"node executions per run, its subgraphs' included; past it the run ends with an error",
		func(l *Limits) any { return &l.MaxNodeExecutions }},
	{"max-subgraph-depth", "STEPGRAPH_MAX_SUBGRAPH_DEPTH", 1, DefaultMaxSubgraphDepth,
		"how deeply subgraphs may nest; deeper graphs are refused when deployed",
		func(l *Limits) any { return &l.MaxSubgraphDepth }},
	{"max-run-attempts", "STEPGRAPH_MAX_RUN_ATTEMPTS", 1, DefaultMaxAttempts,
		"starts of a run (restarts and crashes of the server included) before it ends with an error instead of resuming",
		func(l *Limits) any { return &l.MaxAttempts }},
	{"max-metadata-bytes", "STEPGRAPH_MAX_METADATA_BYTES", 64, DefaultMaxMetadataBytes,
		"largest metadata object (threads, runs, assistants), as JSON; above it: 422",
		func(l *Limits) any { return &l.MaxMetadataBytes }},
	{"max-threads-per-org", "STEPGRAPH_MAX_THREADS_PER_ORG", 0, 0,
		"quota of threads per organization, 0 = none; over it: 429",
		func(l *Limits) any { return &l.MaxThreads }},
	{"max-stored-bytes-per-org", "STEPGRAPH_MAX_STORED_BYTES_PER_ORG", 0, 0,
		"quota of bytes per organization (thread metadata, runs, checkpoints), 0 = none; over it: 429, and runs end with an error",
		func(l *Limits) any { return &l.MaxStoredBytes }},
}

// Set checks v against the setting's bounds and stores it in l. The error
// is the rule broken ("must be at least 1"), for the caller to prefix with
// the name it was given under.
func (s LimitSetting) Set(l *Limits, v int64) error {
	if v < s.Min {
		return fmt.Errorf("must be at least %d", s.Min)
	}
	switch p := s.field(l).(type) {
	case *int:
		if v > math.MaxInt32 {
			return fmt.Errorf("must be at most %d", math.MaxInt32)
		}
		*p = int(v)
	case *int64:
		*p = v
	}
	return nil
}

// Get is the setting's value in l (0: unset, its default applies).
func (s LimitSetting) Get(l *Limits) int64 {
	switch p := s.field(l).(type) {
	case *int:
		return int64(*p)
	case *int64:
		return *p
	}
	return 0
}
