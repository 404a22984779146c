package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// internalDetail matches what Go's network errors say and a tenant must not
// read (security review F17): the server's resolver ("lookup x on
// 10.255.255.53:53"), a DNS server's address, the server's own end of a
// connection ("dial tcp", "read tcp 10.0.3.7:41234->…").
var internalDetail = regexp.MustCompile(`lookup \S+ on |:53\b|\b(dial|read|write) (tcp|udp)`)

// resolvers are the name servers of this machine, which no message may name.
func resolvers(t *testing.T) []string {
	b, _ := os.ReadFile("/etc/resolv.conf")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}

func checkNoInternalDetail(t *testing.T, what, msg string) {
	t.Helper()
	if m := internalDetail.FindString(msg); m != "" {
		t.Errorf("%s names internal detail %q: %s", what, m, msg)
	}
	for _, ns := range resolvers(t) {
		if strings.Contains(msg, ns) {
			t.Errorf("%s names the resolver %s: %s", what, ns, msg)
		}
	}
}

// A run's error and a revision's status_message say which host could not be
// resolved or refused the connection, in generic words; the network error
// with the server's resolver and addresses goes to the log only.
func TestOutboundFailuresNameNoInternalDetail(t *testing.T) {
	e := newEnv(t)
	closed := closedPort(t)
	node := func(url string) string {
		return fmt.Sprintf(`{"state": {"x": {}}, "nodes": {"call": {"kind": "http", "url": %q}},
			"edges": [{"from": "__start__", "to": "call"}]}`, url)
	}
	graphs := fmt.Sprintf(`{"graphs": {"unresolvable": %s, "closed": %s}}`,
		node("https://nx.example.invalid/x"), node("http://"+closed+"/x"))
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(graphs))
	}))
	defer runtime.Close()
	body := imageDeployment("failing-calls")
	body["source_config"] = map[string]any{"custom_url": runtime.URL}
	e.deployReady(body)

	runs := []struct{ assistant, want string }{
		{"unresolvable", "nx.example.invalid"},
		{"closed", "connection refused by " + closed},
	}
	for _, c := range runs {
		out := waitBody(t, e.do("POST", "/runs/wait", e.keyA, map[string]any{"assistant_id": c.assistant, "input": map[string]any{}}))
		got, _ := out["__error__"].(map[string]any)
		msg := fmt.Sprint(got["message"])
		if got == nil || !strings.Contains(msg, c.want) {
			t.Errorf("%s: __error__ %v, want a message naming %q", c.assistant, out, c.want)
		}
		checkNoInternalDetail(t, c.assistant+" run error", msg)
	}

	describe := []struct{ name, url, want string }{
		{"describe-unresolvable", "https://nx.example.invalid:8443/", "nx.example.invalid"},
		{"describe-closed", "http://" + closed + "/", "connection refused by " + closed},
	}
	for _, c := range describe {
		d := imageDeployment(c.name)
		d["source_config"] = map[string]any{"custom_url": c.url}
		created := e.must(201, "POST", "/v2/deployments", e.keyA, d)
		rev := e.waitFor(e.keyA, fmt.Sprintf("/v2/deployments/%s/revisions/%s", created["id"], created["latest_revision_id"]), status("DEPLOY_FAILED"))
		msg, _ := rev["status_message"].(string)
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: status_message %q, want it to name %q", c.name, msg, c.want)
		}
		checkNoInternalDetail(t, c.name+" status_message", msg)
	}

	// The operator's log has what the tenant was spared.
	exposure.Lock()
	logged := exposure.said.String()
	exposure.Unlock()
	if !strings.Contains(logged, `"msg":"outbound call failed"`) || !strings.Contains(logged, "nx.example.invalid") {
		t.Errorf("the failed outbound calls are not in the log")
	}
}
