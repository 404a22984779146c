package dynamo

import (
	"context"
	"errors"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// A parked run's token is a small item of its own in the thread's
// partition, PARK#<run id>, next to the run: the worker that ends a run
// looks for parked runs after every run (runs.Parking), so that look must
// cost next to nothing when there are none (one query of the PARK# items,
// which reads none, rather than of the thread's run items, which grow with
// the conversation and hold results of up to 16 KiB (dynamo.PayloadThreshold)). It goes with its
// thread (DeleteThread deletes the whole partition).
func parkSK(runID string) string { return "PARK#" + runID }

// ParkRun implements store.RunParking: a put of the park item (replacing
// a token of the same run), then a strongly consistent read of the run; a
// run found no longer pending takes its park item back and reports false.
// A run claimed after the read leaves a park item that ParkedRuns skips
// and removes. Both writes are unconditional: safe for the SDK to retry.
func (db *DB) ParkRun(ctx context.Context, orgID, threadID, runID, token string) (bool, error) {
	if orgID == "" || threadID == "" || runID == "" {
		return false, store.ErrNotFound
	}
	k := key(threadPK(orgID, threadID), parkSK(runID))
	it := item(key(threadPK(orgID, threadID), parkSK(runID))) // its own map: k stays a key
	it["token"], it["run"] = s(token), s(runID)
	if _, err := db.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.tables.threads), Item: it}); err != nil {
		return false, wrap("park run", err)
	}
	r, err := db.Run(ctx, orgID, threadID, runID)
	if err == nil && r.Status == store.RunPending {
		return true, nil
	}
	if _, derr := db.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(db.tables.threads), Key: k}); derr != nil {
		return false, errors.Join(err, wrap("park run", derr))
	}
	return false, err // nil: no longer pending; ErrNotFound: gone
}

// ParkedRuns implements store.RunParking: the thread's park items, each
// checked against its run (one read per parked run); one whose run is no
// longer pending is removed.
func (db *DB) ParkedRuns(ctx context.Context, orgID, threadID string) ([]store.ParkedRun, error) {
	if orgID == "" || threadID == "" {
		return nil, nil
	}
	parks, err := db.queryPartition(ctx, db.tables.threads, threadPK(orgID, threadID), "PARK#")
	if err != nil {
		return nil, wrap("parked runs", err)
	}
	var out []store.ParkedRun
	for _, p := range parks {
		r, err := db.Run(ctx, orgID, threadID, p.str("run"))
		switch {
		case err == nil && r.Status == store.RunPending:
			out = append(out, store.ParkedRun{Run: r, Token: p.str("token")})
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		_, err = db.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(db.tables.threads),
			Key: map[string]types.AttributeValue{"pk": p["pk"], "sk": p["sk"]}})
		if err != nil {
			return nil, wrap("parked runs", err)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { // start order, as the claim's
		a, b := out[i].Run, out[j].Run
		if !a.NotBefore.Equal(b.NotBefore) {
			return a.NotBefore.Before(b.NotBefore)
		}
		return a.CreatedAt.Before(b.CreatedAt)
	})
	return out, nil
}
