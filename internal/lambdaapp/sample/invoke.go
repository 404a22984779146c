package sample

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"time"

	"github.com/stepgraph/stepgraph/internal/dispatch/eventbridge"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
)

// RoleOf is the role of function name (lambdaapp.Functions).
func RoleOf(name string) (lambdaapp.Role, error) {
	for _, f := range lambdaapp.Functions {
		if f.Name != name {
			continue
		}
		switch f.Role {
		case "api":
			return lambdaapp.RoleAPI, nil
		case "run-worker":
			return lambdaapp.RoleRunWorker, nil
		case "deploy-worker":
			return lambdaapp.RoleDeployWorker, nil
		case "cron-fire":
			return lambdaapp.RoleCronFire, nil
		}
	}
	return 0, fmt.Errorf("no function %q (see functions/routes.json)", name)
}

// LambdaError is a handler's error as the Lambda runtime reports it.
type LambdaError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *LambdaError) Error() string { return e.Type + ": " + e.Message }

// Invoke runs function fn's handler once on event in this process, wired to
// the stack as a cold-started Lambda would be, with timeout as its
// deadline, and returns its answer as JSON — or, for a streamed response
// (a REST API event to a function whose routes stream), the bytes the
// runtime would post: the JSON prelude, eight NUL bytes and the body. A
// handler error is a *LambdaError.
func Invoke(ctx context.Context, s *Stack, fn string, event []byte, timeout time.Duration, log *slog.Logger) (json.RawMessage, error) {
	role, err := RoleOf(fn)
	if err != nil {
		return nil, err
	}
	a, err := s.OpenFunction(role, fn, log.With("function", fn))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out any
	switch role {
	case lambdaapp.RoleAPI:
		// As the function's main does: the event's gateway decides (an HTTP
		// API event is answered buffered, a REST API event streamed when
		// the function's routes stream).
		f, _ := lambdaapp.FunctionNamed(fn)
		out, err = lambdaapp.NewRouter(a.Handler, f.Stream).Invoke(ctx, event)
		if r, ok := out.(io.Reader); ok && err == nil {
			// A streamed answer: its bytes as the runtime posts them (the
			// prelude, eight NULs, the body), read to the end.
			b, rerr := io.ReadAll(r)
			if c, ok := r.(io.Closer); ok {
				c.Close()
			}
			if rerr != nil {
				return nil, &LambdaError{Type: "StreamError", Message: rerr.Error()}
			}
			return b, nil
		}
	case lambdaapp.RoleRunWorker:
		var task lambdaapp.RunTask
		if err := json.Unmarshal(event, &task); err != nil {
			return nil, fmt.Errorf("the event is not a run-worker task: %w", err)
		}
		out, err = a.HandleRunTask(ctx, task)
	case lambdaapp.RoleDeployWorker:
		var task lambdaapp.DeployTask
		if err := json.Unmarshal(event, &task); err != nil {
			return nil, fmt.Errorf("the event is not a deploy-worker task: %w", err)
		}
		out, err = a.HandleDeployTask(ctx, task)
	case lambdaapp.RoleCronFire:
		var ev eventbridge.Event
		if err := json.Unmarshal(event, &ev); err != nil {
			return nil, fmt.Errorf("the event is not a schedule's delivery: %w", err)
		}
		err = a.HandleCronEvent(ctx, ev) // answers nothing: null
	}
	if err != nil {
		t := reflect.TypeOf(err)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return nil, &LambdaError{Type: t.Name(), Message: err.Error()}
	}
	return json.Marshal(out)
}
