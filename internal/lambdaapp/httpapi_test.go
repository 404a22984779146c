package lambdaapp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stepgraph/stepgraph/internal/api"
)

func request(method, path string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, RouteKey: method + " " + path,
		Headers: map[string]string{"host": "abc.execute-api.us-east-1.amazonaws.com"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", DomainName: "abc.execute-api.us-east-1.amazonaws.com",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, SourceIP: "192.0.2.1"},
		},
	}
}

func serve(t *testing.T, h http.Handler, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := NewHTTPHandler(h).Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handle returned an error (the gateway would answer 5xx): %v", err)
	}
	return resp
}

func TestEveryResponseHasAStatusAndAContentType(t *testing.T) {
	for _, tc := range []struct {
		name        string
		h           http.HandlerFunc
		status      int
		contentType string
		body        string
	}{
		{"writes nothing", func(http.ResponseWriter, *http.Request) {}, 204, "", ""},
		{"status only", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }, 202, "", ""},
		{"JSON without a type", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"x"}`+"\n")
		}, 201, "application/json", `{"id":"x"}` + "\n"},
		{"JSON array, implicit 200", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, ` [1, 2]`) },
			200, "application/json", ` [1, 2]`},
		{"text without a type", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") },
			200, "text/plain; charset=utf-8", "hello"},
		{"type kept", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "{}")
		}, 200, "text/html; charset=utf-8", "{}"},
	} {
		resp := serve(t, tc.h, request("GET", "/x"))
		if resp.StatusCode != tc.status || resp.Headers["Content-Type"] != tc.contentType || resp.Body != tc.body {
			t.Errorf("%s: %d %q %q; want %d %q %q", tc.name, resp.StatusCode, resp.Headers["Content-Type"], resp.Body,
				tc.status, tc.contentType, tc.body)
		}
	}
}

func TestRequestConversion(t *testing.T) {
	var got *http.Request
	var gotBody string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
	})
	ev := request("POST", "/prod/threads/t1/runs/wait")
	ev.RequestContext.Stage = "prod"
	ev.RawQueryString = "a=1&b=two"
	ev.Headers["x-api-key"] = "sg_key"
	ev.Headers["x-custom"] = "one, two"
	ev.Headers["content-type"] = "application/json"
	ev.Body = base64.StdEncoding.EncodeToString([]byte(`{"k":1}`))
	ev.IsBase64Encoded = true
	serve(t, h, ev)
	if got.Method != "POST" || got.URL.Path != "/threads/t1/runs/wait" || got.URL.Query().Get("b") != "two" {
		t.Errorf("request %s %s", got.Method, got.URL)
	}
	if v := got.Header.Values("X-Custom"); len(v) != 1 || v[0] != "one, two" {
		t.Errorf("X-Custom %q: want the value as sent", v)
	}
	if got.Header.Get("X-Api-Key") != "sg_key" || gotBody != `{"k":1}` {
		t.Errorf("key %q body %q", got.Header.Get("X-Api-Key"), gotBody)
	}

	// $default has no prefix to strip; a path that merely starts like the
	// stage is left alone.
	ev = request("GET", "/production/x")
	ev.RequestContext.Stage = "prod"
	serve(t, h, ev)
	if got.URL.Path != "/production/x" {
		t.Errorf("path %s", got.URL.Path)
	}

	bad := request("POST", "/x")
	bad.Body, bad.IsBase64Encoded = "%%%not base64", true
	resp := serve(t, h, bad)
	if resp.StatusCode != 400 || resp.Headers["Content-Type"] != "application/json" || !strings.Contains(resp.Body, `"detail"`) {
		t.Errorf("undecodable request: %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
	}
}

func TestBinaryBodiesAreBase64(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0x00, 0xfe})
	})
	resp := serve(t, h, request("GET", "/bin"))
	if !resp.IsBase64Encoded || resp.Body != base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}) {
		t.Errorf("binary body: %+v", resp)
	}
}

// waiter answers like the API's runs/wait: 200 at once, keep-alive
// newlines, the result when it comes — never, here, until ctx ends.
func waiter(result <-chan string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Location", "/threads/t/runs/r")
		w.Header().Set("Location", "/threads/t/runs/r/join")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "\n")
		select {
		case body := <-result:
			io.WriteString(w, body)
		case <-r.Context().Done():
		}
	}
}

func TestAWaitPastTheBudgetAnswersHowToJoin(t *testing.T) {
	a := NewHTTPHandler(waiter(nil))
	a.Budget = 100 * time.Millisecond
	start := time.Now()
	resp, err := a.Handle(context.Background(), request("POST", "/threads/t/runs/wait"))
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the budget was not honoured")
	}
	if resp.StatusCode != 200 || resp.Headers["Location"] != "/threads/t/runs/r/join" || resp.Headers["Content-Type"] != "application/json" {
		t.Fatalf("answer %d %v", resp.StatusCode, resp.Headers)
	}
	var body struct {
		Error struct{ Error, Message string } `json:"__error__"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("body %q is not JSON: %v", resp.Body, err)
	}
	if body.Error.Error != KindWaitTimeout || !strings.Contains(body.Error.Message, "/threads/t/runs/r/join") {
		t.Fatalf("body %q", resp.Body)
	}

	// A result that arrives in time is answered as it is.
	done := make(chan string, 1)
	done <- `{"count":3}`
	a = NewHTTPHandler(waiter(done))
	resp, _ = a.Handle(context.Background(), request("POST", "/threads/t/runs/wait"))
	if resp.Body != "\n"+`{"count":3}` {
		t.Fatalf("body %q", resp.Body)
	}
}

