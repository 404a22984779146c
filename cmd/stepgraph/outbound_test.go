package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The guard of deployed graphs' outbound calls is on by default: a runtime
// on loopback is refused (and never called) unless the server runs with
// -outbound-allow-private.
func TestOutboundAllowPrivate(t *testing.T) {
	var hits atomic.Int64
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"graphs": {"hello": {"state": {"greeting": {}},
			"nodes": {"greet": {"kind": "transform", "update": {"greeting": "hi"}}},
			"edges": [{"from": "__start__", "to": "greet"}]}}}`))
	}))
	defer runtime.Close()
	body := fmt.Sprintf(`{"name": "rt", "source": "external_docker", "source_config": {"custom_url": %q},
		"source_revision_config": {"image_uri": "acme/agent:1"}}`, runtime.URL)

	for _, allow := range []bool{false, true} {
		dir := t.TempDir()
		var extra []string
		if allow {
			extra = append(extra, "-outbound-allow-private")
		}
		s := startServer(t, dir, extra...)
		key := createKey(t, dir, "default")
		code, out := s.call("POST", "/v2/deployments", key, body)
		if code != 201 {
			t.Fatalf("create: %d %s", code, out)
		}
		var d struct {
			ID               string `json:"id"`
			LatestRevisionID string `json:"latest_revision_id"`
		}
		_ = json.Unmarshal([]byte(out), &d)
		var rev struct {
			Status        string `json:"status"`
			StatusMessage string `json:"status_message"`
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, out := s.call("GET", "/v2/deployments/"+d.ID+"/revisions/"+d.LatestRevisionID, key, "")
			_ = json.Unmarshal([]byte(out), &rev)
			if rev.Status == "DEPLOYED" || strings.HasSuffix(rev.Status, "FAILED") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revision stuck: %s", out)
			}
		}
		if !allow {
			if rev.Status != "DEPLOY_FAILED" || !strings.Contains(rev.StatusMessage, "loopback") || hits.Load() != 0 {
				t.Errorf("by default: %s %q, %d runtime calls; want DEPLOY_FAILED naming the loopback address, none", rev.Status, rev.StatusMessage, hits.Load())
			}
			continue
		}
		if rev.Status != "DEPLOYED" {
			t.Fatalf("with -outbound-allow-private: %s %q", rev.Status, rev.StatusMessage)
		}
		if code, out := s.call("POST", "/runs/wait", key, `{"assistant_id": "hello", "input": {}}`); code != 200 || !strings.Contains(out, `"greeting":"hi"`) {
			t.Errorf("run: %d %s", code, out)
		}
	}
}
