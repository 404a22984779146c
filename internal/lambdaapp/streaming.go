package lambdaapp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stepgraph/stepgraph/internal/api"
)

// Streamed responses: API Gateway REST API with response streaming
// (integration ResponseTransferMode STREAM, invoked through Lambda's
// InvokeWithResponseStream). The function answers the documented
// integration response: a JSON prelude {statusCode, headers,
// multiValueHeaders}, eight NUL bytes, then the body as it is written
// (events.APIGatewayProxyStreamingResponse of aws-lambda-go, whose runtime
// client posts a returned io.Reader to the Runtime API with chunked
// transfer encoding, one chunk per write, flushed). The request event is
// the REST API's proxy event (payload 1.0), the same as for a buffered
// integration.
//
// A response lasts at most Budget: 15 minutes is the most API Gateway
// streams a response and the longest a Lambda runs. Then the handler's
// context ends with the cause api.ErrResponseBudget: a stream ends (the
// SDKs reconnect to Location with Last-Event-ID, and the stream goes on
// from the event log), a wait still waiting ends with the WaitTimeout
// error as the buffered handler's does — after up to Budget instead of
// 28 s.

// DefaultStreamBudget is how long a streamed response lasts at most:
// under the 15 minutes of API Gateway's streaming and of a Lambda, with
// room to end the response cleanly.
const DefaultStreamBudget = 14*time.Minute + 30*time.Second

// MaxStreamBudget is the most a stream budget may be (EnvStreamBudget).
const MaxStreamBudget = 15 * time.Minute

// streamContentType is the content type of a streamed integration
// response (the prelude, the NULs, the body).
const streamContentType = "application/vnd.awslambda.http-integration-response"

// StreamingHandler serves API Gateway REST API proxy events to an
// http.Handler with the response streamed: each write of the handler
// reaches the client as it is made (with its flushes, SSE events and a
// wait's keep-alive newlines). Nothing is buffered but one write.
type StreamingHandler struct {
	h http.Handler
	// Budget bounds one response; DefaultStreamBudget when 0. It is cut
	// to the Lambda's own deadline less a second.
	Budget time.Duration
}

// NewStreamingHandler wraps h.
func NewStreamingHandler(h http.Handler) *StreamingHandler { return &StreamingHandler{h: h} }

// Handle is the Lambda handler of a streamed route. The response it
// returns reads the handler's output as the handler writes it; it is
// returned once the status and headers are known.
func (s *StreamingHandler) Handle(ctx context.Context, ev events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
	budget := s.Budget
	if budget <= 0 {
		budget = DefaultStreamBudget
	}
	start := time.Now()
	deadline := start.Add(budget)
	if d, ok := ctx.Deadline(); ok && d.Add(-deadlineMargin).Before(deadline) {
		deadline = d.Add(-deadlineMargin)
	}
	// Not cancelled when Handle returns: the body is read after that, by
	// the runtime client. The handler's goroutine cancels it when done.
	rctx, cancel := context.WithDeadlineCause(context.WithValue(ctx, startKey{}, start), deadline, api.ErrResponseBudget)
	req, err := requestV1(rctx, ev)
	if err != nil {
		cancel()
		return badRequestStream(err), nil
	}
	pr, pw := io.Pipe()
	w := &streamWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer cancel()
		defer func() {
			if p := recover(); p != nil {
				if w.start(http.StatusInternalServerError) {
					// Nothing was sent yet: an ordinary 500 (JSON, the
					// default type), and the response ends cleanly.
					_, _ = pw.Write([]byte(`{"detail":"internal error"}` + "\n"))
					_ = pw.Close()
					return
				}
				// Mid-answer: the stream ends with an error, which the
				// runtime reports, so the client sees a cut and reconnects.
				_ = pw.CloseWithError(fmt.Errorf("handler panic: %v", p))
			}
		}()
		s.h.ServeHTTP(w, req)
		w.start(http.StatusNoContent) // a handler that wrote nothing
		if unfinishedWait(rctx, w.status, w.header, w.onlySpace) {
			_, _ = pw.Write(waitTimeoutBody(rctx, w.header.Get("Location")))
		}
		_ = pw.Close()
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		// The invocation ended before the handler said anything.
		_ = pr.Close()
		return nil, context.Cause(ctx)
	}
	resp := &events.APIGatewayProxyStreamingResponse{StatusCode: w.status, MultiValueHeaders: w.sent, Body: pr}
	return resp, nil
}

// streamWriter is the http.ResponseWriter of a streamed response: the
// status and headers are taken at the first write (or WriteHeader), the
// body goes through a pipe to the runtime client.
type streamWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   map[string][]string // the headers as sent (header is the handler's to change)
	// onlySpace: nothing but whitespace was written (a wait's keep-alives).
	onlySpace bool
}

func (w *streamWriter) Header() http.Header { return w.header }

