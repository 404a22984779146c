package awstest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestStartServesHealthAndAPIs(t *testing.T) {
	ep := Start(t)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).MatchString(ep.URL) {
		t.Fatalf("URL %q, want a loopback http address", ep.URL)
	}
	resp, err := http.Get(ep.URL + "/_ministack/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}
	ctx := context.Background()
	if _, err := dynamodb.NewFromConfig(ep.Config).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("DynamoDB ListTables: %v", err)
	}
	if _, err := secretsmanager.NewFromConfig(ep.Config).ListSecrets(ctx, &secretsmanager.ListSecretsInput{}); err != nil {
		t.Fatalf("Secrets Manager ListSecrets: %v", err)
	}
}

func TestStartReturnsTheSameEmulator(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.URL != b.URL {
		t.Fatalf("two Starts gave %s and %s, want one emulator per binary", a.URL, b.URL)
	}
}

func TestPrefix(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9_]{1,20}-[0-9a-f]{8}-$`)
	seen := map[string]bool{}
	for range 50 {
		p := Prefix(t)
		if !valid.MatchString(p) {
			t.Fatalf("Prefix = %q, want [A-Za-z0-9_]{1,20}-<8 hex>-", p)
		}
		if seen[p] {
			t.Fatalf("Prefix repeated %q", p)
		}
		seen[p] = true
	}
	t.Run("sub/test with spaces", func(t *testing.T) {
		if p := Prefix(t); !valid.MatchString(p) {
			t.Fatalf("Prefix = %q", p)
		}
	})
}

func TestMissingVenvSaysWhatToRun(t *testing.T) {
	_, err := startIn(t.TempDir())
	if err == nil || !regexp.MustCompile(`run make test-deps`).MatchString(err.Error()) {
		t.Fatalf("startIn(empty dir) = %v, want an error telling to run make test-deps", err)
	}
}

// A proxy function hands its event to the handler and answers what the
// handler says: JSON as a value, other text as it is, a failure status as a
// function error carrying the body. The handler's request has the
// invocation's deadline.
func TestLambdaProxy(t *testing.T) {
	ep := Start(t)
	arn := LambdaProxy(t, ep, "echo", 30, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var event map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &event); err != nil {
			http.Error(w, "not JSON: "+string(body), http.StatusBadRequest)
			return
		}
		deadline, ok := r.Context().Deadline()
		if !ok || time.Until(deadline) > 30*time.Second {
			http.Error(w, "no deadline within the function's timeout", http.StatusInternalServerError)
			return
		}
		switch event["say"] {
		case "json":
			_, _ = w.Write([]byte(`{"got": ` + string(body) + `}`))
		case "text":
			_, _ = w.Write([]byte(`plain text`))
		default:
			http.Error(w, "refused: "+event["say"].(string), http.StatusInternalServerError)
		}
	}))
	lc := lambda.NewFromConfig(ep.Config)
	invoke := func(payload string) *lambda.InvokeOutput {
		t.Helper()
		out, err := lc.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(arn), Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := invoke(`{"say": "json", "n": 1}`)
	var got map[string]any
	if err := json.Unmarshal(out.Payload, &got); err != nil || out.FunctionError != nil {
		t.Fatalf("json: %s (%v), function error %v", out.Payload, err, aws.ToString(out.FunctionError))
	}
	if e, _ := got["got"].(map[string]any); e == nil || e["say"] != "json" || e["n"] != float64(1) {
		t.Errorf("json: answered %v, want the event back", got)
	}
	if out := invoke(`{"say": "text"}`); string(out.Payload) != "plain text" && string(out.Payload) != `"plain text"` {
		t.Errorf("text: answered %s", out.Payload)
	}
	out = invoke(`{"say": "no"}`)
	if out.FunctionError == nil || !strings.Contains(string(out.Payload), "refused: no") {
		t.Errorf("failure: function error %v, payload %s; want a function error with the body", aws.ToString(out.FunctionError), out.Payload)
	}
}
