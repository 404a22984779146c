package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The limits of F7 are flags; the tests set them small and then wait, with
// a generous deadline, for the state they promise (a closed connection, an
// answer). A server without the limit keeps the connection open, and the
// test fails at the deadline.

// patience bounds every wait here: far above the small limits the tests set,
// so a loaded machine cannot make them fail.
const patience = 60 * time.Second

func dialServer(t *testing.T, s *server) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.Addr(), patience)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// expectClosed waits until the server closes conn.
func expectClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(patience))
	b, err := br.ReadByte()
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("the server sent %q where the connection should have been closed", b)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the connection is still open after %v", patience)
	}
	// io.EOF or a reset: closed by the server.
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	s := startServer(t, t.TempDir(), "-idle-timeout", "200ms", "-read-header-timeout", "200ms")

	t.Run("keep-alive connection after an answer", func(t *testing.T) {
		conn, br := dialServer(t, s)
		fmt.Fprintf(conn, "GET /ok HTTP/1.1\r\nHost: stepgraph\r\n\r\n")
		conn.SetReadDeadline(time.Now().Add(patience))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || res.Close {
			t.Fatalf("GET /ok: %d, close %v; want 200 on a kept-alive connection", res.StatusCode, res.Close)
		}
		expectClosed(t, conn, br)
	})
	t.Run("connection that never sends a request", func(t *testing.T) {
		conn, br := dialServer(t, s)
		expectClosed(t, conn, br)
	})
}

// A body sent too slowly is cut: the server answers 400 naming the body,
// without its own address, and closes the connection.
func TestSlowBodyIsCut(t *testing.T) {
	s := startNew(t, t.TempDir(), "-read-body-timeout", "200ms")
	conn, br := dialServer(t, s)
	fmt.Fprintf(conn, "POST /threads HTTP/1.1\r\nHost: stepgraph\r\nX-Api-Key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1015\r\n\r\n{", s.FirstKey())
	conn.SetReadDeadline(time.Now().Add(patience))
	res, err := http.ReadResponse(br, nil)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still waits for the body after %v", patience)
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(body), "body: was not received in time") {
		t.Errorf("slow body: %d %s; want 400 naming the body", res.StatusCode, body)
	}
	if strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), "tcp") {
		t.Errorf("the answer names a network address: %s", body)
	}
	expectClosed(t, conn, br)
}

func TestOversizedHeadersGet431(t *testing.T) {
	s := startServer(t, t.TempDir(), "-max-header-bytes", "2048")
	for _, c := range []struct {
		size int
		want int
	}{{100, 200}, {64 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest("GET", s.URL()+"/ok", nil)
		req.Header.Set("X-Padding", strings.Repeat("p", c.size))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("a %d-byte header: %d, want %d", c.size, res.StatusCode, c.want)
		}
	}
}

// The body deadline ends with the body: a runs/wait whose run outlasts it
// many times over still gets its answer. The run's only node calls a server
// of the test that answers once the deadline is long past.
func TestLongWaitOutlivesTheBodyDeadline(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	called, release := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(called)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok": "late"}`))
	}))
	defer slow.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"graphs": {"slow": {"state": {"answer": {}},
			"nodes": {"call": {"kind": "http", "url": %q, "update": {"answer": "{{ response.body.ok }}"}}},
			"edges": [{"from": "__start__", "to": "call"}]}}}`, slow.URL+"/answer")
	}))
	defer runtime.Close()

	dir := t.TempDir()
	s := startServer(t, dir, "-outbound-allow-private", "-read-body-timeout", bodyTimeout.String())
	key := createKey(t, dir, "default")
	deployRuntime(t, s, key, runtime.URL)

	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.URL()+"/runs/wait", strings.NewReader(`{"assistant_id": "slow", "input": {}}`))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		done <- result{res.StatusCode, string(b)}
	}()
	select {
	case <-called:
	case r := <-done:
		t.Fatalf("the wait ended before the node ran: %d %s", r.code, r.body)
	case <-time.After(patience):
		t.Fatal("the run's node was never called")
	}
	// The body deadline was set before the run began; this passes it several
	// times over (a wait, not a measurement: a slower machine only makes it
	// more certain).
	time.Sleep(5 * bodyTimeout)
	close(release)
	select {
	case r := <-done:
		if r.code != 200 || !strings.Contains(r.body, `"answer":"late"`) {
			t.Errorf("runs/wait after the body deadline: %d %s; want 200 with the node's answer", r.code, r.body)
		}
	case <-time.After(patience):
		t.Fatal("runs/wait did not answer")
	}
}

// deployRuntime deploys the runtime at url (external_docker with a
// custom_url) and waits until its revision is DEPLOYED.
func deployRuntime(t *testing.T, s *server, key, url string) {
	t.Helper()
	code, out := s.call("POST", "/v2/deployments", key, fmt.Sprintf(`{"name": "rt", "source": "external_docker",
		"source_config": {"custom_url": %q}, "source_revision_config": {"image_uri": "acme/agent:1"}}`, url))
	if code != 201 {
		t.Fatalf("create deployment: %d %s", code, out)
	}
	var d struct {
		ID               string `json:"id"`
		LatestRevisionID string `json:"latest_revision_id"`
	}
	_ = json.Unmarshal([]byte(out), &d)
	for deadline := time.Now().Add(patience); ; time.Sleep(50 * time.Millisecond) {
		_, out := s.call("GET", "/v2/deployments/"+d.ID+"/revisions/"+d.LatestRevisionID, key, "")
		var rev struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal([]byte(out), &rev)
		switch {
		case rev.Status == "DEPLOYED":
			return
		case strings.HasSuffix(rev.Status, "FAILED") || time.Now().After(deadline):
			t.Fatalf("revision not deployed: %s", out)
		}
	}
}

func TestHTTPLimitFlagsRules(t *testing.T) {
	for _, env := range []string{"STEPGRAPH_READ_HEADER_TIMEOUT", "STEPGRAPH_READ_BODY_TIMEOUT", "STEPGRAPH_IDLE_TIMEOUT", "STEPGRAPH_MAX_HEADER_BYTES"} {
		t.Setenv(env, "") // unset: the defaults
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-idle-timeout", "0s"}, "-idle-timeout: must be a positive duration"},
		{[]string{"-read-body-timeout", "-1s"}, "-read-body-timeout: must be a positive duration"},
		{[]string{"-read-header-timeout", "0s"}, "-read-header-timeout: must be a positive duration"},
		{[]string{"-max-header-bytes", "10"}, "-max-header-bytes: must be at least 1024"},
	}
	for _, c := range cases {
		if _, err := parseServeFlags(c.args); err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	cfg, err := parseServeFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := httpLimits{ReadHeaderTimeout: 10 * time.Second, ReadBodyTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	if cfg.HTTP != want {
		t.Errorf("defaults %+v, want %+v", cfg.HTTP, want)
	}
}
