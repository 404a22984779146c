package lambdaapp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/stepgraph/stepgraph/internal/api"
)

// DefaultResponseBudget is how long an API function works on one request
// before it answers with what it has: under the 30 s that API Gateway
// gives an integration, so the client never gets a gateway 5xx instead.
const DefaultResponseBudget = 28 * time.Second

// deadlineMargin is kept between the budget and the Lambda's own deadline.
const deadlineMargin = time.Second

// KindWaitTimeout is the __error__ of a runs/wait or join whose run is still
// in progress when the response budget is spent.
const KindWaitTimeout = "WaitTimeout"

// HTTPHandler serves an http.Handler to API Gateway HTTP API (payload 2.0)
// events through aws-lambda-go-api-proxy, with what the proxy leaves out:
//
//   - every response has a status: a handler that writes nothing answers 204
//     (the proxy would fail, and the gateway answer 5xx);
//   - every response with a body has a Content-Type: a JSON body without one
//     is application/json (the proxy would guess text/plain), anything else
//     is sniffed as net/http does;
//   - request headers reach the handler as the gateway sent them (the proxy
//     splits every value on commas);
//   - a named stage's path prefix (/<stage>/...) is removed; the $default
//     stage has none;
//   - the handler's context ends after Budget (or just before the Lambda's
//     own deadline): a runs/wait or join still waiting then answers 200 with
//     {"__error__": {"error": "WaitTimeout", ...}} after its keep-alive
//     newlines, and its Location header names the join URL to wait again —
//     never a gateway timeout once the run exists, and the run goes on;
//   - a request the proxy cannot convert answers 400 with a JSON detail,
//     never a Lambda error.
type HTTPHandler struct {
	h       http.Handler
	adapter *httpadapter.HandlerAdapterV2
	// Budget bounds the work on one request; DefaultResponseBudget when 0.
	Budget time.Duration
}

// NewHTTPHandler wraps h.
func NewHTTPHandler(h http.Handler) *HTTPHandler {
	return &HTTPHandler{h: h, adapter: httpadapter.NewV2(finishing(h))}
}

type eventKey struct{}

// Handle is the Lambda handler.
func (a *HTTPHandler) Handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := a.budget(ctx)
	defer cancel()
	ctx = withPublicBase(ctx, ev.RequestContext.DomainName, ev.RequestContext.Stage)

	if stage := ev.RequestContext.Stage; stage != "" && stage != "$default" {
		ev.RawPath = stripStage(ev.RawPath, stage)
		ev.RequestContext.HTTP.Path = stripStage(ev.RequestContext.HTTP.Path, stage)
	}
	resp, err := a.adapter.ProxyWithContext(context.WithValue(ctx, eventKey{}, ev.Headers), ev)
	if err != nil {
		body, _ := json.Marshal(map[string]string{"detail": "the request could not be read: " + err.Error()})
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest,
			Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body) + "\n"}, nil
	}
	return resp, nil
}

// budget is the context of one request: it ends after Budget, or a second
// before the Lambda's deadline, with the cause api.ErrResponseBudget (the
// client did not leave: a run is not cancelled for on_disconnect).
func (a *HTTPHandler) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	budget := a.Budget
	if budget <= 0 {
		budget = DefaultResponseBudget
	}
	start := time.Now()
	deadline := start.Add(budget)
	if d, ok := ctx.Deadline(); ok && d.Add(-deadlineMargin).Before(deadline) {
		deadline = d.Add(-deadlineMargin)
	}
	return context.WithDeadlineCause(context.WithValue(ctx, startKey{}, start), deadline, api.ErrResponseBudget)
}

// HandleV1 serves an API Gateway REST API proxy event (payload 1.0) of a
// buffered route, completed as Handle completes HTTP API answers (the
// status, the Content-Type, an unfinished wait, an output too large).
func (a *HTTPHandler) HandleV1(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	ctx, cancel := a.budget(ctx)
	defer cancel()
	req, err := requestV1(ctx, ev)
	if err != nil {
		body, _ := json.Marshal(map[string]string{"detail": "the request could not be read: " + err.Error()})
		return events.APIGatewayProxyResponse{StatusCode: http.StatusBadRequest,
			Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body) + "\n"}, nil
	}
	rec := &recorder{header: http.Header{}}
	a.h.ServeHTTP(rec, req)
	rec.finish(ctx)
	resp := events.APIGatewayProxyResponse{StatusCode: rec.status, MultiValueHeaders: rec.header}
	if utf8.Valid(rec.body.Bytes()) {
		resp.Body = rec.body.String()
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(rec.body.Bytes()), true
	}
	return resp, nil
}

func stripStage(path, stage string) string {
	prefix := "/" + stage
	if path == prefix {
		return "/"
	}
	if strings.HasPrefix(path, prefix+"/") {
		return path[len(prefix):]
	}
	return path
}

// finishing runs h on a buffered response and completes it (status,
// Content-Type, an unfinished wait) before handing it to the proxy.
func finishing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headers, ok := r.Context().Value(eventKey{}).(map[string]string); ok {
			for k, v := range headers {
				r.Header.Set(k, v) // undo the proxy's split on commas
			}
		}
		rec := &recorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		rec.finish(r.Context())
		dst := w.Header()
		for k, v := range rec.header {
			dst[k] = v
		}
		w.WriteHeader(rec.status)
		if rec.body.Len() > 0 {
			_, _ = w.Write(rec.body.Bytes())
		}
	})
}

