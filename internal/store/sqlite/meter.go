package sqlite

import (
	"strings"
	"sync"
	"sync/atomic"
)

// WriteMeter counts what the store hands SQLite to write: the bytes of the
// values bound to every write statement (strings and blobs by length,
// numbers and times as 8 bytes), whatever the table. It is how the bench
// and the tests measure the bytes a step writes — every write of the step
// (checkpoints and their blobs, the thread's summary, the run's result,
// events), not a guess from the checkpoint's size. SQLite's own overhead
// (pages, indexes, the WAL) comes on top and is not counted.
type WriteMeter struct {
	bytes      atomic.Int64
	statements atomic.Int64
	mu         sync.Mutex
	byTable    map[string]int64
}

// ByTable is the count so far by the table each statement writes.
func (m *WriteMeter) ByTable() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.byTable))
	for k, v := range m.byTable {
		out[k] = v
	}
	return out
}

// tableOf is the table a write statement names first.
func tableOf(query string) string {
	best, name := len(query), "?"
	for _, verb := range []string{"INSERT INTO ", "UPDATE ", "DELETE FROM "} {
		if i := strings.Index(query, verb); i >= 0 && i < best {
			rest := strings.TrimLeft(query[i+len(verb):], " ")
			if j := strings.IndexAny(rest, " (\n\t"); j > 0 {
				rest = rest[:j]
			}
			best, name = i, rest
		}
	}
	return name
}

// Bytes is the count so far.
func (m *WriteMeter) Bytes() int64 { return m.bytes.Load() }

// Statements is the number of write statements so far.
func (m *WriteMeter) Statements() int64 { return m.statements.Load() }

// SetWriteMeter makes db count its writes in m (nil: stop counting). Set
// it before the store is used concurrently.
func (db *DB) SetWriteMeter(m *WriteMeter) { db.stmts.meter = m }

func (m *WriteMeter) count(query string, args []any) {
	if m == nil {
		return
	}
	var n int64
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += int64(len(v))
		case []byte:
			n += int64(len(v))
		case nil:
		default: // numbers, times, booleans
			n += 8
		}
	}
	m.bytes.Add(n)
	m.statements.Add(1)
	m.mu.Lock()
	if m.byTable == nil {
		m.byTable = map[string]int64{}
	}
	m.byTable[tableOf(query)] += n
	m.mu.Unlock()
}
