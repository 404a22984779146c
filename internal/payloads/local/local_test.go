package local

import (
	"testing"

	"github.com/stepgraph/stepgraph/internal/payloads"
	"github.com/stepgraph/stepgraph/internal/payloads/payloadstest"
)

func TestContractMemory(t *testing.T) {
	st := NewMemory()
	payloadstest.Run(t, func(t *testing.T) payloads.Store { return st })
}

func TestContractFiles(t *testing.T) {
	st, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	payloadstest.Run(t, func(t *testing.T) payloads.Store { return st })
}