// recorder buffers a response (the proxy buffers anyway: no streaming).
type recorder struct {
	header http.Header
	status int // 0 until WriteHeader or Write
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// Flush is a no-op: the whole response goes out at once.
func (r *recorder) Flush() {}

func (r *recorder) finish(ctx context.Context) {
	if r.status == 0 {
		r.status = http.StatusNoContent
	}
	if unfinishedWait(ctx, r.status, r.header, len(bytes.TrimSpace(r.body.Bytes())) == 0) {
		r.body.Write(waitTimeoutBody(ctx, r.header.Get("Location")))
	}
	tooLarge := r.body.Len() > MaxBufferedResponse || encodedSize(r.body.Bytes()) > maxEncodedResponse
	if tooLarge && r.status == http.StatusOK && strings.HasSuffix(r.header.Get("Location"), "/join") {
		// A run's output over what Lambda can return: the gateway would
		// answer 502 (and the JS SDK retry the run). The run exists and
		// ended: say so in a 200, and where the output can be had.
		r.body.Reset()
		e := map[string]any{"__error__": map[string]string{
			"error": KindResponseTooLarge,
			"message": fmt.Sprintf("the run's output is over the %d bytes a buffered response may have here; "+
				"GET %s/state for its state, or wait on the streaming endpoint, which has no such limit",
				MaxBufferedResponse, threadOf(r.header.Get("Content-Location"))),
		}}
		b, _ := json.Marshal(e)
		r.body.Write(b)
	} else if tooLarge {
		r.tooLarge()
	}
	if r.body.Len() > 0 && r.header.Get("Content-Type") == "" {
		if json.Valid(r.body.Bytes()) {
			r.header.Set("Content-Type", "application/json")
		} else {
			r.header.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
		}
	}
}

// MaxBufferedResponse is the largest body a buffered answer carries:
// Lambda returns at most 6 MB (6,291,456 bytes) from a synchronous invoke,
// JSON-encoded into the proxy response, so a margin is kept for the
// headers and the escaping.
const MaxBufferedResponse = 5 << 20

// maxEncodedResponse bounds the body as the Lambda answer carries it: a
// JSON string inside the proxy response (every '"', '\\', control
// character, '<', '>', '&' escaped, as aws-lambda-go's encoding/json does),
// or base64 when it is not UTF-8. Lambda returns 6 MB (6,291,456 bytes); 64
// KiB are kept for the status, the headers and the envelope. A body of
// MaxBufferedResponse bytes made mostly of characters JSON escapes would
// not fit: this bound catches it.
const maxEncodedResponse = 6<<20 - 64<<10

// encodedSize is the size of body as the Lambda answer carries it.
func encodedSize(body []byte) int {
	if !utf8.Valid(body) {
		return base64.StdEncoding.EncodedLen(len(body))
	}
	n := len(body)
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5 // \u00XX
		case c == 0xe2 && i+2 < len(body) && body[i+1] == 0x80 && (body[i+2] == 0xa8 || body[i+2] == 0xa9):
			n += 3 // U+2028, U+2029: 3 bytes become \u2028
		}
	}
	return n
}

// tooLarge replaces a response Lambda could not return (the gateway would
// answer 502, and an SDK retry the request) with a 413 whose detail names
// the limit and how to ask for less. The request itself was carried out
// (a write is done): only its answer is refused. A run's wait or join has
// its own answer (above).
func (r *recorder) tooLarge() {
	size := r.body.Len()
	r.body.Reset()
	for _, k := range []string{"Content-Length", "Content-Encoding", "Content-Location", "Location", "Etag", "Last-Modified"} {
		r.header.Del(k) // of the answer refused; the others (request id, CORS) stay
	}
	r.status = http.StatusRequestEntityTooLarge
	r.header.Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]any{"detail": fmt.Sprintf("the response is %d bytes, over what this API can answer at once "+
		"(%d bytes: AWS Lambda returns at most 6 MB); the request itself was carried out. Ask for less at once: "+
		"a smaller limit (pages of /threads/search, /runs/search, /assistants/search, /threads/{thread_id}/runs; "+
		"/threads/{thread_id}/history with limit and before), select to return fewer fields, "+
		"GET /threads/{thread_id}/state/{checkpoint_id} one checkpoint at a time, or the streaming endpoints",
		size, MaxBufferedResponse), "error": KindResponseTooLarge})
	r.body.Write(b)
}

// KindResponseTooLarge is the __error__ of a wait or join whose run ended
// with an output too large for a buffered response.
const KindResponseTooLarge = "ResponseTooLarge"

// threadOf is /threads/{id} of a run path /threads/{id}/runs/{run_id}.
func threadOf(runPath string) string {
	if i := strings.Index(runPath, "/runs/"); i > 0 {
		return runPath[:i]
	}
	return runPath
}

// budgetOf is the time the request had, rounded, for the message.
func budgetOf(ctx context.Context) time.Duration {
	if start, ok := ctx.Value(startKey{}).(time.Time); ok {
		if d, ok := ctx.Deadline(); ok {
			return d.Sub(start).Round(time.Second)
		}
	}
	return DefaultResponseBudget
}

type startKey struct{}
