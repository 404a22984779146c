package dynamo

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/store"
)

// readRecorder records the ConsistentRead of every GetItem the adapter sends.
type readRecorder struct {
	mu    sync.Mutex
	reads []bool
}

func (r *readRecorder) take() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reads
	r.reads = nil
	return out
}

func (r *readRecorder) config(cfg aws.Config) aws.Config {
	cfg = cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("recordReads",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if g, ok := in.Parameters.(*dynamodb.GetItemInput); ok {
					r.mu.Lock()
					r.reads = append(r.reads, aws.ToBool(g.ConsistentRead))
					r.mu.Unlock()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	return cfg
}

// Items never changed once written (API keys, organizations' names) are
// read eventually consistent, at half the read units, and a miss is read
// again strongly (a key used right after its creation is found); what
// changes in place stays strongly consistent (review #20). MiniStack is
// always consistent: the test checks what is asked, not replication.
func TestWrittenItemsReadEventually(t *testing.T) {
	openShared(t) // the tables
	rec := &readRecorder{}
	db := New(rec.config(awstest.Start(t).Config), Options{TablePrefix: sharedPrefix})
	ctx := context.Background()
	now := time.Now().UTC()
	org := store.Organization{ID: uuid.NewString(), Name: "consistency-" + uuid.NewString()[:8], CreatedAt: now}
	if err := db.CreateOrganization(ctx, org); err != nil {
		t.Fatal(err)
	}
	hash := uuid.NewString() + uuid.NewString()
	if err := db.CreateAPIKey(ctx, store.APIKey{ID: uuid.NewString(), OrgID: org.ID, Hash: hash, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	rec.take()
	eventual, thenStrong := []bool{false}, []bool{false, true}
	for _, step := range []struct {
		name    string
		do      func() error
		want    []bool
		missing bool
	}{
		{"a key", func() error { _, err := db.APIKeyByHash(ctx, hash); return err }, eventual, false},
		{"an unknown key", func() error { _, err := db.APIKeyByHash(ctx, "unknown-"+hash); return err }, thenStrong, true},
		{"an organization by name", func() error { _, err := db.OrganizationByName(ctx, org.Name); return err }, eventual, false},
		{"a missing secret reference", func() error { _, err := db.OrganizationSecretRef(ctx, org.ID, "nope"); return err }, thenStrong, true},
		{"a revoked key", func() error {
			if err := db.DeleteAPIKey(ctx, hash); err != nil {
				return err
			}
			rec.take()
			_, err := db.APIKeyByHash(ctx, hash)
			return err
		}, thenStrong, true},
		{"a thread (changes in place: strong)", func() error { _, err := db.Thread(ctx, org.ID, uuid.NewString()); return err }, []bool{true}, true},
	} {
		err := step.do()
		if step.missing != errors.Is(err, store.ErrNotFound) || (!step.missing && err != nil) {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := rec.take(); !slices.Equal(got, step.want) {
			t.Errorf("%s: reads (consistent) %v, want %v", step.name, got, step.want)
		}
	}
}
