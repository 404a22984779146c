// Command runworker is functions/run-worker with a meter: the same wiring
// (lambdaapp.FromEnv, LoadAWS, Open) and the same handler
// (App.HandleRunTask), plus bench/cmd/awscost/internal/meter on its AWS
// configuration, timing of each invocation and a count of the bytes it
// logs. Its records go to the file named by STEPGRAPH_AWSCOST_RECORDS.
// bench/cmd/awscost deploys it on the emulator as the stack's run-worker;
// it is not part of a real deployment.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/stepgraph/stepgraph/bench/cmd/awscost/internal/chatgraph"
	"github.com/stepgraph/stepgraph/bench/cmd/awscost/internal/meter"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
)

const fn = "run-worker"

func main() {
	start := time.Now()
	ctx := context.Background()
	path := os.Getenv(meter.EnvRecords)
	if path == "" {
		fail(fmt.Errorf("%s is not set", meter.EnvRecords))
	}
	lines, err := meter.OpenLines(path)
	if err != nil {
		fail(err)
	}
	cfg, err := lambdaapp.FromEnv(lambdaapp.RoleRunWorker, os.LookupEnv)
	if err != nil {
		fail(err)
	}
	awsCfg, err := lambdaapp.LoadAWS(ctx)
	if err != nil {
		fail(err)
	}
	rec := meter.New(fn, awsCfg, cfg.TablePrefix, func(c meter.Call) { lines.Write(c) })
	rec.Attach(&awsCfg)
	logs := &meter.CountingWriter{W: os.Stdout}
	a, err := lambdaapp.Open(cfg, awsCfg, lambdaapp.NewLogger(logs, cfg.LogLevel).With("function", fn))
	if err != nil {
		fail(err)
	}
	// The chat workloads' three-node graph, as the API of the measurement
	// registers it.
	if err := a.Runs.Graphs.Register(chatgraph.New()); err != nil {
		fail(err)
	}
	rec.SetPhase(meter.PhaseInvoke)
	initDone := time.Since(start)
	var first sync.Once
	served := map[string]bool{}
	lambda.Start(func(ctx context.Context, task lambdaapp.RunTask) (lambdaapp.RunTaskResult, error) {
		var reqID string
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			reqID = lc.AwsRequestID
		}
		replay := reqID != "" && served[reqID]
		served[reqID] = true
		if replay {
			rec.SetPhase(meter.PhaseReplay)
		} else {
			rec.SetPhase(meter.PhaseInvoke)
		}
		t0, o0, l0 := time.Now(), rec.Overhead(), logs.N()
		res, err := a.HandleRunTask(ctx, task)
		wall, overhead := time.Since(t0), rec.Overhead()-o0
		inv := meter.Invocation{EndUnixMicros: time.Now().UnixMicro(), RequestID: reqID, Replay: replay, Kind: "invocation", Fn: fn, Action: task.Action, RunID: task.RunID, Status: res.Status,
			WallMicros: wall.Microseconds(), OverheadMicros: overhead.Microseconds(),
			Micros: max(0, (wall - overhead).Microseconds()), LogBytes: logs.N() - l0}
		first.Do(func() { inv.InitMicros = initDone.Microseconds() })
		if err != nil {
			inv.Err = err.Error()
		}
		lines.Write(inv)
		return res, err
	})
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "%s (metered): %v\n", fn, err)
	os.Exit(1)
}
