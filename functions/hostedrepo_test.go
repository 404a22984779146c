package functions_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/awstest/codebuildlocal"
	"github.com/stepgraph/stepgraph/internal/lambdaapp"
	"github.com/stepgraph/stepgraph/internal/lambdaapp/sample"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
)

// A hosted_repo LangGraph app through the whole stage on the emulator:
// the deployment is created through the API handler (in this process);
// the provisioning machine runs the real deploy-worker Lambda, which reads
// the app's git repository (a local one: the workers here take
// lambdaapp.EnvLocalRepoDirs, test binaries only), uploads its source and
// starts a build on the stack's project — a local CodeBuild
// (codebuildlocal, reached through AWS_ENDPOINT_URL_CODEBUILD) that runs
// the real buildspec: the stepgraph CLI from the asset bucket, `stepgraph
// build` offline from the test wheelhouse, app.zip and its manifest to
// the payload bucket. The revision is BUILDING while the machine waits,
// then DEPLOYED: the zip is the deployment's function. A run of the app's
// memo graph through the stage's routes (the run machine and the real
// run-worker Lambda invoking the app's function) reaches its end, its
// get_store() calls going through the bridge: the function calls the
// stage's public URL (here the API handler served over TLS on 127.0.0.1;
// the function trusts its certificate through the deployment's secret
// SSL_CERT_FILE), whose app-calls routes store the item the API's /store
// then reads. Deleting the deployment removes the function and the
// build's objects.
func TestHostedRepoAppOnTheStage(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	log := testLog(t)
	root, err := sample.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := bootstraps()
	if err != nil {
		t.Fatal(err)
	}
	// Short: the app's function is named <prefix>rt-<deployment id>, at
	// most 64 characters.
	prefix := "hosted-" + strings.Split(awstest.Prefix(t), "-")[1] + "-"
	bucket := payloadss3.BucketName(prefix)
	project := prefix + "app-build"

	// The app's repository: the runtime's auth test app, committed.
	repos := t.TempDir()
	repo := filepath.Join(repos, "auth-app")
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(root, "runtimes", "python", "tests", "apps", "auth"))); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "the app"}} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	// The stack's CodeBuild project, run here.
	cb, err := codebuildlocal.Start(codebuildlocal.AppBuild(ep.Config, root, project, bucket, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()

	// The stage's public URL: the API handler over TLS, once it exists.
	var api atomic.Pointer[http.Handler]
	public := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := api.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "the API is not up yet", http.StatusServiceUnavailable)
	}))
	defer public.Close()
	certFile := filepath.Join(t.TempDir(), "stage.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: public.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}

	s, err := sample.Deploy(ctx, ep.Config, sample.Options{
		Prefix: prefix, Bootstraps: bin, WorkerTimeout: 120,
		WorkerEnv:    map[string]string{"AWS_ENDPOINT_URL_CODEBUILD": cb.URL},
		BuildProject: project, RuntimeRoleARN: "arn:aws:iam::000000000000:role/" + prefix + "runtime",
		LocalRepoDirs: repos, PublicURL: public.URL,
	})
	if err != nil {
		t.Fatalf("deploy the stack on the emulator: %v", err)
	}
	if err := codebuildlocal.PutCLI(ctx, ep.Config, root, bucket, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(ep.Config, func(o *s3.Options) { o.UsePathStyle = true })
	app, err := s.Open(lambdaapp.RoleAPI, log)
	if err != nil {
		t.Fatal(err)
	}
	api.Store(&app.Handler)
	org, _, err := app.Keys.EnsureOrganization(context.Background(), "hosted-"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	key, err := app.Keys.Create(context.Background(), org.ID)
	if err != nil {
		t.Fatal(err)
	}
	h := lambdaapp.NewHTTPHandler(app.Handler)
	h.Budget = 55 * time.Second
	c := &apiClient{t: t, h: h, key: key}
	must := func(status int, method, path string, body any) map[string]any {
		t.Helper()
		a := c.do(method, path, body)
		if a.status != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.body, status)
		}
		if a.body == "" {
			return nil
		}
		return a.json(t)
	}

	d := must(201, "POST", "/v2/deployments", map[string]any{"name": "memo-app", "source": "hosted_repo",
		"source_config":          map[string]any{"repo_url": "file://" + repo},
		"source_revision_config": map[string]any{"repo_ref": "main", "graph_config_path": "langgraph.json"},
		"secrets":                []map[string]any{{"name": "SSL_CERT_FILE", "value": certFile}}})
	dep, rev := d["id"].(string), d["latest_revision_id"].(string)
	revPath := "/v2/deployments/" + dep + "/revisions/" + rev
	seen := map[string]bool{}
	var last map[string]any
	for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		last = must(200, "GET", revPath, nil)
		status := fmt.Sprint(last["status"])
		seen[status] = true
		if status == "DEPLOYED" || strings.HasSuffix(status, "FAILED") {
			break
		}
	}
	if last["status"] != "DEPLOYED" {
		logs := c.do("POST", "/v1/projects/"+dep+"/deploy_logs", map[string]any{})
		t.Fatalf("the revision: %v (statuses seen %v); deploy logs %s; builds %v", last, seen, logs.body, cb.Builds())
	}
	if !seen["BUILDING"] {
		t.Errorf("the revision was never seen BUILDING: %v", seen)
	}
	if len(cb.Builds()) != 1 {
		t.Errorf("builds on the local CodeBuild: %v, want one", cb.Builds())
	}

	// A run of the memo graph through the stage, its store calls through
	// the bridge.
	th := must(200, "POST", "/threads", map[string]any{})["thread_id"].(string)
	_, body := c.wait("/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "memo",
		"input": map[string]any{"user": "ada", "fact": "likes teal"}})
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("the run's answer: %v %s", err, body)
	}
	if fmt.Sprint(out["known"]) != "[likes teal]" {
		t.Fatalf("the memo graph's answer: %s, want known [likes teal]", body)
	}
	item := must(200, "GET", "/store/items?namespace=memories.ada&key=note", nil)
	if v, _ := item["value"].(map[string]any); v["text"] != "likes teal" {
		t.Errorf("the item the graph stored through the bridge: %v", item)
	}
	// A second run of another thread reads it back through the bridge.
	th2 := must(200, "POST", "/threads", map[string]any{})["thread_id"].(string)
	if _, body := c.wait("/threads/"+th2+"/runs/wait", map[string]any{"assistant_id": "memo", "input": map[string]any{"user": "ada"}}); !strings.Contains(body, "likes teal") {
		t.Errorf("a second run: %s, want the stored note known", body)
	}

	// Deleting the deployment deletes its function and its build's objects.
	objects := func() []string {
		t.Helper()
		left, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("builds/" + dep + "/")})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range left.Contents {
			keys = append(keys, path.Base(aws.ToString(o.Key)))
		}
		slices.Sort(keys)
		return keys
	}
	if got := objects(); strings.Join(got, ",") != "app.zip,source.zip,stepgraph_build.json" {
		t.Errorf("the build's objects: %v", got)
	}
	must(204, "DELETE", "/v2/deployments/"+dep, nil)
	lc := lambda.NewFromConfig(ep.Config)
	function := lambdaruntime.FunctionName(prefix, dep)
	gone := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !gone; time.Sleep(250 * time.Millisecond) {
		if a := c.do("GET", "/v2/deployments/"+dep, nil); a.status == 404 {
			_, err := lc.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)})
			gone = err != nil
		}
	}
	if !gone {
		t.Errorf("the deployment or its function %s outlived the deletion", function)
	}
	if got := objects(); len(got) != 0 {
		t.Errorf("build objects after the deployment's deletion: %v", got)
	}
}
