package dynamo

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/awstest"
	"github.com/stepgraph/stepgraph/internal/store"
)

// readMeter counts, per operation, the items DynamoDB answered the
// adapter's reads with and their size by DynamoDB's rules (itemBytes): what
// a read costs in capacity and in the function's memory. Review #10: a
// page of a paginated API reads a page, not the whole partition.
type readMeter struct {
	mu    sync.Mutex
	items map[string]int
	bytes map[string]int
}

func (m *readMeter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items, m.bytes = map[string]int{}, map[string]int{}
}

func (m *readMeter) add(op string, its ...map[string]types.AttributeValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items == nil {
		m.items, m.bytes = map[string]int{}, map[string]int{}
	}
	for _, it := range its {
		m.items[op]++
		m.bytes[op] += itemBytes(it)
	}
}

func (m *readMeter) read(op string) (items, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[op], m.bytes[op]
}

func (m *readMeter) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for op, n := range m.items {
		fmt.Fprintf(&b, "%s: %d items, %d bytes; ", op, n, m.bytes[op])
	}
	return b.String()
}

func readMeterMiddleware(m *readMeter) func(*middleware.Stack) error {
	mw := middleware.InitializeMiddlewareFunc("readMeter", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		switch r := out.Result.(type) {
		case *dynamodb.QueryOutput:
			m.add("Query", r.Items...)
		case *dynamodb.GetItemOutput:
			if r.Item != nil {
				m.add("GetItem", r.Item)
			}
		case *dynamodb.ScanOutput:
			m.add("Scan", r.Items...)
		case *dynamodb.BatchGetItemOutput:
			for _, its := range r.Responses {
				m.add("BatchGetItem", its...)
			}
		}
		return out, md, err
	})
	// Added first, it sees what DynamoDB answered (before any of the
	// adapter's own handling of the answer).
	return func(st *middleware.Stack) error { return st.Initialize.Add(mw, middleware.After) }
}

// openMetered opens the adapter on the shared tables with m on its client.
func openMetered(t *testing.T, m *readMeter) *DB {
	t.Helper()
	ep := awstest.Start(t)
	openShared(t)
	client := dynamodb.NewFromConfig(ep.Config, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, readMeterMiddleware(m))
	})
	db := NewFromClient(client, Options{TablePrefix: sharedPrefix})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func meteredOrg(t *testing.T, db *DB) string {
	t.Helper()
	org := store.Organization{ID: uuid.NewString(), Name: "reads-" + uuid.NewString(), CreatedAt: time.Now().UTC()}
	if err := db.CreateOrganization(context.Background(), org); err != nil {
		t.Fatal(err)
	}
	return org.ID
}

