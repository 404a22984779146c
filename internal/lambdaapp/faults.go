//go:build stepgraph_faults

package lambdaapp

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/store"
)

// localReposFromEnv: a test binary takes EnvLocalRepoDirs (its functions
// on the emulator read repositories of the test machine).
const localReposFromEnv = true

// Fault injection (see EnvFaultDir): a test arms a thread by writing N to
// <dir>/<thread id>.exit-after; the process then exits abruptly — as a
// Lambda killed mid-step does, without answering — right after storing the
// thread's Nth checkpoint. Once: it first creates <thread id>.exited, and
// does nothing when that exists, so the retried step runs normally.
func faultyRuns(s runs.Store, log *slog.Logger) runs.Store {
	dir := os.Getenv(EnvFaultDir)
	if dir == "" {
		return s
	}
	return &crashingRuns{Store: s, dir: dir, log: log, stored: map[string]int{}}
}

type crashingRuns struct {
	runs.Store
	dir string
	log *slog.Logger

	mu     sync.Mutex
	stored map[string]int // checkpoints stored per thread by this process
}

func (c *crashingRuns) PutCheckpoint(ctx context.Context, orgID string, cp store.Checkpoint) error {
	err := c.Store.PutCheckpoint(ctx, orgID, cp)
	if err == nil {
		c.count(cp.ThreadID, 1)
	}
	return err
}

func (c *crashingRuns) PutCheckpoints(ctx context.Context, orgID string, cps []store.Checkpoint) error {
	err := c.Store.PutCheckpoints(ctx, orgID, cps)
	if err == nil && len(cps) > 0 {
		c.count(cps[0].ThreadID, len(cps))
	}
	return err
}

func (c *crashingRuns) count(threadID string, n int) {
	if strings.ContainsAny(threadID, `/\`) || threadID == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stored[threadID] += n
	raw, err := os.ReadFile(filepath.Join(c.dir, threadID+".exit-after"))
	if err != nil {
		return // not armed
	}
	after, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || c.stored[threadID] < after {
		return
	}
	f, err := os.OpenFile(filepath.Join(c.dir, threadID+".exited"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return // exited once already
	}
	f.Close()
	c.log.Warn("fault injection: exiting mid-step", "thread_id", threadID, "checkpoints", c.stored[threadID])
	os.Exit(3)
}