// start fixes the status and headers; it reports whether this call did.
func (w *streamWriter) start(status int) bool {
	first := false
	w.once.Do(func() {
		first = true
		w.status = status
		if w.header.Get("Content-Type") == "" && status != http.StatusNoContent {
			w.header.Set("Content-Type", "application/json")
		}
		w.sent = map[string][]string{}
		for k, v := range w.header {
			switch http.CanonicalHeaderKey(k) {
			case "Content-Length", "Transfer-Encoding", "Connection":
				// The gateway frames the streamed body itself.
				continue
			}
			w.sent[k] = append([]string(nil), v...)
		}
		w.onlySpace = true
		close(w.ready)
	})
	return first
}

func (w *streamWriter) WriteHeader(status int) {
	if status >= 100 && status < 200 {
		return // informational: not a response of its own here
	}
	w.start(status)
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	if w.onlySpace && len(bytes.TrimSpace(b)) > 0 {
		w.onlySpace = false
	}
	return w.pw.Write(b)
}

// Flush sends nothing more: every write is already on its way (a pipe
// write returns once the runtime client took it, and it writes each as one
// flushed chunk).
func (w *streamWriter) Flush() { w.start(http.StatusOK) }

// requestV1 makes the http.Request of a REST API proxy event. Its path is
// the resource path without the stage; repeated query parameters and
// headers come from the multi-value maps.
func requestV1(ctx context.Context, ev events.APIGatewayProxyRequest) (*http.Request, error) {
	q := url.Values{}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = append(q[k], vs...)
	}
	for k, v := range ev.QueryStringParameters {
		if _, ok := q[k]; !ok {
			q.Set(k, v)
		}
	}
	path := ev.Path
	if path == "" {
		path = "/"
	}
	u := &url.URL{Scheme: "https", Host: ev.RequestContext.DomainName, Path: path, RawQuery: q.Encode()}
	if u.Host == "" {
		u.Host = "localhost"
	}
	var body io.Reader = strings.NewReader(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("the body is not base64: %w", err)
		}
		body = bytes.NewReader(b)
	}
	ctx = withPublicBase(ctx, ev.RequestContext.DomainName, ev.RequestContext.Stage)
	req, err := http.NewRequestWithContext(ctx, ev.HTTPMethod, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range ev.MultiValueHeaders {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	for k, v := range ev.Headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	req.RemoteAddr = ev.RequestContext.Identity.SourceIP
	req.RequestURI = u.RequestURI()
	return req, nil
}

func badRequestStream(err error) *events.APIGatewayProxyStreamingResponse {
	body, _ := json.Marshal(map[string]string{"detail": "the request could not be read: " + err.Error()})
	return &events.APIGatewayProxyStreamingResponse{StatusCode: http.StatusBadRequest,
		Headers: map[string]string{"Content-Type": "application/json"}, Body: bytes.NewReader(append(body, '\n'))}
}

// unfinishedWait: a runs/wait or join answer (200, Location .../join) with
// nothing but keep-alive whitespace, cut short by the budget.
func unfinishedWait(ctx context.Context, status int, header http.Header, onlySpace bool) bool {
	return ctx.Err() != nil && status == http.StatusOK &&
		strings.HasSuffix(header.Get("Location"), "/join") && onlySpace
}

// waitTimeoutBody is the answer of a wait cut short: the run goes on, and
// Location names where to wait for it again.
func waitTimeoutBody(ctx context.Context, location string) []byte {
	b, _ := json.Marshal(map[string]any{"__error__": map[string]string{
		"error": KindWaitTimeout,
		"message": fmt.Sprintf("the run is still in progress after %s, as long as one request may last here; "+
			"GET %s to wait for its result", budgetOf(ctx), location),
	}})
	return b
}

// Router is the handler of an API function behind both of the stack's
// gateways: the HTTP API's events (payload 2.0, buffered: HTTPHandler)
// and the REST API's (payload 1.0): streamed when the function's routes
// are (Function.Stream; the REST API invokes them with
// InvokeWithResponseStream and reads the streamed integration response),
// buffered otherwise. A function cannot learn how it was invoked, so the
// stack and Function.Stream must agree: infra/ builds the REST API's
// integrations from the same flag in functions/routes.json.
type Router struct {
	Buffered  *HTTPHandler
	Streaming *StreamingHandler
	// Stream: the REST API streams this function's responses.
	Stream bool
}

// NewRouter serves h; stream is the function's Function.Stream.
func NewRouter(h http.Handler, stream bool) *Router {
	return &Router{Buffered: NewHTTPHandler(h), Streaming: NewStreamingHandler(h), Stream: stream}
}

// Invoke is the Lambda handler: it answers the event's gateway.
func (r *Router) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	var kind struct {
		Version    string `json:"version"`
		HTTPMethod string `json:"httpMethod"`
	}
	if err := json.Unmarshal(payload, &kind); err != nil {
		return nil, fmt.Errorf("the event is not an API Gateway event: %w", err)
	}
	if kind.Version == "2.0" || kind.HTTPMethod == "" {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("the event is not an HTTP API event: %w", err)
		}
		return r.Buffered.Handle(ctx, ev)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("the event is not a REST API event: %w", err)
	}
	if r.Stream {
		return r.Streaming.Handle(ctx, ev)
	}
	return r.Buffered.HandleV1(ctx, ev)
}