func TestTheBudgetEndsBeforeTheLambdaDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadlineMargin+300*time.Millisecond)
	defer cancel()
	lambdaDeadline, _ := ctx.Deadline()
	h := NewHTTPHandler(waiter(nil))
	// The request's budget ends the margin before the Lambda's deadline
	// (not after the 28 s Budget): read from its context, not timed.
	b, stop := h.budget(ctx)
	defer stop()
	if d, ok := b.Deadline(); !ok || !d.Equal(lambdaDeadline.Add(-deadlineMargin)) {
		t.Errorf("budget deadline %v (set %v), want the Lambda's deadline %v less %s", d, ok, lambdaDeadline, deadlineMargin)
	}
	// And a wait that outlasts it answers WaitTimeout.
	resp, err := h.Handle(ctx, request("POST", "/runs/wait"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Body, KindWaitTimeout) {
		t.Errorf("body %q", resp.Body)
	}
}

// The real API through the wrapper: public routes, errors and docs.
func TestWithTheAPIHandler(t *testing.T) {
	h, err := api.New(api.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/ok", 200, "application/json"},
		{"/openapi.json", 200, "application/json"},
		{"/docs", 200, "text/html; charset=utf-8"},
		{"/nope", 404, "application/json"},
	} {
		resp := serve(t, h, request("GET", tc.path))
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Headers["Content-Type"], strings.Split(tc.ctype, ";")[0]) {
			t.Errorf("GET %s: %d %q; want %d %q", tc.path, resp.StatusCode, resp.Headers["Content-Type"], tc.status, tc.ctype)
		}
	}
}

// Any buffered answer Lambda could not return (over 6 MB as the proxy
// response carries it) is a 413 naming the limit and how to ask for less,
// never a failed invoke (a gateway 5xx, which an SDK retries): by its raw
// size, or by its size once JSON-escaped into the proxy response. An answer
// under both bounds is untouched.
func TestResponsesTooLargeForLambda(t *testing.T) {
	const quote = `"\"`
	escapeHeavy := `[` + strings.Repeat(`"\"\"\"",`, 4_000_000/9) + `""]` // 4 MB, ~8 MB escaped
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"over the raw bound", `"` + strings.Repeat("x", MaxBufferedResponse) + `"`, 413},
		{"under the raw bound, over once escaped", escapeHeavy, 413},
		{"just under", `"` + strings.Repeat("x", MaxBufferedResponse-2) + `"`, 200},
		{"small", quote, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "req-1")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				io.WriteString(w, tc.body)
			})
			v2 := serve(t, h, request("POST", "/threads/search"))
			v1, err := NewHTTPHandler(h).HandleV1(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/threads/search"})
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []struct {
				via, body, ctype, reqID string
				status                  int
			}{
				{"HTTP API", v2.Body, v2.Headers["Content-Type"], v2.Headers["X-Request-Id"], v2.StatusCode},
				{"REST API", v1.Body, strings.Join(v1.MultiValueHeaders["Content-Type"], ","), strings.Join(v1.MultiValueHeaders["X-Request-Id"], ","), v1.StatusCode},
			} {
				if got.status != tc.status {
					t.Fatalf("%s: %d %.200s, want %d", got.via, got.status, got.body, tc.status)
				}
				if got.reqID != "req-1" {
					t.Errorf("%s: the request id header is %q", got.via, got.reqID)
				}
				if tc.status == 200 {
					if got.body != tc.body {
						t.Errorf("%s: the answer changed (%d bytes, want %d)", got.via, len(got.body), len(tc.body))
					}
					continue
				}
				var e struct{ Detail, Error string }
				if err := json.Unmarshal([]byte(got.body), &e); err != nil || got.ctype != "application/json" || e.Error != KindResponseTooLarge ||
					!strings.Contains(e.Detail, fmt.Sprint(MaxBufferedResponse)) || !strings.Contains(e.Detail, "limit") {
					t.Errorf("%s: %q %.300s, want a JSON detail naming the limit and how to page", got.via, got.ctype, got.body)
				}
			}
			if raw, _ := json.Marshal(v2); len(raw) > 6<<20 {
				t.Errorf("the Lambda answer is %d bytes, over 6 MB", len(raw))
			}
		})
	}
}
