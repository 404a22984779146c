package runs

import (
	"context"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// Quotas per organization (Limits.MaxThreads, Limits.MaxStoredBytes). The
// store counts what each organization stores in the transactions of its
// writes (store.Accounting); the decision is made here, by reading those
// counters before a write. Writes of one organization made at the same
// moment read the same counters, so together they can pass a quota by what
// they write: by one thread each for the thread quota, by about what its
// runs write in quotaRecheck each for the byte quota (see quotaGuard).
// Deleting threads or runs brings the organization back under its quotas.

// quotaRecheck is how long a running run trusts the counters it read
// (adding what it wrote itself since), so that the check costs no read per
// step.
const quotaRecheck = time.Second

func threadQuotaError(has, max int64) error {
	return fail.Quota("quota exceeded: the organization has %d threads, its quota is %d threads (threads per organization); delete threads to make room", has, max)
}

func bytesQuotaError(has, max int64) error {
	return fail.Quota("quota exceeded: the organization stores %d bytes, its quota is %d bytes (stored bytes per organization); delete threads or runs to make room", has, max)
}

// checkQuota refuses a write that adds newThreads threads, or any bytes,
// when the organization is at one of its quotas (429, naming it).
func (s *Service) checkQuota(ctx context.Context, orgID string, newThreads int64) error {
	l := s.Limits
	if (l.MaxThreads == 0 || newThreads == 0) && l.MaxStoredBytes == 0 {
		return nil
	}
	u, err := s.Store.Usage(ctx, orgID)
	if err != nil {
		return err
	}
	if l.MaxThreads > 0 && newThreads > 0 && u.Threads+newThreads > l.MaxThreads {
		return threadQuotaError(u.Threads, l.MaxThreads)
	}
	if l.MaxStoredBytes > 0 && u.Bytes >= l.MaxStoredBytes {
		return bytesQuotaError(u.Bytes, l.MaxStoredBytes)
	}
	return nil
}

// quotaGuard checks a run's checkpoint writes against its organization's
// byte quota: it reads the counters at most every quotaRecheck and counts
// the run's own writes in between.
type quotaGuard struct {
	s       *Service
	orgID   string
	read    time.Time
	stored  int64 // the counters' bytes when read
	written int64 // what this run wrote since
}

// allow reports a quota error when writing n more bytes would pass the
// quota; otherwise it counts them.
func (q *quotaGuard) allow(ctx context.Context, n int64) error {
	max := q.s.Limits.MaxStoredBytes
	if max == 0 {
		return nil
	}
	if now := time.Now(); now.Sub(q.read) >= quotaRecheck {
		u, err := q.s.Store.Usage(ctx, q.orgID)
		if err != nil {
			return err
		}
		q.read, q.stored, q.written = now, u.Bytes, 0
	}
	if q.stored+q.written+n > max {
		return bytesQuotaError(q.stored+q.written, max)
	}
	q.written += n
	return nil
}
