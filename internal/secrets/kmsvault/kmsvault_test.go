package kmsvault

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/secrets"
	"github.com/stepgraph/stepgraph/internal/secrets/secretstest"
	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// setup makes, on the emulator, the providers table of a fresh prefix and
// a KMS key, and returns what New needs.
func setup(t *testing.T, cfg awssdk.Config) Options {
	t.Helper()
	ctx := context.Background()
	prefix := awstest.Prefix(t)
	if err := dynamo.New(cfg, dynamo.Options{TablePrefix: prefix}).CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	k, err := kms.NewFromConfig(cfg).CreateKey(ctx, &kms.CreateKeyInput{Description: awssdk.String("stepgraph vault test")})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Table: prefix + dynamo.TableProviders, KeyID: awssdk.ToString(k.KeyMetadata.Arn)}
}

func open(t *testing.T, cfg awssdk.Config, opts Options) *Store {
	t.Helper()
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	cfg := awstest.Start(t).Config
	secretstest.Run(t, func(t *testing.T) secrets.Store { return open(t, cfg, setup(t, cfg)) })
}

func TestContractWithoutDataKeyCache(t *testing.T) {
	cfg := awstest.Start(t).Config
	secretstest.Run(t, func(t *testing.T) secrets.Store {
		o := setup(t, cfg)
		o.DataKeyTTL = -1
		return open(t, cfg, o)
	})
}

func TestContractPersistent(t *testing.T) {
	cfg := awstest.Start(t).Config
	byDir := map[string]Options{}
	secretstest.RunPersistent(t, func(t *testing.T, dir string) secrets.Store {
		// A new adapter on the same table and key is what a restart (or
		// another Lambda) sees.
		o, ok := byDir[dir]
		if !ok {
			o = setup(t, cfg)
			byDir[dir] = o
		}
		return open(t, cfg, o)
	})
}

// TestContractWithLostAnswers: the answer to the first attempt of every
// put and delete is lost after DynamoDB acted on it, and the SDK retries;
// the contract still holds.
func TestContractWithLostAnswers(t *testing.T) {
	ep := awstest.Start(t)
	cfg := awstest.DropFirstAnswers(ep.Config, "DynamoDB_20120810.PutItem", "DynamoDB_20120810.DeleteItem")
	secretstest.Run(t, func(t *testing.T) secrets.Store { return open(t, cfg, setup(t, ep.Config)) })
	if awstest.Dropped(cfg) == 0 {
		t.Fatal("no answer was dropped: the test tested nothing")
	}
}

// TestItemHoldsNoPlaintext: what DynamoDB keeps is the wrapped data key,
// a nonce and the ciphertext; neither the value nor the data key.
func TestItemHoldsNoPlaintext(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Start(t).Config
	o := setup(t, cfg)
	s := open(t, cfg, o)
	value := []byte("gho_the-token-value-" + strings.Repeat("x", 20))
	ref, err := s.Create(ctx, "agentauth/org/github/u", value)
	if err != nil {
		t.Fatal(err)
	}
	out, err := dynamodb.NewFromConfig(cfg).GetItem(ctx, &dynamodb.GetItemInput{TableName: &o.Table, Key: key(ref)})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem: %v, %v", out, err)
	}
	var dk []byte
	for _, k := range s.sealing {
		dk = k.plain
	}
	for name, av := range out.Item {
		var raw []byte
		switch v := av.(type) {
		case *ddbtypes.AttributeValueMemberB:
			raw = v.Value
		case *ddbtypes.AttributeValueMemberS:
			raw = []byte(v.Value)
		}
		if strings.Contains(string(raw), "gho_the-token") || (dk != nil && strings.Contains(string(raw), string(dk))) {
			t.Errorf("attribute %s holds the value or the data key", name)
		}
	}
}

