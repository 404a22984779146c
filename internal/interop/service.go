package interop

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// Runs is what the protocols use of runs.Service: assistants to expose and
// runs to start and follow. Every call is scoped to the caller's
// organization, so another organization's assistant, thread or run is not
// found.
type Runs interface {
	SearchAssistants(ctx context.Context, orgID string, in runs.AssistantSearch) ([]runs.Assistant, error)
	GetAssistant(ctx context.Context, orgID, id string) (runs.Assistant, error)
	AssistantSchemas(ctx context.Context, orgID, id string) (runs.GraphSchemas, error)
	CreateRun(ctx context.Context, orgID, threadID string, req runs.RunRequest) (runs.Run, error)
	// CreateRunStream is CreateRun with the run's stream (A2A
	// message/stream follows its chat model's tokens).
	CreateRunStream(ctx context.Context, orgID, threadID string, req runs.RunRequest) (runs.Run, *runs.RunStream, error)
	Wait(ctx context.Context, orgID, threadID, runID string) (json.RawMessage, error)
	GetRun(ctx context.Context, orgID, threadID, runID string) (runs.Run, error)
	CancelRun(ctx context.Context, orgID, threadID, runID, action string) (runs.Run, error)
	GetThread(ctx context.Context, orgID, id string) (runs.Thread, error)
}

// Service serves MCP and A2A for every organization.
type Service struct {
	runs    Runs
	version string
	log     *slog.Logger
}

// New returns the service. version is the server's, reported as MCP
// serverInfo.version and as the agent cards' version.
func New(r Runs, version string, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	if version == "" {
		version = "dev"
	}
	return &Service{runs: r, version: version, log: log}
}
