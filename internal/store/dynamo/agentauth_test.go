package dynamo

import (
	"testing"

	"github.com/stepgraph/stepgraph/internal/store/storetest"
)

func TestAgentAuthContract(t *testing.T) {
	storetest.AgentAuthContract(t, func(t *testing.T) storetest.AgentAuthStore { return openShared(t) })
}
