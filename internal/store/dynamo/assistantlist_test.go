package dynamo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/store"
)

// metaPad is the size of each assistant's metadata in the read tests: what
// reading an assistant (or one of its versions) costs.
const metaPad = 8_000

// makeAssistants stores n assistants of org, each with three versions and
// metadata of metaPad bytes, graph g-a or g-b alternately, and returns their
// ids newest first.
func makeAssistants(t *testing.T, db *DB, org string, n int) []string {
	t.Helper()
	ctx := context.Background()
	base := time.Now().UTC()
	var ids []string
	for i := 0; i < n; i++ {
		graph := "g-a"
		if i%2 == 1 {
			graph = "g-b"
		}
		meta := []byte(fmt.Sprintf(`{"i":%d,"even":%v,"pad":"%s"}`, i, i%2 == 0, strings.Repeat("m", metaPad)))
		at := base.Add(time.Duration(i) * time.Millisecond)
		a := store.Assistant{ID: uuid.NewString(), OrgID: org, GraphID: graph, Name: fmt.Sprintf("asst-%02d", i),
			Config: []byte(`{}`), Context: []byte(`{}`), Metadata: meta, Version: 1, CreatedAt: at, UpdatedAt: at}
		if err := db.CreateAssistant(ctx, a); err != nil {
			t.Fatal(err)
		}
		for v := 0; v < 2; v++ { // versions the searches must not read
			a.UpdatedAt = a.UpdatedAt.Add(time.Second)
			if _, err := db.UpdateAssistant(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		ids = append([]string{a.ID}, ids...)
	}
	return ids
}

func assistantIDs(as []store.Assistant) string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return strings.Join(ids, ",")
}

// TestSearchAssistantsReadsAPage: a page of an organization's assistants
// reads the listing entries up to the page and the page's assistants; the
// assistants the offset skips and every assistant's versions are not read
// (the old search read the whole partition, versions included, each time).
func TestSearchAssistantsReadsAPage(t *testing.T) {
	m := &readMeter{}
	db := openMetered(t, m)
	ctx := context.Background()
	org := meteredOrg(t, db)
	const n = 40 // 40 assistants, 120 versions: ~1.3 MB in the partition
	ids := makeAssistants(t, db, org, n)
	if _, err := db.SearchAssistants(ctx, org, store.AssistantFilter{Limit: 1}); err != nil {
		t.Fatal(err) // the organization's first search: entries checked once
	}
	total := func() int {
		_, q := m.read("Query")
		_, g := m.read("GetItem")
		return q + g
	}
	for _, tc := range []struct{ limit, offset int }{{5, 0}, {5, 30}, {20, 0}, {10, 38}} {
		t.Run(fmt.Sprintf("limit %d offset %d", tc.limit, tc.offset), func(t *testing.T) {
			m.reset()
			got, err := db.SearchAssistants(ctx, org, store.AssistantFilter{Limit: tc.limit, Offset: tc.offset})
			if err != nil {
				t.Fatal(err)
			}
			want := ids[min(tc.offset, n):min(tc.offset+tc.limit, n)]
			if assistantIDs(got) != strings.Join(want, ",") {
				t.Fatalf("SearchAssistants = %v, want %v", assistantIDs(got), want)
			}
			for _, a := range got {
				if len(a.Metadata) < metaPad || a.Version != 3 {
					t.Errorf("assistant %s: metadata of %d bytes, version %d; want the whole current assistant", a.ID, len(a.Metadata), a.Version)
				}
			}
			if q, _ := m.read("Query"); q > tc.offset+tc.limit {
				t.Errorf("read %d listing entries, want at most %d (%v)", q, tc.offset+tc.limit, m)
			}
			if g, _ := m.read("GetItem"); g != len(want) {
				t.Errorf("read %d assistants, want the page's %d (%v)", g, len(want), m)
			}
			if limit := len(want)*(metaPad+1_000) + (tc.offset+tc.limit)*200; total() > limit {
				t.Errorf("read %d bytes, want at most %d: the partition read whole? (%v)", total(), limit, m)
			}
		})
	}
	t.Run("graph filter", func(t *testing.T) {
		m.reset()
		got, err := db.SearchAssistants(ctx, org, store.AssistantFilter{GraphID: "g-b", Limit: 5, Offset: 4})
		if err != nil {
			t.Fatal(err)
		}
		var want []string // g-b is every odd i: ids[0], ids[2], … newest first
		for i := 0; i < n; i += 2 {
			want = append(want, ids[i])
		}
		if assistantIDs(got) != strings.Join(want[4:9], ",") {
			t.Fatalf("SearchAssistants graph g-b = %v, want %v", assistantIDs(got), want[4:9])
		}
		if g, _ := m.read("GetItem"); g != 5 {
			t.Errorf("read %d assistants, want the page's 5: the filter decided on the entries (%v)", g, m)
		}
		if limit := 5*(metaPad+1_000) + n*200; total() > limit {
			t.Errorf("read %d bytes, want at most %d (%v)", total(), limit, m)
		}
	})
	t.Run("metadata filter", func(t *testing.T) {
		m.reset()
		got, err := db.SearchAssistants(ctx, org, store.AssistantFilter{Metadata: []byte(`{"even":true}`), Limit: 3, Offset: 2})
		if err != nil {
			t.Fatal(err)
		}
		var want []string // even i: ids[1], ids[3], …
		for i := 1; i < n; i += 2 {
			want = append(want, ids[i])
		}
		if assistantIDs(got) != strings.Join(want[2:5], ",") {
			t.Fatalf("SearchAssistants even = %v, want %v", assistantIDs(got), want[2:5])
		}
		// A metadata filter needs the assistant: read until the page is
		// full (10 newest here), not the rest, not the versions.
		if g, _ := m.read("GetItem"); g > 10 {
			t.Errorf("read %d assistants, want at most 10 (%v)", g, m)
		}
		if limit := 10*(metaPad+1_000) + n*200; total() > limit {
			t.Errorf("read %d bytes, want at most %d (%v)", total(), limit, m)
		}
	})
	t.Run("count", func(t *testing.T) {
		for _, tc := range []struct {
			f    store.AssistantFilter
			want int
		}{{store.AssistantFilter{}, n}, {store.AssistantFilter{GraphID: "g-a"}, n / 2}, {store.AssistantFilter{NameContains: "asst-1"}, 10}} {
			m.reset()
			got, err := db.CountAssistants(ctx, org, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("CountAssistants(%+v) = %d, want %d", tc.f, got, tc.want)
			}
			if g, _ := m.read("GetItem"); g != 0 {
				t.Errorf("CountAssistants(%+v) read %d assistants, want none (%v)", tc.f, g, m)
			}
			if total() > n*200 {
				t.Errorf("CountAssistants(%+v) read %d bytes, want at most %d (%v)", tc.f, total(), n*200, m)
			}
		}
	})
}

// TestAssistantsListedOnce: assistants stored before the listing entries
// existed (no entries, no marker) are found: the organization's first
// search makes their entries, once; later searches read pages.
func TestAssistantsListedOnce(t *testing.T) {
	m := &readMeter{}
	db := openMetered(t, m)
	ctx := context.Background()
	org := meteredOrg(t, db)
	ids := makeAssistants(t, db, org, 6)
	// As the adapter left them before: no entries, no marker.
	items, err := db.queryPartition(ctx, db.tables.assistants, org, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if sk := it.str("sk"); strings.HasPrefix(sk, listPrefix) || sk == listedMarker {
			if _, err := db.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(db.tables.assistants), Key: key(org, sk)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// An assistant updated after the upgrade, before any search: its entry
	// (written by the update) is kept as it is.
	renamed := store.Assistant{ID: ids[2], OrgID: org, GraphID: "g-c", Name: "renamed", UpdatedAt: time.Now().UTC()}
	fresh := NewFromClient(db.client, db.opts)
	if _, err := fresh.UpdateAssistant(ctx, renamed); err != nil {
		t.Fatal(err)
	}
	got, err := fresh.SearchAssistants(ctx, org, store.AssistantFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if assistantIDs(got) != strings.Join(ids, ",") {
		t.Fatalf("first search after the upgrade = %v, want %v", assistantIDs(got), ids)
	}
	if c, err := fresh.CountAssistants(ctx, org, store.AssistantFilter{GraphID: "g-c"}); err != nil || c != 1 {
		t.Errorf("CountAssistants graph g-c = %d, %v; want 1 (the updated assistant's entry)", c, err)
	}
	if c, err := fresh.CountAssistants(ctx, org, store.AssistantFilter{}); err != nil || c != 6 {
		t.Errorf("CountAssistants = %d, %v; want 6", c, err)
	}
	// Another instance finds the marker: it reads a page, not the partition.
	again := NewFromClient(db.client, db.opts)
	m.reset()
	got, err = again.SearchAssistants(ctx, org, store.AssistantFilter{Limit: 2, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	if assistantIDs(got) != strings.Join(ids[1:3], ",") {
		t.Fatalf("search of another instance = %v, want %v", assistantIDs(got), ids[1:3])
	}
	if q, size := m.read("Query"); q > 3 || size > 3*200 {
		t.Errorf("the search after the marker read %d items, %d bytes by Query: the partition again? (%v)", q, size, m)
	}
	// Deleting an assistant takes its entry.
	if err := again.DeleteAssistant(ctx, org, ids[0]); err != nil {
		t.Fatal(err)
	}
	if c, err := again.CountAssistants(ctx, org, store.AssistantFilter{}); err != nil || c != 5 {
		t.Errorf("CountAssistants after a delete = %d, %v; want 5", c, err)
	}
}
