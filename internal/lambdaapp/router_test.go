package lambdaapp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// echoRequest answers what the handler saw of the request.
var echoRequest = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "path": r.URL.Path, "query": r.URL.Query(),
		"key": r.Header.Get("X-Api-Key"), "accept": r.Header.Values("Accept"), "body": string(b), "remote": r.RemoteAddr})
})

// The Router answers each gateway's event as that gateway expects it.
func TestRouterAnswersByTheEvent(t *testing.T) {
	v1 := events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/threads/t1/stream",
		MultiValueQueryStringParameters: map[string][]string{"stream_mode": {"values", "updates"}},
		MultiValueHeaders:               map[string][]string{"X-Api-Key": {"k"}, "Accept": {"a, b", "c"}},
		RequestContext:                  events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{SourceIP: "192.0.2.1"}}}
	rawV1, _ := json.Marshal(v1)
	rawV2, _ := json.Marshal(request("GET", "/threads/t1/stream"))
	for _, tc := range []struct {
		name    string
		stream  bool
		payload []byte
		want    string // the answer's type
	}{
		{"HTTP API event, streaming function", true, rawV2, "events.APIGatewayV2HTTPResponse"},
		{"HTTP API event, buffered function", false, rawV2, "events.APIGatewayV2HTTPResponse"},
		{"REST API event, streaming function", true, rawV1, "*events.APIGatewayProxyStreamingResponse"},
		{"REST API event, buffered function", false, rawV1, "events.APIGatewayProxyResponse"},
	} {
		out, err := NewRouter(echoRequest, tc.stream).Invoke(context.Background(), tc.payload)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var body []byte
		switch o := out.(type) {
		case events.APIGatewayV2HTTPResponse:
			body = []byte(o.Body)
		case events.APIGatewayProxyResponse:
			body = []byte(o.Body)
		case *events.APIGatewayProxyStreamingResponse:
			raw, _ := io.ReadAll(o)
			_, b, ok := bytes.Cut(raw, make([]byte, 8))
			if !ok || !bytes.HasPrefix(raw, []byte(`{"statusCode":200,`)) {
				t.Fatalf("%s: not a streamed integration response: %q", tc.name, raw)
			}
			body = b
		}
		if got := typeName(out); got != tc.want {
			t.Errorf("%s: answered %s, want %s", tc.name, got, tc.want)
		}
		if !bytes.Contains(body, []byte(`"path":"/threads/t1/stream"`)) {
			t.Errorf("%s: %s", tc.name, body)
		}
		if strings.HasPrefix(tc.name, "REST") {
			// Repeated parameters and header values, as sent.
			for _, want := range []string{`"stream_mode":["values","updates"]`, `"accept":["a, b","c"]`, `"key":"k"`, `"remote":"192.0.2.1"`} {
				if !bytes.Contains(body, []byte(want)) {
					t.Errorf("%s: %s lacks %s", tc.name, body, want)
				}
			}
		}
	}
	if _, err := NewRouter(echoRequest, true).Invoke(context.Background(), []byte(`[1]`)); err == nil {
		t.Error("an event that is no API Gateway event was served")
	}
}

func typeName(v any) string {
	switch v.(type) {
	case events.APIGatewayV2HTTPResponse:
		return "events.APIGatewayV2HTTPResponse"
	case events.APIGatewayProxyResponse:
		return "events.APIGatewayProxyResponse"
	case *events.APIGatewayProxyStreamingResponse:
		return "*events.APIGatewayProxyStreamingResponse"
	}
	return "?"
}

