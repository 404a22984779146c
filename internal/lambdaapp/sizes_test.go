package lambdaapp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/awstest"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
)

// Request bodies on Lambda: a body over LambdaMaxBodyBytes gets the API's
// own 413 naming the limit (not a failed invoke, which the gateway turns
// into a 5xx); one just under it is served — here a thread whose metadata
// is 4.4 MB (its limit raised), stored through the payload store of EnvPayloadBucket and read
// back whole. The event of the largest accepted body, base64-encoded as
// API Gateway sends non-text bodies, fits Lambda's 6 MB invoke payload.
func TestRequestBodiesFitALambdaInvoke(t *testing.T) {
	ep := awstest.Start(t)
	bucket := payloadss3.BucketName(awstest.Prefix(t))
	if err := payloadss3.New(ep.Config, bucket, true).CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Metadata is the body here: its limit (64 KiB by default) is raised
	// so that one request carries megabytes.
	h, key, _ := apiOnEmulator(t, map[string]string{EnvPayloadBucket: bucket, "STEPGRAPH_MAX_METADATA_BYTES": "8000000"})

	body := func(size int) string {
		var b strings.Builder
		b.WriteString(`{"metadata": {"note": "`)
		for b.Len() < size-3 {
			b.WriteString("0123456789abcdef")
		}
		s := b.String()[:size-3]
		return s + `"}}`
	}
	post := func(payload string, base64Encoded bool) (int, string) {
		ev := keyed("POST", "/threads", key)
		ev.Headers["content-type"] = "application/json"
		ev.Body = payload
		if base64Encoded {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(payload)), true
		}
		resp := serve(t, h, ev)
		return resp.StatusCode, resp.Body
	}

	over := body(LambdaMaxBodyBytes + 1)
	status, resp := post(over, false)
	if status != 413 || !strings.Contains(resp, "request body exceeds the limit") {
		t.Fatalf("a body of %d bytes: %d %.200s, want 413 naming the limit", len(over), status, resp)
	}

	under := body(4_400_000)
	status, resp = post(under, true)
	if status != 200 {
		t.Fatalf("a body of %d bytes: %d %.300s, want 200", len(under), status, resp)
	}
	var created struct {
		ThreadID string `json:"thread_id"`
	}
	if err := json.Unmarshal([]byte(resp), &created); err != nil || created.ThreadID == "" {
		t.Fatalf("create thread: %v %.200s", err, resp)
	}
	got := serve(t, h, keyed("GET", "/threads/"+created.ThreadID, key))
	if got.StatusCode != 200 || !strings.Contains(got.Body, under[len(`{"metadata": {"note": "`):len(under)-3]) {
		t.Fatalf("the thread read back: %d, %d bytes (its 4.4 MB metadata is not whole)", got.StatusCode, len(got.Body))
	}

	// What the gateway would send for the largest accepted body: the event
	// JSON, the body base64-encoded, under Lambda's 6 MB.
	ev := keyed("POST", "/threads", key)
	ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body(LambdaMaxBodyBytes))), true
	for k := range 40 { // generous headers
		ev.Headers[fmt.Sprintf("x-header-%02d", k)] = strings.Repeat("h", 200)
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 6_291_456 {
		t.Fatalf("the event of a %d-byte body is %d bytes, over Lambda's 6 MB invoke payload", LambdaMaxBodyBytes, len(raw))
	}
}

// A search page over what Lambda can return, on the API function as
// deployed (DynamoDB and the payload store on the emulator): two threads of
// 3 MB each make a 6 MB page, answered 413 naming the limit and how to
// page, never a failed invoke; a page of one is served whole.
func TestSearchPageTooLargeForLambda(t *testing.T) {
	ep := awstest.Start(t)
	bucket := payloadss3.BucketName(awstest.Prefix(t))
	if err := payloadss3.New(ep.Config, bucket, true).CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, key, _ := apiOnEmulator(t, map[string]string{EnvPayloadBucket: bucket, "STEPGRAPH_MAX_METADATA_BYTES": "8000000"})
	note := strings.Repeat("0123456789abcdef", 3_000_000/16)
	for i := range 2 {
		ev := keyed("POST", "/threads", key)
		ev.Headers["content-type"] = "application/json"
		ev.Body = fmt.Sprintf(`{"metadata": {"big": %d, "note": %q}}`, i, note)
		if resp := serve(t, h, ev); resp.StatusCode != 200 {
			t.Fatalf("create a thread of 3 MB: %d %.200s", resp.StatusCode, resp.Body)
		}
	}
	search := func(body string) (int, string) {
		ev := keyed("POST", "/threads/search", key)
		ev.Headers["content-type"] = "application/json"
		ev.Body = body
		resp := serve(t, h, ev)
		return resp.StatusCode, resp.Body
	}
	status, body := search(`{"limit": 10}`)
	var e struct{ Detail string }
	if status != 413 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Detail, "limit") ||
		!strings.Contains(e.Detail, fmt.Sprint(MaxBufferedResponse)) {
		t.Fatalf("a 6 MB search page: %d %.300s, want 413 naming the limit", status, body)
	}
	status, body = search(`{"limit": 1}`)
	var page []map[string]any
	if status != 200 || json.Unmarshal([]byte(body), &page) != nil || len(page) != 1 || !strings.Contains(body, note) {
		t.Fatalf("a page of one 3 MB thread: %d, %d bytes", status, len(body))
	}
}
