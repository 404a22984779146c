package storetest

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/store"
)

// ItemStore is what the items contract needs of an adapter: the port and
// the accounting the items count toward.
type ItemStore interface {
	store.Items
	store.Organizations
	store.Accounting
}

// ItemsContract is the contract of the store.Items port (the long-term
// memory store). open returns a store for t, set up as for Run. Every case
// works in organizations of its own; the expiry sweep case uses expiries in
// 2001, before anything else a shared store holds.
func ItemsContract(t *testing.T, open func(t *testing.T) ItemStore) {
	t.Run("PutGetRoundTrip", func(t *testing.T) { testItemRoundTrip(t, open(t)) })
	t.Run("Upsert", func(t *testing.T) { testItemUpsert(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testItemDelete(t, open(t)) })
	t.Run("ListByPrefix", func(t *testing.T) { testItemList(t, open(t)) })
	t.Run("Namespaces", func(t *testing.T) { testItemNamespaces(t, open(t)) })
	t.Run("Expiry", func(t *testing.T) { testItemExpiry(t, open(t)) })
	t.Run("Refresh", func(t *testing.T) { testItemRefresh(t, open(t)) })
	t.Run("Sweep", func(t *testing.T) { testItemSweep(t, open(t)) })
	t.Run("Isolation", func(t *testing.T) { testItemIsolation(t, open(t)) })
	t.Run("Usage", func(t *testing.T) { testItemUsage(t, open(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { testItemConcurrentPuts(t, open(t)) })
}

// itemNow is when the suite writes and reads, unless a case says otherwise.
var itemNow = time.Date(2024, 6, 1, 12, 0, 0, 123456789, zone)

func itemOrg(t *testing.T, s ItemStore) string {
	t.Helper()
	org := store.Organization{ID: newID(), Name: unique("items"), CreatedAt: at(0)}
	must(t, "CreateOrganization", s.CreateOrganization(ctx(), org))
	return org.ID
}

func newItem(org string, ns []string, key string, when time.Time) store.Item {
	return store.Item{
		OrgID: org, Namespace: ns, Key: key,
		Value:     []byte(fmt.Sprintf("{ \"k\": %q,\n \"n\" : [1, 2.50, \"\\u00e9\"] }", key)),
		CreatedAt: when, UpdatedAt: when,
	}
}

func putItem(t *testing.T, s ItemStore, it store.Item) store.Item {
	t.Helper()
	must(t, "PutItem "+it.Key, s.PutItem(ctx(), it))
	return it
}

func eqItem(t *testing.T, what string, got, want store.Item) {
	t.Helper()
	checkTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	checkTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	if want.ExpiresAt.IsZero() {
		if !got.ExpiresAt.IsZero() {
			t.Errorf("%s ExpiresAt: %v, want none", what, got.ExpiresAt)
		}
	} else {
		checkTime(t, what+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	}
	checkBytes(t, what+" Value", got.Value, want.Value)
	checkBytes(t, what+" Vectors", got.Vectors, want.Vectors)
	got.CreatedAt, got.UpdatedAt, got.ExpiresAt, got.Value, got.Vectors = time.Time{}, time.Time{}, time.Time{}, nil, nil
	want.CreatedAt, want.UpdatedAt, want.ExpiresAt, want.Value, want.Vectors = time.Time{}, time.Time{}, time.Time{}, nil, nil
	checkRest(t, what, got, want)
}

func getItem(t *testing.T, s ItemStore, org string, ns []string, key string, now time.Time, refresh bool) store.Item {
	t.Helper()
	got, err := s.Item(ctx(), org, ns, key, now, refresh)
	must(t, fmt.Sprintf("Item(%v, %s)", ns, key), err)
	return got
}

func missingItem(t *testing.T, s ItemStore, org string, ns []string, key string, now time.Time) {
	t.Helper()
	_, err := s.Item(ctx(), org, ns, key, now, false)
	wantErr(t, fmt.Sprintf("Item(%v, %s)", ns, key), err, store.ErrNotFound)
}

func itemNames(items []store.Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, strings.Join(it.Namespace, ".")+"/"+it.Key)
	}
	return out
}

func testItemRoundTrip(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	it := newItem(org, []string{"users", "u-1", "memories"}, "k é/1", itemNow)
	it.Vectors = []byte{0, 1, 2, 0x1e, 0xff}
	it.TTL, it.ExpiresAt = 90*time.Minute, itemNow.Add(90*time.Minute)
	putItem(t, s, it)
	eqItem(t, "item", getItem(t, s, org, it.Namespace, it.Key, itemNow, false), it)

	plain := newItem(org, []string{"users"}, "plain", itemNow)
	putItem(t, s, plain)
	eqItem(t, "item without TTL or vectors", getItem(t, s, org, plain.Namespace, plain.Key, itemNow, true), plain)

	missingItem(t, s, org, []string{"users", "u-1"}, "k é/1", itemNow)                  // a prefix of its namespace
	missingItem(t, s, org, []string{"users", "u-1", "memories", "x"}, "k é/1", itemNow) // deeper
	missingItem(t, s, org, it.Namespace, "k é/2", itemNow)
}

func testItemUpsert(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	ns := []string{"docs"}
	first := putItem(t, s, newItem(org, ns, "a", itemNow))
	second := newItem(org, ns, "a", itemNow.Add(time.Minute))
	second.Value = []byte(`{"replaced": true}`)
	second.CreatedAt = itemNow.Add(time.Hour) // ignored: the item exists
	putItem(t, s, second)
	want := second
	want.CreatedAt = first.CreatedAt
	eqItem(t, "replaced item", getItem(t, s, org, ns, "a", itemNow.Add(time.Minute), false), want)

	// A TTL set and then removed.
	third := newItem(org, ns, "a", itemNow.Add(2*time.Minute))
	third.TTL, third.ExpiresAt = 10*time.Minute, itemNow.Add(12*time.Minute)
	putItem(t, s, third)
	fourth := newItem(org, ns, "a", itemNow.Add(4*time.Minute))
	putItem(t, s, fourth)
	want = fourth
	want.CreatedAt = first.CreatedAt
	eqItem(t, "item without its TTL", getItem(t, s, org, ns, "a", itemNow.Add(time.Hour), false), want)
}

func testItemDelete(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	a := putItem(t, s, newItem(org, []string{"n"}, "a", itemNow))
	b := putItem(t, s, newItem(org, []string{"n"}, "b", itemNow))
	must(t, "DeleteItem", s.DeleteItem(ctx(), org, a.Namespace, a.Key))
	missingItem(t, s, org, a.Namespace, a.Key, itemNow)
	eqItem(t, "the other item", getItem(t, s, org, b.Namespace, b.Key, itemNow, false), b)
	must(t, "DeleteItem of a deleted item", s.DeleteItem(ctx(), org, a.Namespace, a.Key))
	must(t, "DeleteItem of a missing item", s.DeleteItem(ctx(), org, []string{"none"}, "x"))
	// Deleted and put again: a new item.
	again := newItem(org, a.Namespace, a.Key, itemNow.Add(time.Hour))
	putItem(t, s, again)
	eqItem(t, "item put again", getItem(t, s, org, a.Namespace, a.Key, itemNow.Add(time.Hour), false), again)
}

func testItemList(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	put := func(ns []string, key string, minute int) {
		putItem(t, s, newItem(org, ns, key, itemNow.Add(time.Duration(minute)*time.Minute)))
	}
	put([]string{"a"}, "1", 1)
	put([]string{"a", "b"}, "2", 5)
	put([]string{"a", "b", "c"}, "3", 3)
	put([]string{"ab"}, "4", 4)          // shares a string prefix, not a namespace prefix
	put([]string{"a", "bc"}, "5", 2)     // likewise under a
	put([]string{"a", "b"}, "0", 5)      // ties with a.b/2 on updated: namespace, then key
	put([]string{"z", "a", "b"}, "6", 6) // a.b in the middle: not under the prefix a.b
	later := itemNow.Add(time.Hour)
	tests := []struct {
		prefix []string
		limit  int
		want   []string
	}{
		{nil, 100, []string{"z.a.b/6", "a.b/0", "a.b/2", "ab/4", "a.b.c/3", "a.bc/5", "a/1"}},
		{[]string{"a"}, 100, []string{"a.b/0", "a.b/2", "a.b.c/3", "a.bc/5", "a/1"}},
		{[]string{"a", "b"}, 100, []string{"a.b/0", "a.b/2", "a.b.c/3"}},
		{[]string{"a", "b", "c"}, 100, []string{"a.b.c/3"}},
		{[]string{"a", "b", "c", "d"}, 100, []string{}},
		{[]string{"b"}, 100, []string{}},
		{[]string{"a"}, 2, []string{"a.b/0", "a.b/2"}},
	}
	for _, tc := range tests {
		got, err := s.ListItems(ctx(), org, tc.prefix, later, tc.limit)
		must(t, "ListItems", err)
		checkRest(t, fmt.Sprintf("ListItems(%v, %d)", tc.prefix, tc.limit), itemNames(got), tc.want)
	}
	got, err := s.ListItems(ctx(), org, []string{"a", "b", "c"}, later, 10)
	must(t, "ListItems", err)
	if len(got) == 1 {
		eqItem(t, "listed item", got[0], newItem(org, []string{"a", "b", "c"}, "3", itemNow.Add(3*time.Minute)))
	}
}

func testItemNamespaces(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	for i, ns := range [][]string{{"a"}, {"a", "b"}, {"a", "b"}, {"a", "b", "c"}, {"ab"}, {"x", "y"}} {
		putItem(t, s, newItem(org, ns, fmt.Sprint(i), itemNow))
	}
	expired := newItem(org, []string{"gone"}, "k", itemNow.Add(-time.Hour))
	expired.TTL, expired.ExpiresAt = time.Minute, itemNow.Add(-59*time.Minute)
	putItem(t, s, expired)
	list := func(prefix []string, limit int) []string {
		got, err := s.ItemNamespaces(ctx(), org, prefix, itemNow, limit)
		must(t, "ItemNamespaces", err)
		out := []string{}
		for _, ns := range got {
			out = append(out, strings.Join(ns, "."))
		}
		sort.Strings(out)
		return out
	}
	checkRest(t, "all namespaces", list(nil, 100), []string{"a", "a.b", "a.b.c", "ab", "x.y"})
	checkRest(t, "namespaces under a", list([]string{"a"}, 100), []string{"a", "a.b", "a.b.c"})
	checkRest(t, "namespaces under a.b", list([]string{"a", "b"}, 100), []string{"a.b", "a.b.c"})
	if n := len(list(nil, 2)); n != 2 {
		t.Errorf("ItemNamespaces with limit 2: %d namespaces", n)
	}
}

func testItemExpiry(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	ns := []string{"ttl"}
	it := newItem(org, ns, "k", itemNow)
	it.TTL, it.ExpiresAt = 10*time.Minute, itemNow.Add(10*time.Minute)
	putItem(t, s, it)
	eqItem(t, "before expiry", getItem(t, s, org, ns, "k", itemNow.Add(10*time.Minute-time.Microsecond), false), it)
	missingItem(t, s, org, ns, "k", itemNow.Add(10*time.Minute))
	got, err := s.ListItems(ctx(), org, nil, itemNow.Add(11*time.Minute), 10)
	must(t, "ListItems", err)
	checkRest(t, "listed after expiry", itemNames(got), []string{})
	got, err = s.ListItems(ctx(), org, nil, itemNow, 10)
	must(t, "ListItems", err)
	checkRest(t, "listed before expiry", itemNames(got), []string{"ttl/k"})
	// Put over the expired item: a new item, created now.
	again := newItem(org, ns, "k", itemNow.Add(20*time.Minute))
	putItem(t, s, again)
	eqItem(t, "put over an expired item", getItem(t, s, org, ns, "k", itemNow.Add(20*time.Minute), false), again)
}

func testItemRefresh(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	ns := []string{"r"}
	it := newItem(org, ns, "k", itemNow)
	it.TTL, it.ExpiresAt = 10*time.Minute, itemNow.Add(10*time.Minute)
	putItem(t, s, it)
	other := newItem(org, ns, "other", itemNow)
	other.TTL, other.ExpiresAt = 10*time.Minute, itemNow.Add(10*time.Minute)
	putItem(t, s, other)
	plain := putItem(t, s, newItem(org, ns, "plain", itemNow))

	// A read without refresh leaves the expiry.
	getItem(t, s, org, ns, "k", itemNow.Add(5*time.Minute), false)
	missingItem(t, s, org, ns, "k", itemNow.Add(10*time.Minute))

	// A refreshing read moves it: returned and stored.
	at8 := itemNow.Add(8 * time.Minute)
	want := it
	want.ExpiresAt = at8.Add(10 * time.Minute)
	eqItem(t, "refreshed item", getItem(t, s, org, ns, "k", at8, true), want)
	eqItem(t, "after the refresh", getItem(t, s, org, ns, "k", itemNow.Add(17*time.Minute), false), want)
	missingItem(t, s, org, ns, "other", itemNow.Add(17*time.Minute))

	// RefreshItems: only live items with a TTL, only those named.
	a := newItem(org, ns, "a", itemNow)
	a.TTL, a.ExpiresAt = time.Hour, itemNow.Add(time.Hour)
	putItem(t, s, a)
	b := newItem(org, ns, "b", itemNow)
	b.TTL, b.ExpiresAt = time.Hour, itemNow.Add(time.Hour)
	putItem(t, s, b)
	at30 := itemNow.Add(30 * time.Minute)
	must(t, "RefreshItems", s.RefreshItems(ctx(), org, []store.ItemKey{{Namespace: ns, Key: "a"}, {Namespace: ns, Key: "plain"},
		{Namespace: ns, Key: "other"}, {Namespace: ns, Key: "missing"}}, at30))
	wantA := a
	wantA.ExpiresAt = at30.Add(time.Hour)
	eqItem(t, "refreshed a", getItem(t, s, org, ns, "a", at30, false), wantA)
	eqItem(t, "b, not named", getItem(t, s, org, ns, "b", at30, false), b)
	eqItem(t, "plain, no TTL", getItem(t, s, org, ns, "plain", itemNow.Add(1000*time.Hour), false), plain)
	missingItem(t, s, org, ns, "other", at30) // expired before the refresh: stays expired
	must(t, "RefreshItems of none", s.RefreshItems(ctx(), org, nil, at30))
}

func testItemSweep(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for i := 0; i < 3; i++ {
		it := newItem(org, []string{"sweep"}, fmt.Sprint(i), old)
		it.TTL, it.ExpiresAt = time.Minute, old.Add(time.Minute)
		putItem(t, s, it)
		names = append(names, it.Key)
	}
	keep := newItem(org, []string{"sweep"}, "keep", old)
	keep.TTL, keep.ExpiresAt = time.Minute, old.Add(time.Hour)
	putItem(t, s, keep)
	putItem(t, s, newItem(org, []string{"sweep"}, "forever", old))
	before, err := s.Usage(ctx(), org)
	must(t, "Usage", err)

	sweepAt := old.Add(2 * time.Minute)
	n, err := s.DeleteExpiredItems(ctx(), sweepAt, 2)
	must(t, "DeleteExpiredItems", err)
	if n != 2 {
		t.Fatalf("DeleteExpiredItems(limit 2) removed %d, want 2", n)
	}
	n, err = s.DeleteExpiredItems(ctx(), sweepAt, 100)
	must(t, "DeleteExpiredItems", err)
	if n != 1 {
		t.Fatalf("DeleteExpiredItems removed %d more, want 1", n)
	}
	got, err := s.ListItems(ctx(), org, nil, old, 10) // read at a time they were live
	must(t, "ListItems", err)
	checkRest(t, "items left after the sweep", sorted(itemNames(got)), []string{"sweep/forever", "sweep/keep"})
	after, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	var swept int64
	for _, k := range names {
		swept += newItem(org, []string{"sweep"}, k, old).Bytes()
	}
	if before.Bytes-after.Bytes != swept {
		t.Errorf("the sweep moved usage by %d bytes, want %d", before.Bytes-after.Bytes, swept)
	}
}

func testItemIsolation(t *testing.T, s ItemStore) {
	orgA, orgB := itemOrg(t, s), itemOrg(t, s)
	ns := []string{"shared", "ns"}
	a := putItem(t, s, newItem(orgA, ns, "k", itemNow))
	missingItem(t, s, orgB, ns, "k", itemNow)
	got, err := s.ListItems(ctx(), orgB, nil, itemNow, 10)
	must(t, "ListItems", err)
	checkRest(t, "other organization's list", itemNames(got), []string{})
	nss, err := s.ItemNamespaces(ctx(), orgB, nil, itemNow, 10)
	must(t, "ItemNamespaces", err)
	if len(nss) != 0 {
		t.Errorf("other organization's namespaces: %v", nss)
	}
	must(t, "DeleteItem by another organization", s.DeleteItem(ctx(), orgB, ns, "k"))
	b := newItem(orgB, ns, "k", itemNow.Add(time.Minute))
	b.Value = []byte(`{"org": "b"}`)
	putItem(t, s, b)
	eqItem(t, "A's item", getItem(t, s, orgA, ns, "k", itemNow, false), a)
	eqItem(t, "B's item", getItem(t, s, orgB, ns, "k", itemNow, false), b)
}

func testItemUsage(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	base, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	total := base.Bytes
	check := func(what string) {
		t.Helper()
		u, err := s.Usage(ctx(), org)
		must(t, "Usage", err)
		if u.Bytes != total || u.Threads != base.Threads {
			t.Fatalf("%s: usage %+v, want %d bytes and %d threads", what, u, total, base.Threads)
		}
	}
	it := newItem(org, []string{"ü", "b"}, "kéy", itemNow)
	it.Vectors = make([]byte, 1000)
	putItem(t, s, it)
	total += it.Bytes()
	check("an item")
	bigger := it
	bigger.Value, bigger.Vectors = []byte(`{"much": "longer than before, much longer"}`), nil
	putItem(t, s, bigger)
	total += bigger.Bytes() - it.Bytes()
	check("an item replaced")
	must(t, "DeleteItem", s.DeleteItem(ctx(), org, it.Namespace, it.Key))
	total -= bigger.Bytes()
	check("an item deleted")
	must(t, "DeleteItem again", s.DeleteItem(ctx(), org, it.Namespace, it.Key))
	check("a missing item deleted")

	// An expired item replaced by a put counts as the new one only.
	exp := newItem(org, []string{"e"}, "k", itemNow)
	exp.TTL, exp.ExpiresAt = time.Minute, itemNow.Add(time.Minute)
	putItem(t, s, exp)
	total += exp.Bytes()
	next := newItem(org, []string{"e"}, "k", itemNow.Add(time.Hour))
	next.Value = []byte(`{}`)
	putItem(t, s, next)
	total += next.Bytes() - exp.Bytes()
	check("an expired item replaced")
}

func testItemConcurrentPuts(t *testing.T, s ItemStore) {
	org := itemOrg(t, s)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			it := newItem(org, []string{"race"}, "k", itemNow.Add(time.Duration(i)*time.Second))
			it.Value = []byte(fmt.Sprintf(`{"writer": %d, "pad": %q}`, i, strings.Repeat("x", i)))
			errs[i] = s.PutItem(ctx(), it)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		must(t, fmt.Sprintf("writer %d", i), err)
	}
	got := getItem(t, s, org, []string{"race"}, "k", itemNow, false)
	u, err := s.Usage(ctx(), org)
	must(t, "Usage", err)
	if u.Bytes != got.Bytes() {
		t.Errorf("after %d concurrent puts of one item: usage %d bytes, the item counts %d", n, u.Bytes, got.Bytes())
	}
	if reflect.DeepEqual(got.Value, []byte(nil)) {
		t.Error("no value stored")
	}
}
