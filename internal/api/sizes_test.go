package api_test

import (
	"strings"
	"testing"
)

// A 5 MB result comes back whole from runs/wait, on a thread (whose state
// then reads back) and stateless (docs/aws.md, "Sizes"; the store's part
// is storetest's Sizes cases, the AWS shape's functions' TestEndToEnd).
func TestFiveMegabyteResults(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("0123456789abcdef", 2_600_000/16) // the result holds it twice: 5.2 MB
	input := map[string]any{"messages": []any{map[string]any{"role": "user", "content": big}}}
	want := `{"messages":[{"content":"` + big + `","role":"user"},{"content":"echo: ` + big + `","role":"assistant"}]}`

	r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": input})
	if got := strings.TrimSpace(string(r.Body)); r.Status != 200 || got != want {
		t.Fatalf("stateless: %d, %d bytes, want 200 and %d bytes", r.Status, len(got), len(want))
	}

	tid := e.newThread(e.keyA)
	r = e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": input})
	if got := strings.TrimSpace(string(r.Body)); r.Status != 200 || got != want {
		t.Fatalf("on a thread: %d, %d bytes, want 200 and %d bytes", r.Status, len(got), len(want))
	}
	state := e.do("GET", "/threads/"+tid+"/state", e.keyA, nil)
	if state.Status != 200 || !strings.Contains(string(state.Body), `"echo: `+big+`"`) {
		t.Fatalf("state: %d, %d bytes: the values are not whole", state.Status, len(state.Body))
	}
}
