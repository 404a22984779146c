package graphdoc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

const userAgent = "stepgraph"

// kindConnection is the error kind of a call that could not connect.
const kindConnection = "ConnectionError"

// fetchError is an outbound call that got no usable answer. kind is the
// error kind a node reports (TimeoutError, ConnectionError, ValueError).
// Its message is for the tenant; the network error it wraps, which may name
// the server's resolver and addresses, is not part of it (see classify).
type fetchError struct {
	kind  string
	dial  bool // the connection failed, so the request was never sent
	err   error
	cause error // the network error, when err is its tenant-facing summary
}

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	return e.err
}

// fetch sends req and reads at most limit bytes of the answer. Every
// outbound call of the package goes through it, and so through the client
// the platform injected (with its dial-time SSRF guard).
func fetch(client *http.Client, req *http.Request, limit int64) (*http.Response, []byte, error) {
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, classify(req, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, nil, classify(req, err)
	}
	if int64(len(data)) > limit {
		return nil, nil, &fetchError{kind: graph.KindValue,
			err: fmt.Errorf("%s %s: the answer is larger than %d bytes", req.Method, req.URL.Redacted(), limit)}
	}
	return res, data, nil
}

func classify(req *http.Request, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return &fetchError{kind: graph.KindTimeout,
			err: fmt.Errorf("%s %s: no answer in the time allowed", req.Method, req.URL.Redacted())}
	case errors.Is(err, context.Canceled):
		return err
	}
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	// Go's text would show the tenant the server's resolver, the address a
	// name resolved to or the server's own address: the tenant reads a
	// summary naming only their URL's host; the whole error is in the
	// operator's log (weburl.LogFailures on the outbound client).
	return &fetchError{kind: kindConnection, dial: dial, cause: err,
		err: fmt.Errorf("%s %s: %s", req.Method, req.URL.Redacted(), weburl.CallFailure(req.URL, err))}
}

// Excerpt is the start of a body, for an error message (runtime transports
// and outbound calls).
func Excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty)"
	}
	return Truncate(s, 200)
}

// Truncate cuts s to at most max bytes of valid UTF-8, marking the cut.
func Truncate(s string, max int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// nodeError makes the error a node reports: its kind, and a message that
// starts by naming the node.
func nodeError(node, kind, format string, args ...any) *graph.Error {
	return graph.Errorf(kind, "node %q: %s", node, fmt.Sprintf(format, args...))
}

// callFailed reports a failed outbound call of node.
func callFailed(node string, err error) error {
	var fe *fetchError
	if errors.As(err, &fe) {
		return nodeError(node, fe.kind, "%v", fe.err)
	}
	return err // the run's context ended: the engine reports it
}

// seconds converts a document's timeout (0: unset) to a duration.
func seconds(s, def float64) time.Duration {
	if s == 0 {
		s = def
	}
	return time.Duration(s * float64(time.Second))
}