// TestListRunsReadsAPage: a page of a thread's runs reads that page (and
// the offset's keys), not every run with its documents.
func TestListRunsReadsAPage(t *testing.T) {
	m := &readMeter{}
	db := openMetered(t, m)
	ctx := context.Background()
	org := meteredOrg(t, db)
	thread := uuid.NewString()
	const runs, kw = 40, 8_000
	kwargs := []byte(`{"input":"` + strings.Repeat("k", kw) + `"}`)
	var ids []string // newest first
	base := time.Now().UTC()
	for i := 0; i < runs; i++ {
		r := store.Run{ID: uuid.Must(uuid.NewV7()).String(), OrgID: org, ThreadID: thread, AssistantID: "a",
			Kwargs: kwargs, CreatedAt: base.Add(time.Duration(i) * time.Millisecond)}
		r.NotBefore, r.UpdatedAt = r.CreatedAt, r.CreatedAt
		if _, _, err := db.AddRun(ctx, store.NewRun{Run: r, CreateThread: i == 0}); err != nil {
			t.Fatal(err)
		}
		ids = append([]string{r.ID}, ids...)
	}
	for _, tc := range []struct {
		limit, offset int
	}{{5, 0}, {5, 30}, {20, 0}, {10, 38}} {
		t.Run(fmt.Sprintf("limit %d offset %d", tc.limit, tc.offset), func(t *testing.T) {
			m.reset()
			got, err := db.ListRuns(ctx, org, thread, "", tc.limit, tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			want := ids[min(tc.offset, runs):min(tc.offset+tc.limit, runs)]
			var gotIDs []string
			for _, r := range got {
				gotIDs = append(gotIDs, r.ID)
				if !bytes.Equal(r.Kwargs, kwargs) {
					t.Errorf("run %s: kwargs of %d bytes, want %d", r.ID, len(r.Kwargs), len(kwargs))
				}
			}
			if strings.Join(gotIDs, ",") != strings.Join(want, ",") {
				t.Fatalf("ListRuns = %v, want %v", gotIDs, want)
			}
			// What was read: the page's runs whole, the offset's by key and
			// status (~100 bytes each), the thread item.
			n, size := m.read("Query")
			if n > tc.offset+tc.limit {
				t.Errorf("ListRuns read %d run items, want at most %d (%v)", n, tc.offset+tc.limit, m)
			}
			if limit := len(want)*(kw+1_000) + tc.offset*200; size > limit {
				t.Errorf("ListRuns read %d bytes of runs, want at most %d: the offset's runs read whole? (%v)", size, limit, m)
			}
		})
	}
	t.Run("status", func(t *testing.T) {
		m.reset()
		got, err := db.ListRuns(ctx, org, thread, store.RunPending, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].ID != ids[2] || got[2].ID != ids[4] {
			t.Fatalf("ListRuns pending, limit 3 offset 2: %d runs", len(got))
		}
		if _, size := m.read("Query"); size > 3*(kw+1_000)+50*200 {
			t.Errorf("ListRuns with a status read %d bytes (%v)", size, m)
		}
	})
}

// TestSearchThreadsReadsAPage: a page of an organization's threads reads
// the index's keys up to the page and the page's threads; the threads the
// offset skips are not read.
func TestSearchThreadsReadsAPage(t *testing.T) {
	m := &readMeter{}
	db := openMetered(t, m)
	ctx := context.Background()
	org := meteredOrg(t, db)
	const threads = 60
	values := []byte(`{"v":"` + strings.Repeat("x", 20_000) + `"}`)
	var ids []string // newest first
	base := time.Now().UTC()
	for i := 0; i < threads; i++ {
		th := store.Thread{ID: uuid.NewString(), OrgID: org, Status: store.ThreadIdle, Metadata: []byte(fmt.Sprintf(`{"even":%v}`, i%2 == 0)),
			Values: values, CreatedAt: base.Add(time.Duration(i) * time.Millisecond)}
		th.UpdatedAt = th.CreatedAt
		if err := db.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		ids = append([]string{th.ID}, ids...)
	}
	m.reset()
	got, err := db.SearchThreads(ctx, org, store.ThreadFilter{Limit: 5, Offset: 40})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].ID != ids[40] || got[4].ID != ids[44] {
		t.Fatalf("SearchThreads limit 5 offset 40: %d threads", len(got))
	}
	if n, _ := m.read("GetItem"); n != 5 {
		t.Errorf("SearchThreads read %d threads, want the page's 5 (%v)", n, m)
	}
	if n, _ := m.read("Query"); n > 45 {
		t.Errorf("SearchThreads read %d index entries, want at most 45 (%v)", n, m)
	}

	// With a filter, threads are read until the page is full, not all.
	m.reset()
	got, err = db.SearchThreads(ctx, org, store.ThreadFilter{Metadata: []byte(`{"even":true}`), Limit: 3, Offset: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != ids[5] || got[2].ID != ids[9] { // the newest (i = 59) is odd
		t.Fatalf("SearchThreads even, limit 3 offset 2: %d threads", len(got))
	}
	if n, _ := m.read("GetItem"); n > 11 {
		t.Errorf("SearchThreads with a filter read %d threads, want at most 11 (%v)", n, m)
	}

	m.reset()
	n, err := db.CountThreads(ctx, org, store.ThreadFilter{})
	if err != nil || n != threads {
		t.Fatalf("CountThreads = %d, %v; want %d", n, err, threads)
	}
	if n, _ := m.read("GetItem"); n != 0 {
		t.Errorf("CountThreads without a filter read %d threads (%v)", n, m)
	}
}

// TestDeleteThreadReadsKeys: deleting a thread of large checkpoints reads
// their keys, not their data.
func TestDeleteThreadReadsKeys(t *testing.T) {
	m := &readMeter{}
	db := openMetered(t, m)
	ctx := context.Background()
	org := meteredOrg(t, db)
	th := store.Thread{ID: uuid.NewString(), OrgID: org, Status: store.ThreadIdle, CreatedAt: time.Now().UTC()}
	th.UpdatedAt = th.CreatedAt
	if err := db.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	const cps, size = 12, 50_000
	data := []byte(`{"v":"` + strings.Repeat("c", size) + `"}`)
	for i := 0; i < cps; i++ {
		cp := store.Checkpoint{ThreadID: th.ID, ID: uuid.Must(uuid.NewV7()).String(), CreatedAt: time.Now().UTC(), Data: data}
		if err := db.PutCheckpoint(ctx, org, cp); err != nil {
			t.Fatal(err)
		}
	}
	m.reset()
	if err := db.DeleteThread(ctx, org, th.ID); err != nil {
		t.Fatal(err)
	}
	n, read := m.read("Query")
	if n < cps {
		t.Fatalf("DeleteThread's query saw %d items, want the %d checkpoints at least (%v)", n, cps, m)
	}
	if read > n*200 {
		t.Errorf("DeleteThread read %d bytes for %d items: more than their keys (%v)", read, n, m)
	}
	if _, err := db.Thread(ctx, org, th.ID); err != store.ErrNotFound {
		t.Errorf("thread after DeleteThread: %v", err)
	}
}
