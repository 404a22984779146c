package dynamo

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/store"
)

// The deployed stage's store (DeployedOptions): its tables have no queue
// index, the org and status indexes copy keys only, and no run carries
// queue or lease index keys, while runs still go through their life claimed
// by ID (as the Step Functions execution claims them), one at a time per
// thread. ClaimRun, which needs the indexes, fails.
func TestDeployedOptionsOmitClaimIndexes(t *testing.T) {
	ep := awstest.Start(t)
	db := New(ep.Config, DeployedOptions(awstest.Prefix(t)))
	must(t, "CreateTables", db.CreateTables(ctxT()))
	t.Cleanup(func() { _ = db.DeleteTables(ctxT()) })

	for _, table := range []string{db.tables.threads, db.tables.deployments} {
		d, err := db.client.DescribeTable(ctxT(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		must(t, "DescribeTable", err)
		for _, g := range d.Table.GlobalSecondaryIndexes {
			name := aws.ToString(g.IndexName)
			if name == indexQueue {
				t.Errorf("%s has index %s", table, name)
			}
			if name == indexLease {
				continue // kept for its other partitions; no run is in it (below)
			}
			if g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
				t.Errorf("%s index %s projects %v, want KEYS_ONLY", table, name, g.Projection)
			}
		}
	}

	org, thread := "org-"+uuid.NewString(), uuid.NewString()
	t0 := time.Unix(1_700_000_000, 0)
	add := func() store.Run {
		r := store.Run{ID: uuid.NewString(), OrgID: org, ThreadID: thread, MultitaskStrategy: "enqueue",
			NotBefore: t0, CreatedAt: t0, UpdatedAt: t0}
		_, _, err := db.AddRun(ctxT(), store.NewRun{Run: r, CreateThread: true})
		must(t, "AddRun", err)
		return r
	}
	first, second := add(), add()
	noIndexKeys := func(when string) {
		t.Helper()
		items, err := db.queryPartition(ctxT(), db.tables.threads, threadPK(org, thread), "")
		must(t, "query thread", err)
		for _, it := range items {
			for _, k := range []string{"qpk", "qsk", "lpk", "lsk"} {
				if _, ok := it[k]; ok {
					t.Errorf("%s: item %s carries %s", when, it.str("sk"), k)
				}
			}
		}
	}
	noIndexKeys("after AddRun")

	if _, _, err := db.ClaimRun(ctxT(), "w", t0, t0.Add(time.Hour), 0); !errors.Is(err, errNoClaimIndexes) {
		t.Errorf("ClaimRun without the indexes: %v, want errNoClaimIndexes", err)
	}
	if _, ok, err := db.ClaimRunByID(ctxT(), second.ID, "execution:2", t0, t0.Add(time.Hour), 0); err != nil || ok {
		t.Fatalf("ClaimRunByID of the second run on a thread = %v, %v: want not its turn", ok, err)
	}
	got, ok, err := db.ClaimRunByID(ctxT(), first.ID, "execution:1", t0, t0.Add(time.Hour), 0)
	if err != nil || !ok || got.Status != store.RunRunning {
		t.Fatalf("ClaimRunByID = %+v, %v, %v", got, ok, err)
	}
	renewed, err := db.RenewLease(ctxT(), first.ID, "execution:1", 0, t0.Add(2*time.Hour))
	must(t, "RenewLease", err)
	if !renewed.LeaseUntil.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("lease until %v after renewal", renewed.LeaseUntil)
	}
	noIndexKeys("while running")
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: thread, RunID: first.ID,
		LeaseOwner: "execution:1", Status: store.RunSuccess, ThreadStatus: store.ThreadIdle, Now: t0}))
	got, ok, err = db.ClaimRunByID(ctxT(), second.ID, "execution:2", t0, t0.Add(time.Hour), 0)
	if err != nil || !ok {
		t.Fatalf("ClaimRunByID of the next run = %v, %v", ok, err)
	}
	noIndexKeys("after the next claim")
	must(t, "FinishRun", db.FinishRun(ctxT(), store.FinishedRun{OrgID: org, ThreadID: thread, RunID: second.ID,
		LeaseOwner: "execution:2", Status: store.RunSuccess, ThreadStatus: store.ThreadIdle, Now: t0}))

	// The org index (keys only) still finds the thread, whole.
	found, err := db.SearchThreads(ctxT(), org, store.ThreadFilter{})
	must(t, "SearchThreads", err)
	if len(found) != 1 || found[0].ID != thread || found[0].Status != store.ThreadIdle {
		t.Errorf("SearchThreads = %+v, want the idle thread %s", found, thread)
	}
}
