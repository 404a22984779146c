package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/secrets/secretstest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func open(t *testing.T, prefix string) *Store {
	t.Helper()
	ep := awstest.Start(t)
	s, err := New(ep.Config, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	secretstest.Run(t, func(t *testing.T) secrets.Store {
		return open(t, awstest.Prefix(t))
	})
}

func TestContractPersistent(t *testing.T) {
	base := awstest.Prefix(t)
	secretstest.RunPersistent(t, func(t *testing.T, dir string) secrets.Store {
		// A new adapter on the same prefix is what a restart (or another
		// Lambda) sees; the prefix is derived from dir so each subtest has
		// its own.
		sum := sha256.Sum256([]byte(dir))
		return open(t, base+hex.EncodeToString(sum[:4])+"/")
	})
}

// TestCacheReadsOwnWritesAndOthersDeletes: a second adapter (another
// process) sees values at once; a delete by another process shows once the
// cache entry expires; a delete by this one at once.
func TestCacheReadsOwnWritesAndOthersDeletes(t *testing.T) {
	ctx := context.Background()
	prefix := awstest.Prefix(t)
	a, b := open(t, prefix), open(t, prefix)
	clock := time.Now()
	a.now = func() time.Time { return clock }

	ref, err := a.Create(ctx, "cache", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, ref); err != nil || string(got) != "v1" {
		t.Fatalf("other adapter Get = %q, %v", got, err)
	}
	if err := b.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Get after own Delete: %v, want ErrNotFound", err)
	}
	// a cached the value at Create: still served within the TTL...
	if got, err := a.Get(ctx, ref); err != nil || string(got) != "v1" {
		t.Fatalf("cached Get = %q, %v; want the cached value within the TTL", got, err)
	}
	// ...and gone once it expires.
	clock = clock.Add(DefaultCacheTTL + time.Second)
	if _, err := a.Get(ctx, ref); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Get after the TTL: %v, want ErrNotFound", err)
	}
}

func TestDeletedNameNeverBlocksCreate(t *testing.T) {
	ctx := context.Background()
	s := open(t, awstest.Prefix(t))
	for i := range 3 {
		ref, err := s.Create(ctx, "recreate", []byte("value"))
		if err != nil {
			t.Fatalf("Create #%d: %v", i, err)
		}
		if err := s.Delete(ctx, ref); err != nil {
			t.Fatalf("Delete #%d: %v", i, err)
		}
	}
}

func TestRefShape(t *testing.T) {
	for ref, want := range map[string]bool{
		"a-0123456789abcdef01234567":         true,
		"a/b.c_d-e-0123456789abcdef01234567": true,
		"-0123456789abcdef01234567":          false,
		"a-0123456789abcdef0123456":          false,
		"a-0123456789ABCDEF01234567":         false,
		"a:b-0123456789abcdef01234567":       false,
		"":                                   false,
	} {
		if got := validRef(ref); got != want {
			t.Errorf("validRef(%q) = %v, want %v", ref, got, want)
		}
	}
	if _, err := New(awstest.ConfigFor("http://127.0.0.1:1"), Options{Prefix: "bad prefix"}); err == nil {
		t.Error("New with a prefix holding a space: no error")
	}
}

// TestContractWithLostAnswers: the answer to the first attempt of every
// create and delete is lost after Secrets Manager acted on it, and the SDK
// retries; the contract still holds.
func TestContractWithLostAnswers(t *testing.T) {
	cfg := awstest.DropFirstAnswers(awstest.Start(t).Config, "secretsmanager.CreateSecret", "secretsmanager.DeleteSecret")
	secretstest.Run(t, func(t *testing.T) secrets.Store {
		s, err := New(cfg, Options{Prefix: awstest.Prefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	if awstest.Dropped(cfg) == 0 {
		t.Fatal("no answer was dropped: the test proves nothing")
	}
}
