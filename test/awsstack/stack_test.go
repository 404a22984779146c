// Package awsstack deploys the real CDK app (infra/) into MiniStack with
// `cdk bootstrap` and `cdk deploy` (scripts/cdk-deploy-ministack.sh), then
// drives the deployed API through API Gateway and the same requests against
// a local server, and requires the same answers.
package awsstack

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/google/uuid"
	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/ministack"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// outputs is what the deploy script writes with OUTPUTS=<file>.
type outputs struct {
	Endpoint      string `json:"endpoint"`
	API           string `json:"api"`
	TablePrefix   string `json:"table_prefix"`
	SecretsPrefix string `json:"secrets_prefix"`
}

// clientSecret is the provider's client secret in this test: it must land in
// Secrets Manager and nowhere else.
const clientSecret = "awsstack-client-secret-4f1c"

func TestDeployedStackAnswersLikeTheLocalServer(t *testing.T) {
	root, err := ministack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := deployStack(t, root)
	cfg := ministack.ConfigFor(out.Endpoint)

	keys := &auth.Keys{Store: dynamo.New(cfg, dynamo.Options{TablePrefix: out.TablePrefix})}
	org, _, err := keys.EnsureOrganization(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	awsKey, err := keys.Create(context.Background(), org.ID)
	if err != nil {
		t.Fatal(err)
	}
	local, localKey := startLocal(t, root)
	stack := &target{name: "AWS", base: out.API, key: awsKey}
	here := &target{name: "local", base: local, key: localKey}

	same := func(method, path string, body any) (map[string]any, map[string]any) {
		t.Helper()
		a, aStatus := stack.do(t, method, path, body)
		l, lStatus := here.do(t, method, path, body)
		if aStatus != lStatus || !reflect.DeepEqual(normalize(a), normalize(l)) {
			t.Fatalf("%s %s answers differ:\n AWS   %d %s\n local %d %s", method, path, aStatus, a, lStatus, l)
		}
		var am, lm map[string]any
		_ = json.Unmarshal(a, &am)
		_ = json.Unmarshal(l, &lm)
		return am, lm
	}

	// A provider: its secret goes to Secrets Manager, not to the table or
	// the answer.
	provider := map[string]any{"provider_id": "github-" + uuid.NewString()[:8], "name": "GitHub",
		"client_id": "Iv1.abc", "client_secret": clientSecret,
		"auth_url": "https://github.com/login/oauth/authorize", "token_url": "https://github.com/login/oauth/access_token"}
	created, _ := same("POST", "/v2/auth/providers", provider)
	if strings.Contains(fmt.Sprint(created), clientSecret) {
		t.Fatalf("the provider's answer shows its secret: %v", created)
	}
	checkSecretPlacement(t, cfg, out)

	// A deployment (its lifecycle then goes on in the background).
	same("POST", "/v2/deployments", map[string]any{"name": "agent", "source": "external_docker",
		"source_config":          map[string]any{"custom_url": "https://agent.example.com"},
		"source_revision_config": map[string]any{"image_uri": "example/agent:1"}})

	// The long-term memory store: items under a namespace of this run (the
	// deployed tables outlive a test), a filtered search, the namespaces,
	// a delete, a missing item (null).
	ns := []string{"awsstack", uuid.NewString()[:8]}
	for _, it := range []struct{ key, kind string }{{"a", "note"}, {"b", "task"}, {"c", "note"}} {
		same("PUT", "/store/items", map[string]any{"namespace": append(ns, "docs"), "key": it.key,
			"value": map[string]any{"kind": it.kind}, "ttl": 60})
	}
	nsPath := strings.Join(append(ns, "docs"), ".")
	if got, _ := same("GET", "/store/items?namespace="+nsPath+"&key=b", nil); got["value"].(map[string]any)["kind"] != "task" {
		t.Errorf("GET /store/items on AWS: %v", got)
	}
	same("POST", "/store/items/search", map[string]any{"namespace_prefix": ns, "filter": map[string]any{"kind": "note"}})
	same("POST", "/store/namespaces", map[string]any{"prefix": ns})
	same("DELETE", "/store/items", map[string]any{"namespace": append(ns, "docs"), "key": "b"})
	same("GET", "/store/items?namespace="+nsPath+"&key=b", nil)

	// Runs: stateless echo, counter with 5 steps, approval interrupted then resumed.
	same("POST", "/runs/wait", map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	threadA, threadL := same("POST", "/threads", map[string]any{})
	pathA := "/threads/" + threadA["thread_id"].(string)
	pathL := "/threads/" + threadL["thread_id"].(string)
	both := func(path string, body any) {
		t.Helper()
		a, aStatus := stack.do(t, "POST", pathA+path, body)
		l, lStatus := here.do(t, "POST", pathL+path, body)
		if aStatus != lStatus || !reflect.DeepEqual(normalize(a), normalize(l)) {
			t.Fatalf("POST <thread>%s answers differ:\n AWS   %d %s\n local %d %s", path, aStatus, a, lStatus, l)
		}
	}
	both("/runs/wait", map[string]any{"assistant_id": "counter", "input": map[string]any{"steps": 5}})
	both("/runs/wait", map[string]any{"assistant_id": "approval", "input": map[string]any{"request": "deploy"}})
	both("/runs/wait", map[string]any{"assistant_id": "approval", "command": map[string]any{"resume": "yes"}})

	// Sizes (docs/aws.md, "Sizes"), through API Gateway, the run worker and
	// the stack's payload bucket: a thread whose state passes 1 MB (it
	// finishes, its state and a page of its history read back) and a
	// stateless result of 5 MB, answered whole.
	bigA, bigL := same("POST", "/threads", map[string]any{})
	bigPathA, bigPathL := "/threads/"+bigA["thread_id"].(string), "/threads/"+bigL["thread_id"].(string)
	onBig := func(method, path string, body any) []byte {
		t.Helper()
		a, aStatus := stack.do(t, method, bigPathA+path, body)
		l, lStatus := here.do(t, method, bigPathL+path, body)
		if aStatus != 200 || aStatus != lStatus || !reflect.DeepEqual(normalize(a), normalize(l)) {
			t.Fatalf("%s <thread>%s answers differ:\n AWS   %d %.300s (%d bytes)\n local %d %.300s (%d bytes)",
				method, path, aStatus, a, len(a), lStatus, l, len(l))
		}
		return a
	}
	big := strings.Repeat("0123456789abcdef", 600_000/16)
	if got := onBig("POST", "/runs/wait", map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": big}}}}); len(got) < 1_200_000 {
		t.Fatalf("the 1.2 MB state answered %d bytes", len(got))
	}
	onBig("GET", "/state", nil)
	onBig("POST", "/history", map[string]any{"limit": 1})
	huge := strings.Repeat("fedcba9876543210", 2_500_000/16)
	if got, _ := same("POST", "/runs/wait", map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": huge}}}}); !strings.Contains(fmt.Sprint(got), "echo: "+huge) {
		t.Fatalf("the 5 MB stateless result is not whole")
	}
	checkExpressRuns(t, cfg)
}

// checkExpressRuns: the stack's runs, which all start now, went through the
// run machine's Express front (the CDK app's default; MiniStack lists
// Express executions, AWS does not), and every run execution succeeded. (A
// run whose step outlasts the Express budget on a slow machine is handed
// to the Standard machine: allowed.)
func checkExpressRuns(t *testing.T, cfg aws.Config) {
	t.Helper()
	ctx := context.Background()
	c := sfn.NewFromConfig(cfg)
	machines, err := c.ListStateMachines(ctx, &sfn.ListStateMachinesInput{})
	if err != nil {
		t.Fatal(err)
	}
	// The last runs' executions may still be in their last state: wait
	// (generously) until none is running.
	var executions map[string]int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		executions = map[string]int{}
		for _, m := range machines.StateMachines {
			name := aws.ToString(m.Name)
			if !strings.HasSuffix(name, "-run-express") && !strings.HasSuffix(name, "-run") {
				continue
			}
			list, err := c.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: m.StateMachineArn})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list.Executions {
				executions[name[strings.LastIndex(name, "-run"):]+" "+string(e.Status)]++
			}
		}
		if executions["-run RUNNING"]+executions["-run-express RUNNING"] == 0 || time.Now().After(deadline) {
			break
		}
	}
	if executions["-run-express SUCCEEDED"] == 0 {
		t.Errorf("run executions by machine and status %v: none of the Express front", executions)
	}
	for k, n := range executions {
		if !strings.HasSuffix(k, " SUCCEEDED") {
			t.Errorf("%d run executions %s", n, k)
		}
	}
}

