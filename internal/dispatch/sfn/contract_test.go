package sfn_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/stepgraph/stepgraph/internal/awsflow"
	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/deployments/provisiontest"
	"github.com/stepgraph/stepgraph/internal/dispatch/sfn"
	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/runs/dispatchtest"
	secretslocal "github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/webhooks"
)

// The contract tests run the state machines of internal/awsflow on the
// emulator. Their Lambda tasks invoke a worker function that hands the task
// to the worker's handler (lambdaapp) in this process (awstest.LambdaProxy),
// on a store the test shares with the service under test: what runs is the
// real state machine, real Invoke calls and the real handler, without
// building the worker binaries (functions/ tests those on the stack).

// workerTimeout is the proxy workers' Lambda timeout, in seconds.
const workerTimeout = 60

// stores are a SQLite store and local secrets in a temporary directory.
type stores struct {
	db  *sqlite.DB
	sec *secretslocal.Store
}

func openStores(t *testing.T) stores {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sec, err := secretslocal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return stores{db: db, sec: sec}
}

// worker answers the proxy function's events with handle's result, as the
// Lambda runtime would: JSON, or a function error carrying the message.
func worker[T, R any](handle func(context.Context, T) (R, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task T
		if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
			http.Error(w, "the event is not the task: "+err.Error(), http.StatusBadRequest)
			return
		}
		res, err := handle(r.Context(), task)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
}

// stateMachine creates a Standard state machine on the emulator. At the
// end of the test it waits for the machine's executions to end (before the
// worker and its store go away), and fails the test if one does not.
func stateMachine(t *testing.T, c *awssfn.Client, name, def string) string {
	t.Helper()
	return stateMachineOf(t, c, types.StateMachineTypeStandard, name, def)
}

// stateMachineOf is stateMachine of a given type (the emulator runs Express
// machines too, and lists and describes their executions, which AWS
// does not).
func stateMachineOf(t *testing.T, c *awssfn.Client, typ types.StateMachineType, name, def string) string {
	t.Helper()
	arn := awstest.StateMachine(t, c, &awssfn.CreateStateMachineInput{
		Name: aws.String(awstest.Prefix(t) + name), Definition: aws.String(def),
		RoleArn: aws.String("arn:aws:iam::000000000000:role/test"), Type: typ,
	})
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			list, err := c.ListExecutions(context.Background(), &awssfn.ListExecutionsInput{
				StateMachineArn: aws.String(arn), StatusFilter: types.ExecutionStatusRunning})
			if err == nil && len(list.Executions) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("executions of %s still running at the end of the test: %v (%v)", name, list, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return arn
}

// The Step Functions Provisioner honours the provisioner contract: each
// piece of work is an execution of the provisioning state machine, whose
// task invokes the deploy worker (lambdaapp.HandleDeployTask) on the
// service's store.
func TestProvisionerContract(t *testing.T) {
	ep := awstest.Start(t)
	client := awssfn.NewFromConfig(ep.Config)
	log := slog.New(slog.DiscardHandler)
	provisiontest.Run(t, func(t *testing.T) *deployments.Service {
		l := openStores(t)
		deployWorker := &lambdaapp.App{Log: log, Deployments: &deployments.Service{Store: l.db, Secrets: l.sec}}
		fn := awstest.LambdaProxy(t, ep, "deploy-worker", workerTimeout, worker(deployWorker.HandleDeployTask))
		def, err := awsflow.ProvisionDefinition(fn)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sfn.NewProvisioner(client, stateMachine(t, client, "provision", def), log)
		if err != nil {
			t.Fatal(err)
		}
		return &deployments.Service{Store: l.db, Secrets: l.sec, Provisioner: p}
	})
}

// With the Express front, the Dispatcher honours the dispatcher contract
// too: runs that can start now start on the Express machine, which hands
// what it does not finish in one step to the Standard one.
func TestDispatcherContractWithExpress(t *testing.T) {
	ep := awstest.Start(t)
	client := awssfn.NewFromConfig(ep.Config)
	dispatchtest.Run(t, func(t *testing.T) *runs.Service {
		return newExpressRig(t, ep, client, graph.NewRegistry(), nil).svc
	})
}

// The Step Functions Dispatcher honours the dispatcher contract: each run
// is an execution of the run state machine, whose steps invoke the run
// worker (lambdaapp.HandleRunTask) on the service's store. (The emulator's
// Wait states do not wait: a run waiting for its turn or its time is
// stepped again at once.)
func TestDispatcherContract(t *testing.T) {
	ep := awstest.Start(t)
	client := awssfn.NewFromConfig(ep.Config)
	log := slog.New(slog.DiscardHandler)
	dispatchtest.Run(t, func(t *testing.T) *runs.Service {
		l := openStores(t)
		runWorker := &lambdaapp.App{Log: log, Webhooks: &webhooks.Sender{Log: log},
			Runs: &runs.Service{Store: l.db, Graphs: graph.NewRegistry(),
				LeaseDuration: lambdaapp.LeaseDuration, PollInterval: lambdaapp.WorkerPollInterval}}
		fn := awstest.LambdaProxy(t, ep, "run-worker", workerTimeout, worker(runWorker.HandleRunTask))
		def, err := awsflow.RunDefinition(fn)
		if err != nil {
			t.Fatal(err)
		}
		d, err := sfn.NewDispatcher(client, stateMachine(t, client, "run", def))
		if err != nil {
			t.Fatal(err)
		}
		return &runs.Service{Store: l.db, Graphs: graph.NewRegistry(), Dispatcher: d, PollInterval: 20 * time.Millisecond}
	})
}
