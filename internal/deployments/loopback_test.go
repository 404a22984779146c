package deployments_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/deployments"
	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/secrets/local"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
)

// A plain-http custom_url on loopback is a developer's runtime: accepted by
// the local server (AllowHTTPLoopback), refused where the service is shared.
func TestCustomURLLoopback(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "stepgraph.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sec, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var in deployments.CreateInput
	if err := json.Unmarshal([]byte(`{"name": "d", "source": "external_docker",
		"source_config": {"custom_url": "http://127.0.0.1:9999"},
		"source_revision_config": {"image_uri": "example/agent:1"}}`), &in); err != nil {
		t.Fatal(err)
	}
	shared := &deployments.Service{Store: db, Secrets: sec}
	_, err = shared.Create(context.Background(), "org", in)
	if fail.KindOf(err) != fail.KindInvalid || !strings.Contains(err.Error(), "source_config.custom_url") {
		t.Fatalf("loopback http custom_url without AllowHTTPLoopback: %v, want a 422 naming source_config.custom_url", err)
	}
	dev := &deployments.Service{Store: db, Secrets: sec, AllowHTTPLoopback: true}
	if _, err := dev.Create(context.Background(), "org", in); err != nil {
		t.Fatalf("loopback http custom_url with AllowHTTPLoopback: %v", err)
	}
}
