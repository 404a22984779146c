package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The stream-chat workload's graph: one chat_model node answering the
// conversation in `messages`, the model being loadgen's local endpoint
// (fakemodel.go). stepgraph serves it as a deployed graph document (its
// chat_model node kind, from a git repository on this machine); the peers
// serve the same graph with LangChain's ChatOpenAI pointed at the same
// endpoint (bench/peers/*/graphs.*: chat).

// chatGraphYAML is the graph document; MODEL_URL is the endpoint's base URL.
const chatGraphYAML = `description: One chat model call, for the streaming benchmark (bench/cmd/loadgen).
state:
  messages: {reducer: messages}
nodes:
  model:
    kind: chat_model
    base_url: MODEL_URL
    model: ` + modelName + `
    api_key_secret: OPENAI_API_KEY
edges:
  - {from: __start__, to: model}
  - {from: model, to: __end__}
`

// chatRepo writes the graph into a new git repository under dir/repos and
// returns the directory to allow (-allow-local-repos) and the repository's
// file:// URL.
func chatRepo(dir, modelURL string) (allow, url string, err error) {
	allow = filepath.Join(dir, "repos")
	repo := filepath.Join(allow, "chat")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return "", "", err
	}
	files := map[string]string{
		"stepgraph.yaml": "graphs:\n  chat: chat.yaml\n",
		"chat.yaml":      strings.ReplaceAll(chatGraphYAML, "MODEL_URL", modelURL),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			return "", "", err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=loadgen", "-c", "user.email=loadgen@localhost", "-c", "commit.gpgsign=false",
			"commit", "-q", "-m", "the streaming benchmark's chat graph"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
		}
	}
	return allow, "file://" + repo, nil
}

// deployChat deploys the chat graph on a stepgraph server (POST
// /v2/deployments from the repository) and waits until its revision is
// DEPLOYED; runs then name it by graph id, "chat".
func deployChat(ctx context.Context, c *client, repoURL string, timeout time.Duration) error {
	v, err := c.post(ctx, "/v2/deployments", map[string]any{
		"name":                   "bench-chat",
		"source":                 "hosted_repo",
		"source_config":          map[string]any{"repo_url": repoURL},
		"source_revision_config": map[string]any{"repo_ref": "main", "graph_config_path": "stepgraph.yaml"},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": modelAPIKey}},
	}, 201)
	if err != nil {
		return fmt.Errorf("deploy the chat graph: %w", err)
	}
	d, _ := v.(map[string]any)
	id, _ := d["id"].(string)
	rev, _ := d["latest_revision_id"].(string)
	if id == "" || rev == "" {
		return fmt.Errorf("deploy the chat graph: no id or latest_revision_id in %s", clipJSON(v))
	}
	deadline := time.Now().Add(timeout)
	for {
		got, err := c.get(ctx, "/v2/deployments/"+id+"/revisions/"+rev)
		if err != nil {
			return fmt.Errorf("deploy the chat graph: %w", err)
		}
		m, _ := got.(map[string]any)
		switch st, _ := m["status"].(string); {
		case st == "DEPLOYED":
			return nil
		case strings.HasSuffix(st, "FAILED") || st == "SKIPPED":
			return fmt.Errorf("deploy the chat graph: revision %s: %s", st, clipJSON(m))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deploy the chat graph: not deployed after %s: %s", timeout, clipJSON(m))
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}
