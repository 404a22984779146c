// Package growth holds the results of bench/cmd/ckptbench (issue 19: how
// the cost of a step grows with the state): the points of the growing
// conversation and of the large state, the summary both reports quote
// against issue 19's target, and where the results are found. ckptbench
// writes them; loadgen's report (`make bench`) reads the latest beside it.
package growth

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// Workload names of a Series.
const (
	Conversation = "growing conversation"
	LargeState   = "large state"
)

// TargetRatio is issue 19's bound on turn 200 against turn 1, for the
// latency and for the bytes written.
const TargetRatio = 2.0

// Point is one measured turn or step.
type Point struct {
	N         int     `json:"n"`
	LatencyMS float64 `json:"latency_ms"`
	// CPUMS is the CPU time (user and system) of the whole bench process
	// (server and client) during the turn: less disturbed by a loaded
	// machine than the latency.
	CPUMS   float64          `json:"cpu_ms"`
	Bytes   int64            `json:"bytes"`
	ByTable map[string]int64 `json:"by_table"`
	StateKB float64          `json:"state_kb"`
}

// Series is one workload on one durability.
type Series struct {
	Workload   string  `json:"workload"`
	Durability string  `json:"durability"`
	Points     []Point `json:"points"`
	// RunBytes and RunMS: the large-state run as a whole (input to result).
	RunBytes int64   `json:"run_bytes,omitempty"`
	RunMS    float64 `json:"run_ms,omitempty"`
}

// checkpointTables are the tables of the checkpoint format.
var checkpointTables = []string{"checkpoints", "checkpoint_blobs"}

// CheckpointBytes is what p wrote to the checkpoint tables.
func CheckpointBytes(p Point) int64 {
	var n int64
	for _, t := range checkpointTables {
		n += p.ByTable[t]
	}
	return n
}

// Window is the median of a field over points [from, to] (1-based turns).
func Window(ps []Point, from, to int, f func(Point) float64) float64 {
	var v []float64
	for _, p := range ps {
		if p.N >= from && p.N <= to {
			v = append(v, f(p))
		}
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return math.NaN()
	}
	return v[len(v)/2]
}

// Fastest is the lowest latency over turns [from, to].
func Fastest(ps []Point, from, to int) float64 {
	best := math.Inf(1)
	for _, p := range ps {
		if p.N >= from && p.N <= to {
			best = math.Min(best, p.LatencyMS)
		}
	}
	return best
}

// Summary is a growing conversation's first turns against its last: the
// medians of turns 1–10 and of the last 10 (one turn's latency on a
// shared machine swings too much to be quoted alone), the fastest of
// each ten, and the bytes written by the first and the last turn.
type Summary struct {
	Durability      string
	LastTurn        int
	Latency1        float64 // ms, median of turns 1–10
	LatencyN        float64 // ms, median of the last 10 turns
	Fastest1        float64
	FastestN        float64
	CPU1, CPUN      float64 // ms of the process per turn, medians
	Bytes1, BytesN  int64
	Ckpt1, CkptN    int64 // of which the checkpoint tables
	State1, StateN  float64
	TotalBytes      int64
	TotalCheckpoint int64
}

// Summarize sums up a growing conversation (false: not one, or no points).
func Summarize(s Series) (Summary, bool) {
	if s.Workload != Conversation || len(s.Points) == 0 {
		return Summary{}, false
	}
	ps := s.Points
	first, last := ps[0], ps[len(ps)-1]
	lat := func(p Point) float64 { return p.LatencyMS }
	cpu := func(p Point) float64 { return p.CPUMS }
	sum := Summary{Durability: s.Durability, LastTurn: last.N,
		Latency1: Window(ps, 1, 10, lat), LatencyN: Window(ps, last.N-9, last.N, lat),
		Fastest1: Fastest(ps, 1, 10), FastestN: Fastest(ps, last.N-9, last.N),
		CPU1: Window(ps, 1, 10, cpu), CPUN: Window(ps, last.N-9, last.N, cpu),
		Bytes1: first.Bytes, BytesN: last.Bytes, Ckpt1: CheckpointBytes(first), CkptN: CheckpointBytes(last),
		State1: first.StateKB, StateN: last.StateKB}
	for _, p := range ps {
		sum.TotalBytes += p.Bytes
		sum.TotalCheckpoint += CheckpointBytes(p)
	}
	return sum, true
}

// LatencyRatio is the last turns' median latency over the first turns'.
func (s Summary) LatencyRatio() float64 { return s.LatencyN / s.Latency1 }

// BytesRatio is the bytes written by the last turn over the first's.
func (s Summary) BytesRatio() float64 { return float64(s.BytesN) / float64(s.Bytes1) }

// Met reports whether the conversation meets issue 19's target: the last
// turn's latency (median of ten) and bytes written each at most
// TargetRatio times the first's.
func (s Summary) Met() bool {
	return s.LatencyRatio() <= TargetRatio && s.BytesRatio() <= TargetRatio
}

// File is where ckptbench writes the results of a date (tag: a suffix).
func File(dir, date, tag string) string {
	return filepath.Join(dir, date+"-checkpoints"+tag+".json")
}

// Find returns the results of date in dir, else the latest there (by
// name); "" when there are none.
func Find(dir, date string) string {
	if p := File(dir, date, ""); fileExists(p) {
		return p
	}
	found, _ := filepath.Glob(filepath.Join(dir, "*-checkpoints*.json"))
	if len(found) == 0 {
		return ""
	}
	sort.Strings(found)
	return found[len(found)-1]
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Read reads the results ckptbench wrote to path.
func Read(path string) ([]Series, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var all []Series
	return all, json.Unmarshal(b, &all)
}
