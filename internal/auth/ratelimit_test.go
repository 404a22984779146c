package auth

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Rate: 2, Burst: 3, Now: func() time.Time { return now }}
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th request: ok=%v wait=%v, want refused with 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Error("another key is limited by the first one's use")
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.Allow("a"); !ok {
		t.Error("a token did not come back after 1/rate")
	}
	var zero *Limiter
	if ok, _ := zero.Allow("x"); !ok {
		t.Error("a nil limiter refuses")
	}
	if ok, _ := (&Limiter{}).Allow("x"); !ok {
		t.Error("the zero limiter refuses")
	}
}
