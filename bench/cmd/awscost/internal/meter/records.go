package meter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// EnvRecords names the file a metered Lambda appends its records to (JSON
// lines: calls and invocations). The emulator runs Lambdas as local
// processes, so a path on this machine reaches them.
const EnvRecords = "STEPGRAPH_AWSCOST_RECORDS"

// Invocation is one handler invocation of a metered Lambda.
type Invocation struct {
	Kind string `json:"kind"` // "invocation"
	Fn   string `json:"fn"`
	// RequestID is the Lambda request ID; Replay marks an event served
	// again under a request ID already answered (see PhaseReplay).
	RequestID string `json:"request_id,omitempty"`
	Replay    bool   `json:"replay,omitempty"`
	Action    string `json:"action,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	Status    string `json:"status,omitempty"`
	Err       string `json:"err,omitempty"`
	// WallMicros is the handler's duration; OverheadMicros the meter's part
	// of it; Micros the difference: what the handler would have taken
	// without the meter, its billed duration.
	WallMicros     int64 `json:"wall_us"`
	OverheadMicros int64 `json:"overhead_us"`
	Micros         int64 `json:"us"`
	// InitMicros: from the process's start to its first invocation (a cold
	// start), on the first invocation of a process only.
	InitMicros int64 `json:"init_us,omitempty"`
	// EndUnixMicros: when the handler returned (this machine's clock).
	EndUnixMicros int64 `json:"end_unix_us"`
	// LogBytes the function wrote to its log (CloudWatch Logs) during the
	// invocation.
	LogBytes int64 `json:"log_bytes"`
}

// Lines appends JSON lines to a file shared by several processes: each
// record is one write(2) on an O_APPEND descriptor.
type Lines struct {
	mu sync.Mutex
	f  *os.File
}

// OpenLines opens path for appending, creating it.
func OpenLines(path string) (*Lines, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &Lines{f: f}, nil
}

// Write appends v as one line.
func (l *Lines) Write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(b)
}

// Records are the calls and invocations read back from a records file.
type Records struct {
	Calls       []Call
	Invocations []Invocation
}

// ReadRecords reads the complete lines of path from byte offset on, and
// returns them with the offset after the last complete line.
func ReadRecords(path string, offset int64) (Records, int64, error) {
	var rec Records
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return rec, offset, nil
	}
	if err != nil {
		return rec, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return rec, offset, err
	}
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil { // an incomplete last line waits for the next read
			break
		}
		offset += int64(len(line))
		var kind struct{ Kind string }
		if json.Unmarshal(line, &kind) != nil {
			return rec, offset, fmt.Errorf("%s: bad record %q", path, bytes.TrimSpace(line))
		}
		switch kind.Kind {
		case "call":
			var c Call
			if err := json.Unmarshal(line, &c); err != nil {
				return rec, offset, err
			}
			rec.Calls = append(rec.Calls, c)
		case "invocation":
			var inv Invocation
			if err := json.Unmarshal(line, &inv); err != nil {
				return rec, offset, err
			}
			rec.Invocations = append(rec.Invocations, inv)
		}
	}
	return rec, offset, nil
}

// CountingWriter counts the bytes written through it.
type CountingWriter struct {
	W io.Writer
	n atomic.Int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	if c.W == nil {
		return len(p), nil
	}
	return c.W.Write(p)
}

// N is the number of bytes written so far.
func (c *CountingWriter) N() int64 { return c.n.Load() }
