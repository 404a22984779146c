package pyapp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
)

// envCommand is one run of the runtime's env module (python -m
// stepgraph_runtime.env): it reads an app's dependencies and installs them,
// and answers one line of JSON, its result or {"error": {...}}.
type envCommand struct {
	Python string
	Args   []string // after -m stepgraph_runtime.env
	Dir    string   // the working directory ("" = this process's)
	Env    []string // the process's environment, PYTHONPATH naming the runtime
}

// EnvRefusal is the env module refusing an app: Type is its error's type
// ("DependencyError": pip could not install a dependency; otherwise
// langgraph.json itself, the message naming the key), Message says why.
type EnvRefusal struct {
	Type, Message string
}

func (e *EnvRefusal) Error() string { return e.Message }

// run runs the module and decodes its answer into answer. The module's
// refusal is an *EnvRefusal; ctx's error when it ended first; any other
// error (no answer: the interpreter or the module failed) names the
// command with the tail of its standard error.
func (c envCommand) run(ctx context.Context, answer any) error {
	cmd := exec.CommandContext(ctx, c.Python, append([]string{"-m", "stepgraph_runtime.env"}, c.Args...)...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	var refused struct {
		Error *EnvRefusal `json:"error"`
	}
	if jerr := json.Unmarshal(line, &refused); jerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s -m stepgraph_runtime.env: %v: %s", c.Python, err, tail(stderr.String(), 2000))
	}
	if refused.Error != nil {
		return refused.Error
	}
	return json.Unmarshal(line, answer)
}

// UnmarshalJSON reads the module's {"error": type, "message": ...}.
func (e *EnvRefusal) UnmarshalJSON(b []byte) error {
	var wire struct {
		Type    string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		return err
	}
	e.Type, e.Message = wire.Type, wire.Message
	return nil
}
