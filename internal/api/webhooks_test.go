package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/api"
	"github.com/stepgraph/stepgraph/internal/webhooks"
)

// webhooksGuarded makes the server refuse webhooks to private and
// special-purpose addresses, as `stepgraph serve` does without
// -webhooks-allow-private (the harness allows them so tests can receive
// webhooks on 127.0.0.1). The sender builds its client on first use, so
// changing it before the server starts is a real setting, not a patch.
func webhooksGuarded() envOption {
	return func(c *api.Config) { c.Runs.Webhooks.(*webhooks.Sender).AllowPrivate = false }
}

// F11: addresses that reach loopback through an IPv6 form the guard did not
// know (NAT64, IPv4-compatible, 6to4) and the special-purpose IPv4 ranges
// are refused when the run is created, with a 422 naming the field; the
// receiver on 127.0.0.1 is never called.
func TestWebhookSpecialPurposeAddressesRefused(t *testing.T) {
	e := newEnv(t, webhooksGuarded())
	var hits atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer recv.Close()
	port := recv.URL[strings.LastIndex(recv.URL, ":")+1:]
	for _, host := range []string{
		"[64:ff9b::7f00:1]",   // NAT64 of 127.0.0.1
		"[::127.0.0.1]",       // IPv4-compatible 127.0.0.1
		"[64:ff9b:1::7f00:1]", // local-use NAT64
		"[2002:7f00:1::1]",    // 6to4 of 127.0.0.1
		"[::ffff:127.0.0.1]",  // IPv4-mapped
		"[2001::1]",           // Teredo
		"[fd00:ec2::254]",     // EC2 metadata (ULA)
		"127.0.0.1", "0.1.2.3", "192.0.0.9", "192.0.2.1", "198.18.0.1", "198.51.100.1", "203.0.113.1",
		"240.0.0.1", "255.255.255.255", "224.0.0.1", "[2001:db8::1]", "[2001:2::1]",
	} {
		hook := fmt.Sprintf("http://%s:%s/ok", host, port)
		r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "webhook": hook})
		if r.Status != 422 || !strings.HasPrefix(r.detail(t), "webhook: must not point at a private, loopback") {
			t.Errorf("webhook %s: %d %s, want 422 naming webhook", hook, r.Status, r.Body)
		}
	}
	// A public address passes the check (the run is not asked to deliver:
	// no test reaches beyond loopback).
	if err := (&webhooks.Sender{}).Check("https://[2606:2800:220:1:248:1893:25c8:1946]/hook"); err != nil {
		t.Errorf("public IPv6 webhook refused: %v", err)
	}
	if hits.Load() != 0 {
		t.Errorf("the receiver on 127.0.0.1 was called %d times", hits.Load())
	}
}

// F12: a webhook that cannot be delivered is logged with its host only; the
// capability in its path and query stays out of the server's log.
func TestUndeliveredWebhookLogsHostOnly(t *testing.T) {
	e := newEnv(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // connection refused on every attempt
	hook := closed.URL + "/services/T000/B000/WEBHOOKPATHSECRET?token=WEBHOOKQUERYSECRET"
	r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "echo", "input": map[string]any{}, "webhook": hook})
	waitBody(t, r)
	runID := path.Base(r.Header.Get("Content-Location"))
	host := strings.TrimPrefix(closed.URL, "http://")
	var line string
	for deadline := time.Now().Add(20 * time.Second); line == ""; time.Sleep(20 * time.Millisecond) {
		line = logLine(`"webhook not delivered"`, host)
		if line == "" && time.Now().After(deadline) {
			t.Fatalf("no log line for the undelivered webhook of run %s", runID)
		}
	}
	if !strings.Contains(line, `"host":"`+host+`"`) || !strings.Contains(line, `"run_id":"`+runID+`"`) || !strings.Contains(line, "connection refused") {
		t.Errorf("the log line does not name the host, the run and the reason: %s", line)
	}
	for _, s := range []string{"WEBHOOKPATHSECRET", "WEBHOOKQUERYSECRET", "/services/"} {
		if strings.Contains(line, s) {
			t.Errorf("the log line carries %q: %s", s, line)
		}
	}
}