// TestTamperedOrMovedItemDoesNotOpen: the ciphertext is bound to its
// reference (GCM additional data) and the data key to the hint (KMS
// encryption context): an item copied under another reference, or with a
// changed byte, fails without revealing anything.
func TestTamperedOrMovedItemDoesNotOpen(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Start(t).Config
	o := setup(t, cfg)
	o.DataKeyTTL = -1 // every open asks KMS, so the context is checked there
	s := open(t, cfg, o)
	db := dynamodb.NewFromConfig(cfg)
	ref, err := s.Create(ctx, "agentauth/org-a/github/user-1", []byte("secret-of-user-1"))
	if err != nil {
		t.Fatal(err)
	}
	item, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &o.Table, Key: key(ref)})
	if err != nil {
		t.Fatal(err)
	}
	put := func(to string, change func(map[string]ddbtypes.AttributeValue)) {
		it := map[string]ddbtypes.AttributeValue{}
		for k, v := range item.Item {
			it[k] = v
		}
		for k, v := range key(to) {
			it[k] = v
		}
		if change != nil {
			change(it)
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &o.Table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	suffix := ref[len(ref)-suffixHexLen:]
	cases := map[string]struct {
		ref    string
		change func(map[string]ddbtypes.AttributeValue)
	}{
		"another user's hint":      {ref: "agentauth/org-a/github/user-2-" + suffix},
		"another organization's":   {ref: "agentauth/org-b/github/user-1-" + suffix},
		"same hint, other suffix":  {ref: "agentauth/org-a/github/user-1-" + strings.Repeat("0", suffixHexLen)},
		"ciphertext byte flipped":  {ref: "agentauth/org-a/github/user-1-" + strings.Repeat("1", suffixHexLen), change: flip("sealed")},
		"wrapped key byte flipped": {ref: "agentauth/org-a/github/user-1-" + strings.Repeat("2", suffixHexLen), change: flip("key")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			put(c.ref, c.change)
			v, err := s.Get(ctx, c.ref)
			if err == nil {
				t.Fatalf("Get = %q, want an error", v)
			}
			if errors.Is(err, secrets.ErrNotFound) || strings.Contains(err.Error(), "secret-of-user-1") {
				t.Fatalf("error %v: want a refusal that is not ErrNotFound and holds no value", err)
			}
		})
	}
	if v, err := s.Get(ctx, ref); err != nil || string(v) != "secret-of-user-1" {
		t.Fatalf("the original: %q, %v", v, err)
	}
}

func flip(attr string) func(map[string]ddbtypes.AttributeValue) {
	return func(it map[string]ddbtypes.AttributeValue) {
		b := append([]byte(nil), it[attr].(*ddbtypes.AttributeValueMemberB).Value...)
		b[len(b)/2] ^= 0x01
		it[attr] = &ddbtypes.AttributeValueMemberB{Value: b}
	}
}

// TestDataKeyCacheIsBounded: a data key seals at most DataKeyUses values
// and lives at most DataKeyTTL; the caches hold at most DataKeyCacheSize
// keys; reads of a warm store ask KMS nothing.
func TestDataKeyCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	cfg := awstest.Start(t).Config
	o := setup(t, cfg)
	o.DataKeyUses, o.DataKeyCacheSize = 3, 2
	s := open(t, cfg, o)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	calls := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.kmsCalls }

	var refs []string
	for range 4 {
		ref, err := s.Create(ctx, "h", []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if got := calls(); got != 2 {
		t.Fatalf("4 creates with DataKeyUses 3: %d KMS calls, want 2", got)
	}
	for _, ref := range refs {
		if _, err := s.Get(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls(); got != 2 {
		t.Fatalf("reads of values this store sealed: %d KMS calls, want still 2", got)
	}
	// Another instance (a cold function) unwraps each data key once.
	cold := open(t, cfg, o)
	for range 2 {
		for _, ref := range refs {
			if _, err := cold.Get(ctx, ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cold.kmsCalls != 2 {
		t.Fatalf("cold reads of values under 2 data keys, twice: %d KMS calls, want 2", cold.kmsCalls)
	}
	// Past the TTL the key is made again.
	clock = clock.Add(DefaultDataKeyTTL + time.Second)
	if _, err := s.Create(ctx, "h", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got := calls(); got != 3 {
		t.Fatalf("a create after the TTL: %d KMS calls, want 3", got)
	}
	for _, h := range []string{"a", "b", "c", "d"} {
		if _, err := s.Create(ctx, h, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sealing) > 2 || len(s.opening) > 2 {
		t.Fatalf("caches hold %d and %d keys, want at most 2", len(s.sealing), len(s.opening))
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
		if _, got := hintOf(ref); got != want {
			t.Errorf("hintOf(%q) ok = %v, want %v", ref, got, want)
		}
	}
	if _, err := New(awstest.ConfigFor("http://127.0.0.1:1"), Options{Table: "t"}); err == nil {
		t.Error("New without a key: no error")
	}
}
