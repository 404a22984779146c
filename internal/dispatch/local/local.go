// Package local is the in-process scheduler of the local server, the
// counterpart of internal/dispatch/sfn: its Provisioner is the
// deployments.Provisioner that runs deployment lifecycles: lifecycle work runs on goroutines, one deployment at a time in
// arrival order (so two revisions of a deployment never race to activate),
// different deployments in parallel. Work that fails for a passing reason is
// retried with backoff; what is unfinished at shutdown is picked up by
// Resume on the next start, because the state lives in the store.
package local

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Retry policy for work that returned an error (the store was busy, say).
const (
	maxAttempts  = 5
	firstBackoff = 100 * time.Millisecond
)

// Lifecycle is the work a Provisioner schedules: the deployment use case
// (*deployments.Service), which holds every rule of it.
type Lifecycle interface {
	// Provision carries a revision through its lifecycle.
	Provision(ctx context.Context, orgID, deploymentID, revisionID string) error
	// FinishDelete ends a deployment's deletion.
	FinishDelete(ctx context.Context, orgID, deploymentID string) error
	// Resume hands the provisioner every unfinished piece of work.
	Resume(ctx context.Context) error
}

// job is one piece of lifecycle work.
type job struct {
	orgID, deploymentID, revisionID string // revisionID "" = finish a deletion
}

// Provisioner runs lifecycle work in the background.
type Provisioner struct {
	svc Lifecycle
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	queues map[string][]job // per deployment; present while its worker runs
	closed bool
}

// NewProvisioner returns a provisioner of svc's work. Make it svc's
// provisioner, then call Resume; Close stops it.
func NewProvisioner(svc Lifecycle, log *slog.Logger) *Provisioner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Provisioner{svc: svc, log: log, ctx: ctx, cancel: cancel, queues: map[string][]job{}}
}

// StartProvision queues the lifecycle of a revision.
func (p *Provisioner) StartProvision(orgID, deploymentID, revisionID string) {
	p.enqueue(job{orgID, deploymentID, revisionID})
}

// StartDelete queues the end of a deletion.
func (p *Provisioner) StartDelete(orgID, deploymentID string) {
	p.enqueue(job{orgID: orgID, deploymentID: deploymentID})
}

// Resume queues every unfinished piece of work found in the store.
func (p *Provisioner) Resume(ctx context.Context) error {
	return p.svc.Resume(ctx)
}

// Close cancels running work and waits for the workers to stop. Work not
// finished stays recorded as unsettled and resumes on the next start.
func (p *Provisioner) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Provisioner) enqueue(j job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	q, running := p.queues[j.deploymentID]
	for _, queued := range q {
		if queued == j {
			return // already waiting
		}
	}
	p.queues[j.deploymentID] = append(q, j)
	if !running {
		p.wg.Add(1)
		go p.work(j.deploymentID)
	}
}

// work drains one deployment's queue, then exits.
func (p *Provisioner) work(deploymentID string) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		q := p.queues[deploymentID]
		if len(q) == 0 || p.closed {
			delete(p.queues, deploymentID)
			p.mu.Unlock()
			return
		}
		j := q[0]
		p.queues[deploymentID] = q[1:]
		p.mu.Unlock()
		p.run(j)
	}
}

func (p *Provisioner) run(j job) {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := p.do(j)
		if err == nil || p.ctx.Err() != nil {
			return
		}
		if attempt == maxAttempts {
			p.log.Error("deployment work failed; it resumes on the next start",
				"deployment_id", j.deploymentID, "revision_id", j.revisionID, "attempts", attempt, "error", err.Error())
			return
		}
		p.log.Warn("deployment work failed; retrying",
			"deployment_id", j.deploymentID, "revision_id", j.revisionID, "attempt", attempt, "error", err.Error())
		select {
		case <-time.After(backoff):
			backoff *= 2
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *Provisioner) do(j job) error {
	if j.revisionID == "" {
		return p.svc.FinishDelete(p.ctx, j.orgID, j.deploymentID)
	}
	return p.svc.Provision(p.ctx, j.orgID, j.deploymentID, j.revisionID)
}