// deployStack runs the deploy script, which leaves MiniStack up; the test
// stops it (its process group) at the end, also when it fails.
func deployStack(t *testing.T, root string) outputs {
	t.Helper()
	file := filepath.Join(t.TempDir(), "outputs.json")
	cmd := exec.Command(filepath.Join(root, "scripts", "cdk-deploy-ministack.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUTPUTS="+file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGTERM) })
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cdk-deploy-ministack.sh: %v\n%s", err, log.String())
	}
	t.Logf("%s", log.String())
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out outputs
	if err := json.Unmarshal(raw, &out); err != nil || out.API == "" {
		t.Fatalf("outputs %s: %v", raw, err)
	}
	return out
}

// checkSecretPlacement: the client secret is a Secrets Manager secret under
// the stack's prefix, and no item of the providers table holds it.
func checkSecretPlacement(t *testing.T, cfg aws.Config, out outputs) {
	t.Helper()
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(cfg)
	list, err := sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list.SecretList {
		if !strings.HasPrefix(aws.ToString(s.Name), out.SecretsPrefix) {
			continue
		}
		v, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: s.ARN})
		if err != nil {
			continue
		}
		// The organization's provider secrets share one secret, a map of
		// base64 values (internal/secrets/aws, grouped).
		var values map[string]string
		name := strings.TrimPrefix(aws.ToString(s.Name), out.SecretsPrefix)
		if strings.HasPrefix(name, "providers/") && json.Unmarshal([]byte(aws.ToString(v.SecretString)), &values) == nil {
			for _, enc := range values {
				if b, err := base64.StdEncoding.DecodeString(enc); err == nil && string(b) == clientSecret {
					found = true
				}
			}
		}
	}
	if !found {
		t.Errorf("no secret under %s holds the provider's client secret", out.SecretsPrefix)
	}
	scan, err := dynamodb.NewFromConfig(cfg).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(out.TablePrefix + dynamo.TableProviders)})
	if err != nil {
		t.Fatal(err)
	}
	if len(scan.Items) == 0 {
		t.Errorf("the providers table is empty")
	}
	if items := fmt.Sprintf("%#v", scan.Items); strings.Contains(items, clientSecret) ||
		strings.Contains(items, base64.StdEncoding.EncodeToString([]byte(clientSecret))) {
		t.Errorf("the providers table holds the client secret")
	}
}

