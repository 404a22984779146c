package calltoken

import (
	"context"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Limit bounds what one call spends on one route.
type Limit struct {
	Route    string // names the counters, with the call's id
	Requests int64  // at most this many requests (0: no bound)
	Bytes    int64  // of at most this many bytes in all (0: no bound)
}

// Spend counts a request of size bytes (request: its id, unique within
// the call, so a retried request counts once) against limit; over the
// limit it answers a fail.Quota naming the bound. The counters are shared
// by every process (store.CallBudgets).
func Spend(ctx context.Context, budgets store.CallBudgets, c Claims, limit Limit, request string, size int64) error {
	spent, err := budgets.SpendCall(ctx, c.ID+"/"+limit.Route, request, size, c.Expires)
	if err != nil {
		return err
	}
	if limit.Requests > 0 && spent.Requests > limit.Requests {
		return fail.Quota("%s: at most %d requests per run call", limit.Route, limit.Requests)
	}
	if limit.Bytes > 0 && spent.Bytes > limit.Bytes {
		return fail.Quota("%s: at most %d bytes per run call", limit.Route, limit.Bytes)
	}
	return nil
}
