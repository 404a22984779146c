package dynamo

import (
	"fmt"

	"github.com/stepgraph/stepgraph/internal/store"
)

// parseFilter reads a metadata or values filter (store.JSONFilter).
func parseFilter(what string, raw []byte) (store.JSONFilter, error) {
	f, err := store.ParseJSONFilter(what, raw)
	if err != nil {
		return nil, fmt.Errorf("dynamo: %w", err)
	}
	return f, nil
}