// A REST API body in base64 is decoded; one that is not base64 is a 400
// with a JSON detail, never a Lambda error.
func TestRESTBodies(t *testing.T) {
	ev := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/x", IsBase64Encoded: true,
		Body: base64.StdEncoding.EncodeToString([]byte(`{"a":1}`))}
	resp, err := NewHTTPHandler(echoRequest).HandleV1(context.Background(), ev)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"body":"{\"a\":1}"`) {
		t.Fatalf("base64 body: %v %d %s", err, resp.StatusCode, resp.Body)
	}
	ev.Body = "%%%"
	resp, err = NewHTTPHandler(echoRequest).HandleV1(context.Background(), ev)
	if err != nil || resp.StatusCode != 400 || !strings.Contains(resp.Body, `"detail"`) {
		t.Fatalf("bad base64: %v %d %s", err, resp.StatusCode, resp.Body)
	}
	sresp, err := NewStreamingHandler(echoRequest).Handle(context.Background(), ev)
	if err != nil || sresp.StatusCode != 400 {
		t.Fatalf("bad base64, streamed: %v %+v", err, sresp)
	}
}

// A wait's output over what a buffered Lambda answer can carry is a 200
// naming where the output can be had, never a gateway 5xx; the same output
// streams whole.
func TestOutputTooLargeForABufferedAnswer(t *testing.T) {
	big := bytes.Repeat([]byte("x"), MaxBufferedResponse+1)
	wait := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Location", "/threads/t1/runs/r1")
		w.Header().Set("Location", "/threads/t1/runs/r1/join")
		w.WriteHeader(200)
		w.Write([]byte(`"`))
		w.Write(big)
		w.Write([]byte(`"`))
	})
	resp := serve(t, wait, request("POST", "/threads/t1/runs/wait"))
	var body struct {
		Error struct{ Error, Message string } `json:"__error__"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &body) != nil || body.Error.Error != KindResponseTooLarge ||
		!strings.Contains(body.Error.Message, "/threads/t1/state") {
		t.Fatalf("%d %.200s", resp.StatusCode, resp.Body)
	}
	sresp, err := NewStreamingHandler(wait).Handle(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/threads/t1/runs/wait"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(sresp)
	if _, b, _ := bytes.Cut(raw, make([]byte, 8)); len(b) != len(big)+2 {
		t.Fatalf("streamed %d bytes, want %d", len(b), len(big)+2)
	}
}

// A handler that panics after it started its answer ends the stream with
// an error (the runtime reports it, and API Gateway cuts the response, so
// the client reconnects); before, it answers 500 with a JSON detail.
func TestStreamingHandlerPanics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started bool
	}{{"before the answer", false}, {"during the answer", true}} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.started {
				w.Write([]byte("event: metadata\r\n\r\n"))
			}
			panic("boom")
		})
		resp, err := NewStreamingHandler(h).Handle(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/x"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, rerr := io.ReadAll(resp.Body)
		switch {
		case !tc.started && (resp.StatusCode != 500 || rerr != nil || !strings.Contains(string(body), `"detail"`)):
			t.Errorf("%s: %d %q", tc.name, resp.StatusCode, body)
		case tc.started && (resp.StatusCode != 200 || rerr == nil):
			t.Errorf("%s: %d %q, err %v: the stream must end with an error", tc.name, resp.StatusCode, body, rerr)
		}
	}
}

// The prelude carries the handler's headers but those of the framing,
// which API Gateway does itself for a streamed body.
func TestPreludeLeavesOutFramingHeaders(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Location", "/threads/t/runs/r")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Write([]byte("{}"))
	})
	resp, err := NewStreamingHandler(h).Handle(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp)
	prelude, body, _ := bytes.Cut(raw, make([]byte, 8))
	var meta struct {
		StatusCode        int                 `json:"statusCode"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	}
	if err := json.Unmarshal(prelude, &meta); err != nil {
		t.Fatal(err)
	}
	got := meta.MultiValueHeaders
	if meta.StatusCode != 200 || string(body) != "{}" || got["Content-Length"] != nil || got["Connection"] != nil ||
		got["Content-Location"][0] != "/threads/t/runs/r" || len(got["Set-Cookie"]) != 2 || got["Content-Type"][0] != "application/json" {
		t.Fatalf("prelude %s, body %q", prelude, body)
	}
}
