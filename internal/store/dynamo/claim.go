package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stepgraph/stepgraph/internal/store"
)

// ClaimRunByID implements store.RunQueue. The run's marker item names its
// thread; a pending run is claimed with the same transaction as ClaimRun, on
// the thread's version and the organization's slots (so only the head of
// the thread's queue, on a thread without a running run, in an organization
// with a free slot, can be), a running one with an update conditioned on the
// owner and lease it was read with (it holds its slot already).
// RunOrganization is the organization of run runID, from its marker
// (store.ErrNotFound when there is none). Not a port's: the AWS root needs
// it to open the tenant session of a run execution whose input does not
// name the organization (started before inputs did).
func (db *DB) RunOrganization(ctx context.Context, runID string) (string, error) {
	m, err := db.get(ctx, db.tables.threads, runMarkerKey(runID))
	if err != nil {
		return "", wrap("run organization", err)
	}
	if m == nil {
		return "", store.ErrNotFound
	}
	return m.str("org"), nil
}

func (db *DB) ClaimRunByID(ctx context.Context, runID, owner string, now, leaseUntil time.Time, perOrg int) (store.Run, bool, error) {
	if runID == "" {
		return store.Run{}, false, store.ErrNotFound
	}
	m, err := db.get(ctx, db.tables.threads, runMarkerKey(runID))
	if err != nil {
		return store.Run{}, false, wrap("claim run", err)
	}
	if m == nil {
		return store.Run{}, false, store.ErrNotFound
	}
	k := key(threadPK(m.str("org"), m.str("thread")), runSK(runID))
	for attempt := 0; attempt < maxAttempts; attempt++ {
		it, err := db.get(ctx, db.tables.threads, k)
		if err != nil {
			return store.Run{}, false, wrap("claim run", err)
		}
		if it == nil {
			return store.Run{}, false, store.ErrNotFound
		}
		r, err := db.fullRun(ctx, it) // returned as stored when not claimed
		if err != nil {
			return store.Run{}, false, wrap("claim run", err)
		}
		var claimed store.Run
		var ok bool
		switch {
		case r.Status == store.RunRunning && (r.LeaseOwner == owner || !r.LeaseUntil.After(now)):
			claimed, ok, err = db.claimExpired(ctx, it, owner, now, leaseUntil)
			if errors.Is(err, errThreadGone) {
				return store.Run{}, false, store.ErrNotFound // its thread is being deleted
			}
		case r.Status == store.RunPending && !r.NotBefore.After(now):
			var res claimResult
			claimed, res, err = db.claimPending(ctx, it, owner, now, leaseUntil, perOrg)
			if err == nil && res != claimWon {
				return db.reread(ctx, k, r) // not its turn, no free slot, or lost a race: the caller comes back
			}
			ok = res == claimWon
		default:
			return r, false, nil // terminal, not yet, or another owner's
		}
		if err != nil {
			return store.Run{}, false, wrap("claim run", err)
		}
		if ok {
			return claimed, true, nil
		}
	}
	return store.Run{}, false, fmt.Errorf("dynamo: claim run %s: gave up after %d attempts under contention", runID, maxAttempts)
}

// reread returns the run as stored now (r when it vanished meanwhile).
func (db *DB) reread(ctx context.Context, k map[string]types.AttributeValue, r store.Run) (store.Run, bool, error) {
	it, err := db.get(ctx, db.tables.threads, k)
	if err != nil {
		return store.Run{}, false, wrap("claim run", err)
	}
	if it == nil {
		return store.Run{}, false, store.ErrNotFound
	}
	r, err = db.fullRun(ctx, it)
	return r, false, wrap("claim run", err)
}

// temporaryResultKey keys the result of a finished temporary run, kept
// after its thread was deleted (expiring through the table's TTL).
func temporaryResultKey(runID string) map[string]types.AttributeValue {
	return key("TRES#"+runID, "TRES")
}

// maxTemporaryResult bounds the result kept without a payload store: an
// item holds 400 KB. A larger one is then not kept (its waiter in the same
// process still gets it; a waiter in another Lambda would not, so the
// deployed functions always have a payload store, which keeps any size).
const maxTemporaryResult = 350_000

func (db *DB) keepTemporaryResult(ctx context.Context, f store.FinishedRun) error {
	if len(f.Result) > maxTemporaryResult && db.payloads == nil {
		return nil
	}
	it := item(temporaryResultKey(f.RunID))
	it["org"], it["result"] = s(f.OrgID), b(f.Result)
	it["exp"] = n(micros(f.Now.Add(store.TemporaryResultTTL)))
	it[ttlAttribute] = n(f.Now.Add(store.TemporaryResultTTL).Unix())
	_, err := db.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.tables.threads), Item: it})
	return err // an unconditional put: safe for the SDK to retry
}

// TemporaryResult implements store.RunQueue. DynamoDB's TTL deletes expired
// items within days, so expiry is checked here.
func (db *DB) TemporaryResult(ctx context.Context, orgID, runID string, now time.Time) ([]byte, error) {
	if orgID == "" || runID == "" {
		return nil, store.ErrNotFound
	}
	it, err := db.get(ctx, db.tables.threads, temporaryResultKey(runID))
	if err != nil {
		return nil, wrap("temporary result", err)
	}
	if it == nil || it.str("org") != orgID || !it.time("exp").After(now) {
		return nil, store.ErrNotFound
	}
	if res := it.bytes("result"); len(res) > 0 {
		return res, nil
	}
	return []byte("null"), nil
}