// startLocal starts `stepgraph serve` on 127.0.0.1 with a fresh data
// directory and returns its base URL and a key.
func startLocal(t *testing.T, root string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "stepgraph")
	build := exec.Command("go", "build", "-o", bin, "./cmd/stepgraph")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	key, err := exec.Command(bin, "keys", "create", "--org", "default", "--data", data).Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := exec.Command(bin, "serve", "-addr", addr, "-data", data, "-log-level", "warn")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() })
	base := "http://" + addr
	for i := 0; i < 100; i++ {
		if resp, err := http.Get(base + "/ok"); err == nil {
			resp.Body.Close()
			return base, strings.TrimSpace(string(key))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the local server did not start")
	return "", ""
}

type target struct{ name, base, key string }

func (g *target) do(t *testing.T, method, path string, body any) ([]byte, int) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, g.base+path, bytes.NewReader(b))
	req.Header.Set("X-Api-Key", g.key)
	req.Header.Set("Content-Type", "application/json")
	if method == "POST" && strings.HasPrefix(path, "/v2/") {
		// As a careful client would: a create delivered twice (MiniStack
		// sometimes hands a Lambda the same event again) answers once.
		req.Header.Set("Idempotency-Key", "awsstack-"+path)
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s %s: %v", g.name, method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return bytes.TrimSpace(raw), resp.StatusCode
}

// normalize drops what differs between two servers by construction: IDs
// and times (keys id, *_id, *_at), and the keys' order.
func normalize(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return strip(v)
}

func strip(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if k == "id" || strings.HasSuffix(k, "_id") || strings.HasSuffix(k, "_at") {
				continue
			}
			out[k] = strip(e)
		}
		return out
	case []any:
		for i := range x {
			x[i] = strip(x[i])
		}
	}
	return v
}