// logLine returns the first line the suite's servers said that holds every
// fragment ("" when none does yet).
func logLine(fragments ...string) string {
	exposure.Lock()
	defer exposure.Unlock()
next:
	for _, l := range strings.Split(exposure.said.String(), "\n") {
		for _, f := range fragments {
			if !strings.Contains(l, f) {
				continue next
			}
		}
		return l
	}
	return ""
}

// F10: a model endpoint that reflects the Authorization header — a 200
// text/plain answer (the "not a chat completion" path), an error status, or
// a completion whose content echoes it — never gets the deployment's API key
// into a response, a log line or the database. The key is registered with
// secret(), so the suite-wide scan also checks every answer, log line and
// file of the data directory; the thread run below stores its error and
// state, so the scan covers stored records too.
func TestReflectedModelKeyRedacted(t *testing.T) {
	e := newEnv(t)
	apiKey := secret("sk-PRIV-SECRET-31337-reflected")
	mode := atomic.Value{}
	mode.Store("plain")
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := "you sent " + r.Header.Get("Authorization")
		switch mode.Load() {
		case "plain":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(echo))
		case "status":
			http.Error(w, echo, http.StatusBadGateway)
		case "completion":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": echo}}}})
		}
	}))
	defer model.Close()
	repo := gitRepo(t, map[string]string{
		"stepgraph.yaml": "graphs:\n  reflect: reflect.yaml\n",
		"reflect.yaml": `state: {messages: {reducer: messages}}
nodes: {m: {kind: chat_model, base_url: "` + model.URL + `/v1", model: m, api_key_secret: OPENAI_API_KEY}}
edges: [{from: __start__, to: m}]
`})
	body := repoDeployment("reflect", repo)
	body["source_revision_config"] = map[string]any{"repo_ref": "main", "graph_config_path": "stepgraph.yaml"}
	body["secrets"] = []any{map[string]any{"name": "OPENAI_API_KEY", "value": apiKey}}
	id, rev := e.deployReady(body)
	e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", id, rev), status("DEPLOYED"))
	input := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}

	for _, c := range []struct {
		mode, says string
	}{
		{"plain", "the model endpoint's answer is not a chat completion"},
		{"status", "the model endpoint answered 502"},
		{"completion", ""},
	} {
		mode.Store(c.mode)
		tid := e.newThread(e.keyA)
		out := waitBody(t, e.do("POST", "/threads/"+tid+"/runs/wait", e.keyA, map[string]any{"assistant_id": "reflect", "input": input}))
		raw, _ := json.Marshal(out)
		if c.says != "" && (!strings.Contains(string(raw), c.says) || !strings.Contains(string(raw), "you sent Bearer [redacted]")) {
			t.Errorf("%s: the run's answer %s does not say %q and Bearer [redacted]", c.mode, raw, c.says)
		}
		if c.says == "" && !strings.Contains(string(raw), `"content":"you sent Bearer [redacted]"`) {
			t.Errorf("%s: the model's message %s does not read Bearer [redacted]", c.mode, raw)
		}
		// Read back what was stored: the thread, its state and its runs.
		for _, p := range []string{"/threads/" + tid, "/threads/" + tid + "/state", "/threads/" + tid + "/runs"} {
			if r := e.do("GET", p, e.keyA, nil); strings.Contains(string(r.Body), apiKey) {
				t.Errorf("%s: GET %s carries the key", c.mode, p)
			}
		}
		if strings.Contains(string(raw), apiKey) {
			t.Errorf("%s: the run's answer carries the key: %s", c.mode, raw)
		}
	}
	// A stateless run keeps its result in a temporary record until read.
	mode.Store("plain")
	if r := e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": "reflect", "input": input}); strings.Contains(string(r.Body), apiKey) {
		t.Errorf("stateless run: the answer carries the key")
	}
}
