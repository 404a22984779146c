package reqid

import (
	"context"
	"testing"
)

func TestWithFrom(t *testing.T) {
	if got := From(context.Background()); got != "" {
		t.Errorf("From of a bare context = %q", got)
	}
	ctx := With(context.Background(), "r-1")
	if got := From(ctx); got != "r-1" {
		t.Errorf("From = %q, want r-1", got)
	}
	if got := From(With(ctx, "r-2")); got != "r-2" {
		t.Errorf("the inner id wins: %q", got)
	}
}
