package fail

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// A storage failure shows the caller a safe message and keeps its cause
// for logs and errors.Is, also when wrapped by the layers above.
func TestUnavailable(t *testing.T) {
	cause := fmt.Errorf("write /data/secrets.json.tmp-1: %w", syscall.ENOSPC)
	err := fmt.Errorf("store client secret: %w", Unavailable("no space left on device", cause))
	if KindOf(err) != KindUnavailable {
		t.Errorf("KindOf = %v, want KindUnavailable", KindOf(err))
	}
	if got := MessageOf(err); got != "storage unavailable: no space left on device" {
		t.Errorf("MessageOf = %q", got)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Error("the cause is lost")
	}
	if want := "store client secret: storage unavailable: no space left on device: write /data/secrets.json.tmp-1: no space left on device"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if MessageOf(errors.New("plain")) != "" || NotFound("x").Error() != "x" {
		t.Error("errors without a cause changed")
	}
}
