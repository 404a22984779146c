package runs

import (
	"testing"

	"github.com/stepgraph/stepgraph/internal/store"
)

// TestIfInflight: each multitask strategy maps onto the store's mechanism,
// and every strategy a request may name onto one the store accepts.
func TestIfInflight(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		want     store.IfInflight
		action   string
	}{
		{"reject", store.InflightReject, ""},
		{"enqueue", store.InflightEnqueue, ""},
		{"interrupt", store.InflightCancel, store.CancelInterrupt},
		{"rollback", store.InflightCancel, store.CancelRollback},
	} {
		got, action := ifInflight(tc.strategy)
		if got != tc.want || action != tc.action {
			t.Errorf("ifInflight(%q) = %d, %q; want %d, %q", tc.strategy, got, action, tc.want, tc.action)
		}
	}
	for _, m := range multitasks {
		got, action := ifInflight(m)
		if err := (store.NewRun{IfInflight: got, CancelAction: action}).CheckInflight(); err != nil {
			t.Errorf("strategy %q: the store refuses its mechanism: %v", m, err)
		}
	}
}
