package lambdaapp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/lambdaruntime"
	payloadss3 "github.com/stepgraph/stepgraph/internal/payloads/s3"
	secretsaws "github.com/stepgraph/stepgraph/internal/secrets/aws"
)

// teardownStage is what one stage made at run time on the emulator: its
// runtime functions (through the real provisioner) and its secrets
// (through the real secrets adapter).
type teardownStage struct {
	prefix, secretsPrefix string
	functions             []string
	secrets               []string // names
	store                 *secretsaws.Store
	provisioner           *lambdaruntime.Provisioner
}

func newTeardownStage(t *testing.T, cfg aws.Config, prefix, secretsPrefix string) *teardownStage {
	t.Helper()
	ctx := t.Context()
	store, err := secretsaws.New(cfg, secretsaws.Options{Prefix: secretsPrefix, Grouped: true})
	if err != nil {
		t.Fatal(err)
	}
	st := &teardownStage{prefix: prefix, secretsPrefix: secretsPrefix, store: store,
		provisioner: &lambdaruntime.Provisioner{Client: awslambda.NewFromConfig(cfg), NamePrefix: prefix,
			RoleARN: "arn:aws:iam::000000000000:role/stepgraph-runtime", LogGroup: "/aws/lambda/" + prefix + "runtimes",
			Poll: 100 * time.Millisecond, ReadyWait: time.Minute}}
	for range 2 {
		id := randomUUID(t)
		// Two versions each: the teardown deletes a function with all of them.
		for _, image := range []string{"agent:1", "agent:2"} {
			if _, err := st.provisioner.EnsureRuntime(ctx, id, "000000000000.dkr.ecr.us-east-1.amazonaws.com/"+image); err != nil {
				t.Fatal(err)
			}
		}
		st.functions = append(st.functions, lambdaruntime.FunctionName(prefix, id))
		if _, err := store.Create(ctx, "deployments/"+id+"/API_KEY", []byte("value of "+id)); err != nil {
			t.Fatal(err)
		}
	}
	st.secrets = secretNames(t, cfg, secretsPrefix)
	if len(st.secrets) != 2 {
		t.Fatalf("secrets under %s: %v, want one per deployment", secretsPrefix, st.secrets)
	}
	return st
}

