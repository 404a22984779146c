package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// testCallBudgets: a call's counters start at its first request, add each
// request and its bytes, count a repeated request once, are the call's
// alone, and count every one of concurrent requests exactly once.
func testCallBudgets(t *testing.T, s store.Store) {
	b, ok := s.(store.CallBudgets)
	if !ok {
		t.Fatalf("%T does not implement store.CallBudgets", s)
	}
	expires := time.Now().Add(time.Hour)
	call, other := newID(), newID()
	spend := func(id, request string, size int64) store.CallSpent {
		t.Helper()
		got, err := b.SpendCall(ctx(), id, request, size, expires)
		if err != nil {
			t.Fatalf("SpendCall: %v", err)
		}
		return got
	}
	if got := spend(call, "r1", 10); got != (store.CallSpent{Requests: 1, Bytes: 10}) {
		t.Fatalf("first request: %+v, want 1 request of 10 bytes", got)
	}
	if got := spend(call, "r2", 5); got != (store.CallSpent{Requests: 2, Bytes: 15}) {
		t.Fatalf("second request: %+v, want 2 requests, 15 bytes", got)
	}
	if got := spend(call, "r2", 5); got != (store.CallSpent{Requests: 2, Bytes: 15}) {
		t.Fatalf("the second request again: %+v, want it counted once (2 requests, 15 bytes)", got)
	}
	if got := spend(other, "r1", 0); got != (store.CallSpent{Requests: 1}) {
		t.Fatalf("another call: %+v, want its own counters", got)
	}

	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.SpendCall(ctx(), call, fmt.Sprintf("c%d", i), 1, expires); err != nil {
				t.Errorf("concurrent SpendCall: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := spend(call, "last", 0); got != (store.CallSpent{Requests: 3 + n, Bytes: 15 + n}) {
		t.Fatalf("after %d concurrent requests: %+v, want %d requests, %d bytes", n, got, 3+n, 15+n)
	}
}
