package graph

import (
	"encoding/json"
	"sync/atomic"
	"unicode/utf8"
)

// KindLimit is the kind of a run stopped by one of its Limits.
const KindLimit = "LimitExceededError"

// Limits bound the work of one run, the runs of its subgraphs included, so
// that no input or graph can make a run use unbounded memory or CPU. A zero
// field sets no bound. A run stopped by a limit fails with KindLimit and a
// message naming the limit.
type Limits struct {
	// MaxStateBytes bounds the size, as JSON, of the state after each step,
	// of the input and of each step's writes (checked before they are
	// merged, so a step cannot build a state far larger than the bound).
	MaxStateBytes int
	// MaxNodeExecutions bounds the tasks a run executes, counted as they
	// start, the tasks of its subgraph runs included; the count survives a
	// resumption from a checkpoint (Checkpoint.RunExecutions).
	MaxNodeExecutions int
	// MaxSubgraphDepth bounds how deeply subgraph runs nest: the run's own
	// graph is depth 0, a subgraph it runs depth 1.
	MaxSubgraphDepth int
}

// account is the node-execution count shared by a run and its subgraph
// runs, and how deep in that tree a run is.
type account struct {
	executions *atomic.Int64
	depth      int
}

// accountFor returns the account a step of cp counts against: the one the
// options carry (a subgraph run counts against its parent run's), or a new
// one starting from the count recorded on cp (a top-level run).
func (o Options) accountFor(cp Checkpoint) account {
	if o.shared.executions != nil {
		return o.shared
	}
	n := &atomic.Int64{}
	n.Store(int64(cp.RunExecutions))
	return account{executions: n}
}

// take counts one node execution; false once the run is past its limit.
func (a account) take(max int) bool {
	n := a.executions.Add(1)
	return max <= 0 || n <= int64(max)
}

func executionsError(max int) *Error {
	return Errorf(KindLimit, "the run reached its limit of %d node executions (subgraph nodes included)", max)
}

func stateSizeError(what string, size, max int) *Error {
	return Errorf(KindLimit, "%s is %s of JSON, more than the limit of %d bytes of state", what, sizeText(size, max), max)
}

// sizeText says how large something is that jsonSize stopped measuring
// once it passed max.
func sizeText(size, max int) string {
	if size > max {
		return "more than " + itoa(max) + " bytes"
	}
	return itoa(size) + " bytes"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// SubgraphOptions are the options of a subgraph run that the node starts:
// the run's context and limits, one level deeper, its node executions
// counted against this run's, observed by the run's observer under the
// task's namespace (see Runtime.Subgraph). It fails (KindLimit) when the
// subgraph would nest deeper than Limits.MaxSubgraphDepth.
func (rt *Runtime) SubgraphOptions() (Options, error) {
	depth := rt.account.depth + 1
	if max := rt.opts.Limits.MaxSubgraphDepth; max > 0 && depth > max {
		return Options{}, Errorf(KindLimit, "node %q: a subgraph at depth %d passes the limit of %d nested subgraphs", rt.Node, depth, max)
	}
	acct := rt.account
	if acct.executions == nil { // a Runtime made outside a run (tests)
		acct.executions = &atomic.Int64{}
	}
	acct.depth = depth
	return rt.Subgraph(Options{Context: cloneMap(rt.Context), Metadata: cloneMap(rt.Metadata), Limits: rt.opts.Limits, shared: acct}), nil
}

// jsonSize is the size of v encoded as JSON by encoding/json, or a number
// above max as soon as it passes max (max <= 0: no bound), so a huge value
// is never walked, let alone encoded, whole. Values in the state's shape are
// measured in place; others (Go values a node wrote) are encoded.
func jsonSize(v any, max int) int {
	m := sizer{max: max}
	m.add(v)
	return m.n
}

type sizer struct{ n, max int }

func (m *sizer) over() bool { return m.max > 0 && m.n > m.max }

func (m *sizer) add(v any) {
	if m.over() {
		return
	}
	switch t := v.(type) {
	case nil:
		m.n += 4
	case bool:
		m.n += 4
		if !t {
			m.n++
		}
	case string:
		m.n += stringSize(t)
	case json.Number:
		m.n += len(t)
	case []any:
		m.n += 2
		for i, x := range t {
			if i > 0 {
				m.n++ // the comma
			}
			if m.add(x); m.over() {
				return
			}
		}
	case map[string]any:
		m.n += 2
		i := 0
		for k, x := range t {
			if i++; i > 1 {
				m.n++
			}
			m.n += stringSize(k) + 1
			if m.add(x); m.over() {
				return
			}
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return // normalize reports it
		}
		m.n += len(b)
	}
}

// stringSize is the size of s as a JSON string, escapes included (an upper
// bound: every control character is counted as a \u escape).
func stringSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20, c == '<', c == '>', c == '&':
				n += 6
			case c == '"', c == '\\':
				n += 2
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// writesSize is the JSON size of the values of ws, measured up to max.
func writesSize(ws Writes, max int) int {
	m := sizer{max: max}
	for _, w := range ws {
		if m.add(w.Value); m.over() {
			break
		}
	}
	return m.n
}
