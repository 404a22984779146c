package aws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/secrets/secretstest"
)

func openGrouped(t *testing.T, cfg awssdk.Config, prefix string) *Store {
	t.Helper()
	s, err := New(cfg, Options{Prefix: prefix, Grouped: true, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGroupedContract(t *testing.T) {
	cfg := awstest.Start(t).Config
	secretstest.Run(t, func(t *testing.T) secrets.Store { return openGrouped(t, cfg, awstest.Prefix(t)) })
}

// The answer to the first attempt of every write is lost after Secrets
// Manager acted on it and the SDK retries: a retried put is the same
// version (its ClientRequestToken), a retried stage move finds its own
// version current, a retried create its own secret.
func TestGroupedContractWithLostAnswers(t *testing.T) {
	cfg := awstest.DropFirstAnswers(awstest.Start(t).Config, "secretsmanager.CreateSecret",
		"secretsmanager.PutSecretValue", "secretsmanager.UpdateSecretVersionStage")
	secretstest.Run(t, func(t *testing.T) secrets.Store { return openGrouped(t, cfg, awstest.Prefix(t)) })
	if awstest.Dropped(cfg) == 0 {
		t.Fatal("no answer was dropped: the test proves nothing")
	}
}

// names lists the stage's secrets.
func names(t *testing.T, cfg awssdk.Config, prefix string) []string {
	t.Helper()
	var out []string
	p := secretsmanager.NewListSecretsPaginator(secretsmanager.NewFromConfig(cfg), &secretsmanager.ListSecretsInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.SecretList {
			if n := awssdk.ToString(s.Name); strings.HasPrefix(n, prefix) {
				out = append(out, strings.TrimPrefix(n, prefix))
			}
		}
	}
	return out
}

// Many values of two organizations' providers and a deployment make one
// secret per owner, not one per value; a value too large for a map gets
// its own; values stored one per secret (before grouping) stay readable.
func TestGroupedSecretsGrowWithOwners(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Start(t).Config
	prefix := awstest.Prefix(t)
	s := openGrouped(t, cfg, prefix)
	refs := map[string][]byte{}
	for i := range 10 {
		for _, hint := range []string{"providers/org-a/p" + fmt.Sprint(i), "providers/org-b/p" + fmt.Sprint(i), "deployments/dep-1"} {
			v := []byte(fmt.Sprintf("value %s %d", hint, i))
			ref, err := s.Create(ctx, hint, v)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(ref, hint+"-") {
				t.Errorf("ref %q does not begin with its hint", ref)
			}
			refs[ref] = v
		}
	}
	large := bytes.Repeat([]byte("x"), 50_000)
	largeRef, err := s.Create(ctx, "deployments/dep-1", large)
	if err != nil {
		t.Fatal(err)
	}
	refs[largeRef] = large
	legacy, err := New(cfg, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	oldRef, err := legacy.Create(ctx, "orgs/org-a/webhook", []byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	refs[oldRef] = []byte("old")
	for ref, want := range refs {
		if got, err := s.Get(ctx, ref); err != nil || !bytes.Equal(got, want) {
			t.Errorf("Get(%q) = %d bytes, %v; want %d bytes", ref, len(got), err, len(want))
		}
	}
	got := names(t, cfg, prefix)
	want := map[string]bool{"providers/org-a/values.0": true, "providers/org-b/values.0": true, "deployments/dep-1/values.0": true,
		largeRef: true, oldRef: true}
	if len(got) != len(want) {
		t.Errorf("secrets %v: want the %d of %v", got, len(want), want)
	}
	for _, n := range got {
		if !want[n] {
			t.Errorf("unexpected secret %q", n)
		}
	}
	for ref := range refs {
		if err := s.Delete(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
			t.Errorf("Get(%q) after Delete: %v", ref, err)
		}
	}
}

// Writers on one map at once, from different adapters (different Lambdas),
// lose no value: creates, rotations (create a new value, delete the old)
// and deletes all land.
func TestGroupedConcurrentWritesLoseNothing(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Start(t).Config
	prefix := awstest.Prefix(t)
	const writers = 8
	old := make([]string, writers)
	for i := range old {
		ref, err := openGrouped(t, cfg, prefix).Create(ctx, "deployments/dep-x", []byte(fmt.Sprint("old ", i)))
		if err != nil {
			t.Fatal(err)
		}
		old[i] = ref
	}
	created := make([]string, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := openGrouped(t, cfg, prefix)
			if created[i], errs[i] = s.Create(ctx, "deployments/dep-x", []byte(fmt.Sprint("new ", i))); errs[i] != nil {
				return
			}
			errs[i] = s.Delete(ctx, old[i]) // the rotation's second half
		}()
	}
	wg.Wait()
	s := openGrouped(t, cfg, prefix)
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if got, err := s.Get(ctx, created[i]); err != nil || string(got) != fmt.Sprint("new ", i) {
			t.Errorf("value %d after concurrent writes: %q, %v", i, got, err)
		}
		if _, err := s.Get(ctx, old[i]); !errors.Is(err, secrets.ErrNotFound) {
			t.Errorf("rotated-out value %d: %v, want ErrNotFound", i, err)
		}
	}
	if got := names(t, cfg, prefix); len(got) != 1 || got[0] != "deployments/dep-x/values.0" {
		t.Errorf("secrets %v, want the deployment's one", got)
	}
}

func TestGroupedRefShape(t *testing.T) {
	for ref, want := range map[string]string{
		"providers/o/p-0123456789abcdef01234567@0":  "providers/o/values.0",
		"deployments/d-0123456789abcdef01234567@3":  "deployments/d/values.3",
		"a-0123456789abcdef01234567@1":              "a/values.1",
		"providers/o/p-0123456789abcdef01234567":    "",
		"providers/o/p-0123456789abcdef01234567@01": "",
		"providers/o/p-0123456789abcdef01234567@-1": "",
		"providers/o/p-0123456789abcdef01234567@64": "",
		"providers/o/p-0123456789abcdef0123456@0":   "",
		"providers/o/p@0123456789abcdef01234567@0":  "",
		"@0": "",
	} {
		name, _, ok := groupedRef(ref)
		if ok != (want != "") || name != want {
			t.Errorf("groupedRef(%q) = %q, %v; want %q", ref, name, ok, want)
		}
	}
}

// Options.Tags tags every new secret, grouped or one per value, from its
// name: the org tag the run worker's tenant sessions are held to.
func TestNewSecretsAreTagged(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Start(t).Config
	prefix := awstest.Prefix(t)
	orgOf := func(name string) map[string]string {
		parts := strings.SplitN(name, "/", 3)
		if len(parts) < 3 || parts[0] == "deployments" {
			return nil
		}
		return map[string]string{"org": parts[1]}
	}
	client := secretsmanager.NewFromConfig(cfg)
	tagsOf := func(name string) map[string]string {
		out, err := client.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: awssdk.String(prefix + name)})
		if err != nil {
			t.Fatal(err)
		}
		tags := map[string]string{}
		for _, tag := range out.Tags {
			tags[awssdk.ToString(tag.Key)] = awssdk.ToString(tag.Value)
		}
		return tags
	}
	for _, grouped := range []bool{true, false} {
		s, err := New(cfg, Options{Prefix: prefix, Grouped: grouped, CacheTTL: -1, Tags: orgOf})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			hint string
			want map[string]string
		}{
			{"providers/org-a/p1", map[string]string{"org": "org-a"}},
			{"orgs/org-b/webhook", map[string]string{"org": "org-b"}},
			{"deployments/dep-1", map[string]string{}},
		} {
			ref, err := s.Create(ctx, c.hint, []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			name := ref
			if grouped {
				name, _, _ = groupedRef(ref)
			}
			// Every secret also has its stage's tag (the teardown's).
			got := tagsOf(name)
			if got[TagKey] != prefix {
				t.Errorf("grouped %v: %s tagged %v, without %s=%s", grouped, name, got, TagKey, prefix)
			}
			delete(got, TagKey)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("grouped %v: %s tagged %v, want %v", grouped, name, got, c.want)
			}
		}
	}
}
