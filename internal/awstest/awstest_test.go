package awstest

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
