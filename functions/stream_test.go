package functions_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
	"github.com/stepgraph/stepgraph/internal/runs"
)

// streamedAnswer is a streamed integration response as API Gateway reads
// it: the prelude's status and headers, and the body after the eight NULs.
type streamedAnswer struct {
	status  int
	headers map[string][]string
	body    string
	chunks  int // PayloadChunk events the emulator sent
}

// invokeStreamed invokes function name with a REST API proxy event through
// InvokeWithResponseStream, as API Gateway's streamed integration does, and
// reads the event stream to its end.
func invokeStreamed(t *testing.T, lc *lambda.Client, name string, ev events.APIGatewayProxyRequest) streamedAnswer {
	t.Helper()
	payload, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := lc.InvokeWithResponseStream(ctx, &lambda.InvokeWithResponseStreamInput{
		FunctionName: aws.String(name), Payload: payload})
	if err != nil {
		t.Fatalf("InvokeWithResponseStream %s %s: %v", ev.HTTPMethod, ev.Path, err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var raw bytes.Buffer
	var a streamedAnswer
	for e := range stream.Events() {
		switch e := e.(type) {
		case *ltypes.InvokeWithResponseStreamResponseEventMemberPayloadChunk:
			raw.Write(e.Value.Payload)
			a.chunks++
		case *ltypes.InvokeWithResponseStreamResponseEventMemberInvokeComplete:
			if e.Value.ErrorCode != nil {
				t.Fatalf("%s %s: the function failed: %s %s", ev.HTTPMethod, ev.Path, aws.ToString(e.Value.ErrorCode), aws.ToString(e.Value.ErrorDetails))
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("%s %s: the event stream: %v", ev.HTTPMethod, ev.Path, err)
	}
	prelude, body, ok := bytes.Cut(raw.Bytes(), make([]byte, 8))
	if !ok {
		t.Fatalf("%s %s: no prelude and eight NULs in the response: %q", ev.HTTPMethod, ev.Path, raw.Bytes())
	}
	var meta struct {
		StatusCode        int                 `json:"statusCode"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	}
	if err := json.Unmarshal(prelude, &meta); err != nil {
		t.Fatalf("%s %s: the prelude is not JSON: %v: %q", ev.HTTPMethod, ev.Path, err, prelude)
	}
	a.status, a.headers, a.body = meta.StatusCode, meta.MultiValueHeaders, string(body)
	return a
}

func restEvent(key, method, path string, body any, header ...string) events.APIGatewayProxyRequest {
	ev := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path,
		MultiValueHeaders: map[string][]string{"X-Api-Key": {key}},
		RequestContext: events.APIGatewayProxyRequestContext{DomainName: "api.example", Stage: "api",
			Identity: events.APIGatewayRequestIdentity{SourceIP: "192.0.2.1"}}}
	if body != nil {
		b, _ := json.Marshal(body)
		ev.Body = string(b)
		ev.MultiValueHeaders["Content-Type"] = []string{"application/json"}
	}
	for i := 0; i+1 < len(header); i += 2 {
		ev.MultiValueHeaders[header[i]] = []string{header[i+1]}
	}
	return ev
}

type sseEvent struct{ id, event, data string }

func parseSSE(body string) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		}
	}
	return out
}

// The streaming functions as real Lambdas on the emulator: run-stream and
// thread-run-wait built from functions/ (aws-lambda-go's runtime posting the
// streamed integration response), invoked with InvokeWithResponseStream and
// REST API events as API Gateway's streamed integration invokes them; the
// runs executed by the run state machine and the run-worker Lambda, which
// logs a streamed run's events to DynamoDB; run-stream tails that log. Its
// responses are cut by a short budget (STEPGRAPH_STREAM_BUDGET), and the
// stream goes on over several invocations with Last-Event-ID.
//
// What the emulator (MiniStack, scripts/install-ministack.sh) does not do:
// it runs the function to its end and sends the whole response as one
// PayloadChunk (so chunk-by-chunk delivery is tested in process, in
// internal/lambdaapp), and its REST API does not stream (it ignores
// ResponseTransferMode and does not parse the response-streaming-invocations
// URI), so API Gateway's side is played here.
func TestStreamingFunctionsOnTheEmulator(t *testing.T) {
	s := sharedStack(t)
	log := testLog(t)
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(workDir, "bin-stream")
	if err := sample.Build(context.Background(), root, bin, nil, "run-stream", "thread-run-wait"); err != nil {
		t.Fatal(err)
	}
	const budget = 1500 * time.Millisecond
	streamFn, err := s.DeployAPI(context.Background(), "run-stream", bin,
		map[string]string{lambdaapp.EnvStreamBudget: budget.String()}, 60)
	if err != nil {
		t.Fatal(err)
	}
	waitFn, err := s.DeployAPI(context.Background(), "thread-run-wait", bin, nil, 60)
	if err != nil {
		t.Fatal(err)
	}
	app, err := s.Open(lambdaapp.RoleAPI, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	org, _, err := app.Keys.EnsureOrganization(ctx, "stream-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	key, err := app.Keys.Create(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	thread, err := app.Runs.CreateThread(ctx, org.ID, runs.ThreadInput{})
	if err != nil {
		t.Fatal(err)
	}
	th := thread.ThreadID
	lc := lambda.NewFromConfig(s.AWS)

	t.Run("stream across invocations", func(t *testing.T) {
		// after_seconds: the run starts 3 s after it was created, so the
		// first response (1.5 s) ends before any of its events exists.
		a := invokeStreamed(t, lc, streamFn, restEvent(key, "POST", "/threads/"+th+"/runs/stream",
			map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 3}, "after_seconds": 3,
				"stream_mode": []string{"values"}}))
		if a.status != 200 || !strings.HasPrefix(first(a.headers["Content-Type"]), "text/event-stream") {
			t.Fatalf("runs/stream: %d %v %q", a.status, a.headers, a.body)
		}
		loc := first(a.headers["Location"])
		if !strings.HasPrefix(loc, "/threads/"+th+"/runs/") || !strings.HasSuffix(loc, "/stream") {
			t.Fatalf("Location %q", loc)
		}
		got := parseSSE(a.body)
		invocations := 1
		// Reconnect as the SDKs do: with the last id, or -1 (everything
		// kept) when none came yet, until the run's last values.
		done := func() bool { return len(got) > 0 && got[len(got)-1].data == `{"count":3,"steps":3}` }
		for !done() {
			last := "-1"
			if len(got) > 0 {
				last = got[len(got)-1].id
			}
			if invocations > 40 {
				t.Fatalf("no end after %d invocations: %+v", invocations, got)
			}
			a = invokeStreamed(t, lc, streamFn, restEvent(key, "GET", loc, nil, "Last-Event-ID", last))
			if a.status != 200 {
				t.Fatalf("join: %d %q", a.status, a.body)
			}
			got = append(got, parseSSE(a.body)...)
			invocations++
		}
		if invocations < 2 || got[0].event != "metadata" {
			t.Fatalf("%d invocations: %+v", invocations, got)
		}
		for i, e := range got {
			if e.id != fmt.Sprint(i) {
				t.Fatalf("event %d has id %q: every event once, in order, across %d invocations: %+v", i, e.id, invocations, got)
			}
		}
		t.Logf("%d events over %d invocations", len(got), invocations)
	})

	t.Run("wait", func(t *testing.T) {
		other, err := app.Runs.CreateThread(ctx, org.ID, runs.ThreadInput{})
		if err != nil {
			t.Fatal(err)
		}
		a := invokeStreamed(t, lc, waitFn, restEvent(key, "POST", "/threads/"+other.ThreadID+"/runs/wait",
			map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 2}, "after_seconds": 2}))
		if a.status != 200 || first(a.headers["Content-Type"]) != "application/json" {
			t.Fatalf("runs/wait: %d %v %q", a.status, a.headers, a.body)
		}
		// Its output, after the keep-alive newlines (if any came: one every
		// 5 s) of the wait.
		if strings.TrimSpace(a.body) != `{"count":2,"steps":2}` {
			t.Fatalf("runs/wait answered %q", a.body)
		}
	})
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}
