package sample

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stepgraph/stepgraph/internal/ministack"
)

// Emulator is a MiniStack process started by StartMiniStack.
type Emulator = ministack.Process

// StartMiniStack starts the MiniStack of root/.venv-ministack (installed by
// scripts/install-ministack.sh) on a free 127.0.0.1 port, with Step
// Functions Wait states that really wait, and waits until it is healthy.
// Stop it with Stop.
func StartMiniStack(root string) (*Emulator, error) {
	return ministack.Start(root, ministack.Options{RealWaits: true})
}

// EmulatorConfig addresses every client at the emulator at url (region
// us-east-1, static test credentials: it enforces no IAM).
func EmulatorConfig(url string) aws.Config { return ministack.ConfigFor(url) }

// ModuleRoot finds the directory holding go.mod, from the working directory
// upwards.
func ModuleRoot() (string, error) { return ministack.ModuleRoot() }
