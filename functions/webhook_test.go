package functions_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// A Lambda is frozen once it answered: the run-worker delivers the webhook
// of a run it finished before it answers the step.
func TestRunWorkerDeliversWebhooksBeforeAnswering(t *testing.T) {
	s := sharedStack(t)
	a, err := s.Open(lambdaapp.RoleRunWorker, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	var delivered atomic.Int32
	var payload atomic.Value
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(300 * time.Millisecond) // a slow receiver
		payload.Store(string(b))
		delivered.Add(1)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx := context.Background()
	org, _, err := a.Keys.EnsureOrganization(ctx, "webhook-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	var req runs.RunRequest
	body := `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hook"}]},"webhook":"http://` + ln.Addr().String() + `/hook"}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	run, err := a.Runs.CreateRun(ctx, org.ID, "", req)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.HandleRunTask(sctx, lambdaapp.RunTask{Action: lambdaapp.ActionStep, RunID: run.RunID})
	if err != nil || res.Status != runs.StepDone {
		t.Fatalf("step: %+v, %v", res, err)
	}
	if n := delivered.Load(); n != 1 {
		t.Fatalf("%d webhooks delivered when the worker answered, want 1", n)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(payload.Load().(string)), &got); err != nil || got["run_id"] != run.RunID || got["status"] != "success" {
		t.Fatalf("webhook payload %v (%v)", got, err)
	}
}