// secretNames lists the secrets named under prefix.
func secretNames(t *testing.T, cfg aws.Config, prefix string) []string {
	t.Helper()
	var names []string
	pages := secretsmanager.NewListSecretsPaginator(secretsmanager.NewFromConfig(cfg), &secretsmanager.ListSecretsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.SecretList {
			if name := aws.ToString(e.Name); strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
	}
	return names
}

func randomUUID(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// The stack's teardown on the emulator: two stages made runtime functions
// and secrets; deleting one stage's custom resource deletes its functions
// (every version), its secrets and its payloads, and nothing of the other
// stage — whose names begin like the first's (its prefix is the first's
// plus "rt-", its secrets prefix under the first's), so only the tags tell
// them apart — nor a secret an operator put under the first's prefix.
// Running it again finds nothing and succeeds; a stage that retains its
// data keeps its secrets.
func TestTeardownOnMiniStack(t *testing.T) {
	ep := awstest.Start(t)
	ctx := t.Context()
	// A short unique prefix: a runtime's name adds 35 characters, and
	// Lambda allows 64.
	unique := awstest.Prefix(t)
	base := "td" + strings.ToLower(unique[len(unique)-9:])
	a := newTeardownStage(t, ep.Config, base, base[:len(base)-1]+"/")
	b := newTeardownStage(t, ep.Config, base+"rt-", a.secretsPrefix+"b/")
	sm := secretsmanager.NewFromConfig(ep.Config)
	operator := a.secretsPrefix + "store/embeddings-key"
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(operator), SecretString: aws.String("sk")}); err != nil {
		t.Fatal(err)
	}
	lc := awslambda.NewFromConfig(ep.Config)
	// A runtime made before runtimes were tagged is tagged by its next
	// revision; one never deployed again keeps no tag, and is left.
	untagged := func(id string) string {
		name := lambdaruntime.FunctionName(a.prefix, id)
		if _, err := lc.CreateFunction(ctx, &awslambda.CreateFunctionInput{FunctionName: aws.String(name),
			PackageType: lambdatypes.PackageTypeImage, Role: aws.String(a.provisioner.RoleARN),
			Code: &lambdatypes.FunctionCode{ImageUri: aws.String("000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:0")}}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	oldID := randomUUID(t)
	a.functions = append(a.functions, untagged(oldID))
	if _, err := a.provisioner.EnsureRuntime(ctx, oldID, "000000000000.dkr.ecr.us-east-1.amazonaws.com/agent:1"); err != nil {
		t.Fatal(err)
	}
	stray := untagged(randomUUID(t))
	got, err := lc.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(a.functions[0])})
	if err != nil {
		t.Fatal(err)
	}
	if got.Tags[lambdaruntime.TagKey] != a.prefix {
		t.Errorf("runtime function tags %v, want %s=%s", got.Tags, lambdaruntime.TagKey, a.prefix)
	}
	if lg := got.Configuration.LoggingConfig; lg == nil || aws.ToString(lg.LogGroup) != a.provisioner.LogGroup {
		t.Errorf("runtime function logging %+v, want the stage's log group %s", lg, a.provisioner.LogGroup)
	}

	bucket := payloadss3.BucketName(awstest.Prefix(t))
	payloads := payloadss3.New(ep.Config, bucket, true)
	if err := payloads.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"x/one", "t/thread/two"} {
		if err := payloads.Put(ctx, key, []byte("payload")); err != nil {
			t.Fatal(err)
		}
	}

	td := &Teardown{Lambda: lc, NamePrefix: a.prefix, Secrets: a.store, Payloads: payloads, Log: slog.New(slog.DiscardHandler)}
	del := cfn.Event{RequestType: cfn.RequestDelete, ResourceProperties: map[string]any{TeardownRetainProperty: "false"}}
	for i := range 2 {
		id, _, err := td.Handle(ctx, del)
		if err != nil {
			t.Fatalf("teardown %d: %v", i+1, err)
		}
		if id != a.prefix+"teardown" {
			t.Errorf("physical id %q", id)
		}
	}
	functionsLeft := func(names []string) (left []string) {
		for _, name := range names {
			_, err := lc.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)})
			var missing *lambdatypes.ResourceNotFoundException
			if !errors.As(err, &missing) {
				left = append(left, name)
			}
		}
		return left
	}
	secretsLeft := func(names []string) (left []string) {
		for _, name := range names {
			if _, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)}); err == nil {
				left = append(left, name)
			}
		}
		return left
	}
	if left := functionsLeft(a.functions); len(left) > 0 {
		t.Errorf("stage A's runtime functions left after its teardown: %v", left)
	}
	for _, fn := range a.functions {
		for _, v := range []string{":1", ":2"} {
			if left := functionsLeft([]string{fn + v}); len(left) > 0 {
				t.Errorf("version %s left after the teardown", left)
			}
		}
	}
	if left := secretsLeft(a.secrets); len(left) > 0 {
		t.Errorf("stage A's secrets left after its teardown: %v", left)
	}
	if left := functionsLeft([]string{stray}); len(left) != 1 {
		t.Errorf("an untagged function named like stage A's runtimes was deleted: %s", stray)
	}
	if left := functionsLeft(b.functions); !slices.Equal(left, b.functions) {
		t.Errorf("stage B's runtime functions after A's teardown: %v of %v", left, b.functions)
	}
	if left := secretsLeft(b.secrets); len(left) != len(b.secrets) {
		t.Errorf("stage B's secrets after A's teardown: %v of %v", left, b.secrets)
	}
	if left := secretsLeft([]string{operator}); len(left) != 1 {
		t.Errorf("the operator's secret %s under stage A's prefix was deleted", operator)
	}
	if _, err := payloads.Get(ctx, "x/one"); err == nil {
		t.Error("stage A's payloads left after its teardown")
	}

	// Stage B retains its data: its functions go, its secrets stay.
	tdB := &Teardown{Lambda: lc, NamePrefix: b.prefix, Secrets: b.store, Log: slog.New(slog.DiscardHandler)}
	if _, _, err := tdB.Handle(ctx, cfn.Event{RequestType: cfn.RequestDelete,
		ResourceProperties: map[string]any{TeardownRetainProperty: "true"}}); err != nil {
		t.Fatal(err)
	}
	if left := functionsLeft(b.functions); len(left) > 0 {
		t.Errorf("stage B's runtime functions left after its teardown: %v", left)
	}
	if left := secretsLeft(b.secrets); len(left) != len(b.secrets) {
		t.Errorf("stage B retains its data, yet its secrets are %v of %v", left, b.secrets)
	}
	// Create and Update touch nothing.
	if _, _, err := tdB.Handle(ctx, cfn.Event{RequestType: cfn.RequestUpdate}); err != nil {
		t.Fatal(err)
	}
}
