package storeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/store/sqlite"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// clock is a settable time.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }
func newClock() *clock {
	c := &clock{}
	c.t.Store(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}
func ctx() context.Context         { return context.Background() }
func ptr[T any](v T) *T            { return &v }
func raw(s string) json.RawMessage { return json.RawMessage(s) }
func put(ns []string, key, value string) PutInput {
	return PutInput{Namespace: ns, Key: ptr(key), Value: raw(value)}
}

func newService(t *testing.T) (*Service, *clock) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	c := newClock()
	return &Service{Store: db, Now: c.now}, c
}

func org(t *testing.T, s *Service) string {
	t.Helper()
	id := uuid.NewString()
	if err := s.Store.(store.Organizations).CreateOrganization(ctx(), store.Organization{ID: id, Name: id, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func keys(items []SearchItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, strings.Join(it.Namespace, ".")+"/"+it.Key)
	}
	return out
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: got %s, want %s", what, g, w)
	}
}

func TestPutRules(t *testing.T) {
	s, _ := newService(t)
	s.Limits = Limits{MaxValueBytes: 100, MaxDepth: 3, MaxKeyBytes: 8, MaxLabelBytes: 5}
	o := org(t, s)
	tests := []struct {
		name  string
		in    PutInput
		field string
	}{
		{"no namespace", put(nil, "k", `{}`), "namespace"},
		{"empty label", put([]string{"a", ""}, "k", `{}`), "namespace"},
		{"period in a label", put([]string{"a.b"}, "k", `{}`), "namespace"},
		{"control character", put([]string{"a\x1eb"}, "k", `{}`), "namespace"},
		{"NUL", put([]string{"a\x00"}, "k", `{}`), "namespace"},
		{"too deep", put([]string{"a", "b", "c", "d"}, "k", `{}`), "namespace"},
		{"label too long", put([]string{"abcdef"}, "k", `{}`), "namespace"},
		{"reserved root", put([]string{"langgraph"}, "k", `{}`), "namespace"},
		{"no key", PutInput{Namespace: []string{"a"}, Value: raw(`{}`)}, "key"},
		{"empty key", put([]string{"a"}, "", `{}`), "key"},
		{"key too long", put([]string{"a"}, "123456789", `{}`), "key"},
		{"value not an object", put([]string{"a"}, "k", `[1]`), "value"},
		{"value null", put([]string{"a"}, "k", `null`), "value"},
		{"value too large", put([]string{"a"}, "k", `{"x":"`+strings.Repeat("y", 100)+`"}`), "value"},
		{"ttl zero", PutInput{Namespace: []string{"a"}, Key: ptr("k"), Value: raw(`{}`), TTL: ptr(0.0)}, "ttl"},
		{"ttl negative", PutInput{Namespace: []string{"a"}, Key: ptr("k"), Value: raw(`{}`), TTL: ptr(-1.0)}, "ttl"},
		{"ttl past a century", PutInput{Namespace: []string{"a"}, Key: ptr("k"), Value: raw(`{}`), TTL: ptr(1e12)}, "ttl"},
		{"index true", PutInput{Namespace: []string{"a"}, Key: ptr("k"), Value: raw(`{}`), Index: raw(`true`)}, "index"},
		{"index of numbers", PutInput{Namespace: []string{"a"}, Key: ptr("k"), Value: raw(`{}`), Index: raw(`[1]`)}, "index"},
		{"index empty path", PutInput{Namespace: []string{"a"}, Key: ptr("k"), Value: raw(`{}`), Index: raw(`[""]`)}, "index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Put(ctx(), o, tc.in)
			if fail.KindOf(err) != fail.KindInvalid || !strings.HasPrefix(fail.MessageOf(err), tc.field+":") {
				t.Fatalf("Put: %v, want invalid %s", err, tc.field)
			}
		})
	}
	items, err := s.Search(ctx(), o, SearchInput{})
	must(t, err)
	eq(t, "items after refused puts", keys(items), []string{})
}

func TestSearchRules(t *testing.T) {
	s, _ := newService(t)
	o := org(t, s)
	tests := []struct {
		name  string
		in    SearchInput
		field string
	}{
		{"bad prefix", SearchInput{NamespacePrefix: []string{"a.b"}}, "namespace_prefix"},
		{"negative limit", SearchInput{Limit: ptr(-1)}, "limit"},
		{"limit too large", SearchInput{Limit: ptr(1001)}, "limit"},
		{"negative offset", SearchInput{Offset: ptr(-1)}, "offset"},
		{"filter not an object", SearchInput{Filter: raw(`[1]`)}, "filter"},
		{"unknown operator", SearchInput{Filter: raw(`{"a": {"$in": [1]}}`)}, "filter.a"},
		{"ordering without a number", SearchInput{Filter: raw(`{"a": {"$gt": "x"}}`)}, "filter.a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Search(ctx(), o, tc.in)
			if fail.KindOf(err) != fail.KindInvalid || !strings.HasPrefix(fail.MessageOf(err), tc.field+":") {
				t.Fatalf("Search: %v, want invalid %s", err, tc.field)
			}
		})
	}
	nsTests := []struct {
		name  string
		in    NamespacesInput
		field string
	}{
		{"bad prefix", NamespacesInput{Prefix: []string{""}}, "prefix"},
		{"bad suffix", NamespacesInput{Suffix: []string{"a.b"}}, "suffix"},
		{"max_depth zero", NamespacesInput{MaxDepth: ptr(0)}, "max_depth"},
		{"limit negative", NamespacesInput{Limit: ptr(-5)}, "limit"},
	}
	for _, tc := range nsTests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Namespaces(ctx(), o, tc.in)
			if fail.KindOf(err) != fail.KindInvalid || !strings.HasPrefix(fail.MessageOf(err), tc.field+":") {
				t.Fatalf("Namespaces: %v, want invalid %s", err, tc.field)
			}
		})
	}
	for _, ns := range []string{"", "a..b", ".a"} {
		if _, err := s.Get(ctx(), o, GetInput{Namespace: ns, Key: "k"}); fail.KindOf(err) != fail.KindInvalid {
			t.Errorf("Get(namespace %q): %v, want invalid", ns, err)
		}
	}
}

func TestPutGetDelete(t *testing.T) {
	s, c := newService(t)
	o, other := org(t, s), org(t, s)
	must(t, s.Put(ctx(), o, put([]string{"users", "u1"}, "prefs", `{ "theme" : "dark" }`)))
	created := c.now()
	c.advance(time.Minute)
	must(t, s.Put(ctx(), o, put([]string{"users", "u1"}, "prefs", `{"theme": "light"}`)))
	got, err := s.Get(ctx(), o, GetInput{Namespace: "users.u1", Key: "prefs"})
	must(t, err)
	eq(t, "item", got, Item{Namespace: []string{"users", "u1"}, Key: "prefs", Value: raw(`{"theme":"light"}`),
		CreatedAt: formatTime(created), UpdatedAt: formatTime(c.now())})
	if got, _ := s.Get(ctx(), other, GetInput{Namespace: "users.u1", Key: "prefs"}); got != nil {
		t.Errorf("another organization reads the item: %+v", got)
	}
	must(t, s.Delete(ctx(), other, DeleteInput{Namespace: []string{"users", "u1"}, Key: ptr("prefs")}))
	if got, _ := s.Get(ctx(), o, GetInput{Namespace: "users.u1", Key: "prefs"}); got == nil {
		t.Fatal("another organization's delete removed the item")
	}
	must(t, s.Delete(ctx(), o, DeleteInput{Namespace: []string{"users", "u1"}, Key: ptr("prefs")}))
	if got, _ := s.Get(ctx(), o, GetInput{Namespace: "users.u1", Key: "prefs"}); got != nil {
		t.Fatalf("deleted item read: %+v", got)
	}
	must(t, s.Delete(ctx(), o, DeleteInput{Namespace: []string{"users", "u1"}, Key: ptr("prefs")}))
}

func TestSearchFilterAndPaging(t *testing.T) {
	s, c := newService(t)
	o := org(t, s)
	docs := []struct {
		ns    []string
		key   string
		value string
	}{
		{[]string{"docs", "a"}, "1", `{"kind": "note", "score": 3, "tags": ["x", "y"], "meta": {"lang": "en", "v": 1}}`},
		{[]string{"docs", "a"}, "2", `{"kind": "note", "score": 7, "meta": {"lang": "fr"}}`},
		{[]string{"docs", "b"}, "3", `{"kind": "task", "score": 5}`},
		{[]string{"docsx"}, "4", `{"kind": "note", "score": 9}`},
		{[]string{"other"}, "5", `{"kind": "note"}`},
	}
	for _, d := range docs {
		c.advance(time.Second)
		must(t, s.Put(ctx(), o, put(d.ns, d.key, d.value)))
	}
	tests := []struct {
		name string
		in   SearchInput
		want []string
	}{
		{"all, newest first", SearchInput{}, []string{"other/5", "docsx/4", "docs.b/3", "docs.a/2", "docs.a/1"}},
		{"prefix", SearchInput{NamespacePrefix: []string{"docs"}}, []string{"docs.b/3", "docs.a/2", "docs.a/1"}},
		{"equality", SearchInput{Filter: raw(`{"kind": "note"}`)}, []string{"other/5", "docsx/4", "docs.a/2", "docs.a/1"}},
		{"prefix and equality", SearchInput{NamespacePrefix: []string{"docs"}, Filter: raw(`{"kind": "note"}`)}, []string{"docs.a/2", "docs.a/1"}},
		{"nested subset", SearchInput{Filter: raw(`{"meta": {"lang": "en"}}`)}, []string{"docs.a/1"}},
		{"array", SearchInput{Filter: raw(`{"tags": ["x", "y"]}`)}, []string{"docs.a/1"}},
		{"array of another length", SearchInput{Filter: raw(`{"tags": ["x"]}`)}, []string{}},
		{"$gt", SearchInput{Filter: raw(`{"score": {"$gt": 5}}`)}, []string{"docsx/4", "docs.a/2"}},
		{"$gte and $lt", SearchInput{Filter: raw(`{"score": {"$gte": 5, "$lt": 9}}`)}, []string{"docs.b/3", "docs.a/2"}},
		{"$ne", SearchInput{Filter: raw(`{"kind": {"$ne": "note"}}`)}, []string{"docs.b/3"}},
		{"$eq", SearchInput{Filter: raw(`{"score": {"$eq": 3}}`)}, []string{"docs.a/1"}},
		{"missing field", SearchInput{Filter: raw(`{"nope": 1}`)}, []string{}},
		{"limit", SearchInput{Limit: ptr(2)}, []string{"other/5", "docsx/4"}},
		{"limit 0 is the default", SearchInput{Limit: ptr(0)}, []string{"other/5", "docsx/4", "docs.b/3", "docs.a/2", "docs.a/1"}},
		{"offset", SearchInput{Limit: ptr(2), Offset: ptr(2)}, []string{"docs.b/3", "docs.a/2"}},
		{"offset and filter", SearchInput{Filter: raw(`{"kind": "note"}`), Offset: ptr(3)}, []string{"docs.a/1"}},
		{"offset past the end", SearchInput{Offset: ptr(10)}, []string{}},
		{"query without embeddings is ignored", SearchInput{Query: ptr("anything"), NamespacePrefix: []string{"docs", "a"}}, []string{"docs.a/2", "docs.a/1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Search(ctx(), o, tc.in)
			must(t, err)
			eq(t, "keys", keys(got), tc.want)
			for _, it := range got {
				if it.Score != nil {
					t.Errorf("%s has a score without embeddings", it.Key)
				}
			}
		})
	}
}

func TestTTLRefreshAndSweep(t *testing.T) {
	s, c := newService(t)
	o := org(t, s)
	ttl := func(key string, minutes float64) {
		in := put([]string{"t"}, key, `{"k": 1}`)
		in.TTL = &minutes
		must(t, s.Put(ctx(), o, in))
		c.advance(time.Second)
	}
	ttl("read", 10)
	ttl("noread", 10)
	ttl("searched", 10)
	must(t, s.Put(ctx(), o, put([]string{"t"}, "forever", `{}`)))
	get := func(key string, refresh *bool) *Item {
		got, err := s.Get(ctx(), o, GetInput{Namespace: "t", Key: key, RefreshTTL: refresh})
		must(t, err)
		return got
	}
	c.advance(8 * time.Minute)
	if get("read", nil) == nil { // refreshes: default true
		t.Fatal("item gone before its TTL")
	}
	if get("noread", ptr(false)) == nil {
		t.Fatal("item gone before its TTL")
	}
	got, err := s.Search(ctx(), o, SearchInput{Filter: raw(`{"k": 1}`), Limit: ptr(1), Offset: ptr(0)})
	must(t, err)
	// The newest of the three is "searched": the search refreshes it only.
	eq(t, "searched", keys(got), []string{"t/searched"})
	c.advance(5 * time.Minute) // 13 minutes after the puts, 5 after the refreshes
	if get("noread", ptr(false)) != nil {
		t.Error("an item read without refresh outlived its TTL")
	}
	if get("read", ptr(false)) == nil || get("searched", ptr(false)) == nil {
		t.Error("a refreshed item expired at its first TTL")
	}
	all, err := s.Search(ctx(), o, SearchInput{NamespacePrefix: []string{"t"}, RefreshTTL: ptr(false)})
	must(t, err)
	eq(t, "live items", keys(all), []string{"t/forever", "t/searched", "t/read"})
	c.advance(20 * time.Minute)
	n, err := s.Sweep(ctx())
	must(t, err)
	if n != 3 {
		t.Errorf("Sweep deleted %d items, want 3", n)
	}
	u, err := s.Store.Usage(ctx(), o)
	must(t, err)
	if want := (store.Item{Namespace: []string{"t"}, Key: "forever", Value: []byte(`{}`)}).Bytes(); u.Bytes != want {
		t.Errorf("usage after the sweep: %d bytes, want %d (the item without TTL)", u.Bytes, want)
	}
}

func TestQuota(t *testing.T) {
	s, _ := newService(t)
	o := org(t, s)
	s.Limits.MaxStoredBytes = 60
	must(t, s.Put(ctx(), o, put([]string{"q"}, "a", `{"v":"`+strings.Repeat("x", 30)+`"}`))) // 1+1+38 = 40 bytes
	err := s.Put(ctx(), o, put([]string{"q"}, "b", `{"v":"`+strings.Repeat("x", 20)+`"}`))
	if fail.KindOf(err) != fail.KindQuota {
		t.Fatalf("Put past the quota: %v, want a quota error", err)
	}
	// Replacing an item with a smaller one is allowed at the quota.
	must(t, s.Put(ctx(), o, put([]string{"q"}, "a", `{"v":"y"}`)))
	must(t, s.Put(ctx(), o, put([]string{"q"}, "b", `{"v":"`+strings.Repeat("x", 20)+`"}`)))
}

func TestNamespaces(t *testing.T) {
	s, _ := newService(t)
	o := org(t, s)
	for i, ns := range [][]string{{"a", "b", "c"}, {"a", "b", "d"}, {"a", "x", "c"}, {"b"}, {"b", "c"}, {"a", "b", "c", "e"}} {
		must(t, s.Put(ctx(), o, put(ns, fmt.Sprint(i), `{}`)))
	}
	tests := []struct {
		name string
		in   NamespacesInput
		want [][]string
	}{
		{"all, sorted", NamespacesInput{}, [][]string{{"a", "b", "c"}, {"a", "b", "c", "e"}, {"a", "b", "d"}, {"a", "x", "c"}, {"b"}, {"b", "c"}}},
		{"prefix", NamespacesInput{Prefix: []string{"a", "b"}}, [][]string{{"a", "b", "c"}, {"a", "b", "c", "e"}, {"a", "b", "d"}}},
		{"wildcard prefix", NamespacesInput{Prefix: []string{"a", "*", "c"}}, [][]string{{"a", "b", "c"}, {"a", "b", "c", "e"}, {"a", "x", "c"}}},
		{"suffix", NamespacesInput{Suffix: []string{"c"}}, [][]string{{"a", "b", "c"}, {"a", "x", "c"}, {"b", "c"}}},
		{"prefix and suffix", NamespacesInput{Prefix: []string{"a"}, Suffix: []string{"c"}}, [][]string{{"a", "b", "c"}, {"a", "x", "c"}}},
		{"max_depth", NamespacesInput{MaxDepth: ptr(2)}, [][]string{{"a", "b"}, {"a", "x"}, {"b"}, {"b", "c"}}},
		{"max_depth 1", NamespacesInput{MaxDepth: ptr(1)}, [][]string{{"a"}, {"b"}}},
		{"limit and offset", NamespacesInput{Limit: ptr(2), Offset: ptr(1)}, [][]string{{"a", "b", "c", "e"}, {"a", "b", "d"}}},
		{"no match", NamespacesInput{Prefix: []string{"z"}}, [][]string{}},
		{"limit 0, as upstream: none", NamespacesInput{Limit: ptr(0)}, [][]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Namespaces(ctx(), o, tc.in)
			must(t, err)
			eq(t, "namespaces", got.Namespaces, tc.want)
		})
	}
	other, err := s.Namespaces(ctx(), org(t, s), NamespacesInput{})
	must(t, err)
	eq(t, "another organization's namespaces", other.Namespaces, [][]string{})
}

// fakeEmbeddings is an OpenAI-compatible /embeddings endpoint on
// 127.0.0.1 with deterministic vectors: each word of a text adds one to
// the dimension its hash picks, so texts sharing words are similar.
type fakeEmbeddings struct {
	*httptest.Server
	calls  atomic.Int64
	inputs atomic.Int64
	status int
}

const fakeDims = 64

func fakeVector(text string) []float32 {
	v := make([]float32, fakeDims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !('a' <= r && r <= 'z') }) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%fakeDims]++
	}
	return v
}

func newFakeEmbeddings(t *testing.T, key string) *fakeEmbeddings {
	f := &fakeEmbeddings{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if f.status != 0 {
			http.Error(w, "failing on purpose", f.status)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "fake-model" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.inputs.Add(int64(len(req.Input)))
		var data []map[string]any
		for i := len(req.Input) - 1; i >= 0; i-- { // out of order: the index decides
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": fakeVector(req.Input[i])})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	}))
	t.Cleanup(f.Close)
	return f
}

func TestSemanticSearch(t *testing.T) {
	const key = "sk-test-secret-embeddings-key"
	f := newFakeEmbeddings(t, key)
	s, c := newService(t)
	var logged bytes.Buffer
	s.Embedder = &OpenAIEmbeddings{URL: f.URL + "/v1", Model: "fake-model", APIKey: key, Client: weburl.GuardedClient(true, 0),
		Log: slog.New(slog.NewTextHandler(&logged, nil))}
	s.IndexFields = []string{"text"}
	o := org(t, s)
	for _, d := range []struct{ key, text, kind string }{
		{"cats", "cats purr and cats sleep", "pet"},
		{"dogs", "dogs bark loudly", "pet"},
		{"stocks", "stocks fell on monday", "news"},
		{"weather", "rain and wind on monday", "news"},
	} {
		c.advance(time.Second)
		must(t, s.Put(ctx(), o, put([]string{"mem"}, d.key, fmt.Sprintf(`{"text": %q, "kind": %q}`, d.text, d.kind))))
	}
	// Not indexed: found, after the scored ones, without a score.
	c.advance(time.Second)
	noIndex := put([]string{"mem"}, "plain", `{"text": "cats everywhere"}`)
	noIndex.Index = raw(`false`)
	must(t, s.Put(ctx(), o, noIndex))
	c.advance(time.Second)
	// Its own paths: the title only.
	titled := put([]string{"mem"}, "titled", `{"title": "dogs and cats", "text": "nothing related"}`)
	titled.Index = raw(`["title"]`)
	must(t, s.Put(ctx(), o, titled))

	got, err := s.Search(ctx(), o, SearchInput{NamespacePrefix: []string{"mem"}, Query: ptr("cats sleep")})
	must(t, err)
	eq(t, "ranked", keys(got)[:2], []string{"mem/cats", "mem/titled"})
	if last := got[len(got)-1]; last.Key != "plain" || last.Score != nil {
		t.Errorf("the unindexed item: %s score %v, want plain last without a score", last.Key, last.Score)
	}
	for i := 1; i < len(got)-1; i++ {
		if got[i].Score == nil || *got[i].Score > *got[i-1].Score {
			t.Errorf("scores not descending at %d: %v", i, keys(got))
		}
	}
	if s := *got[0].Score; s < 0.5 || s > 1 {
		t.Errorf("score of the best match %v, want a cosine similarity near 1", s)
	}
	got, err = s.Search(ctx(), o, SearchInput{Query: ptr("monday"), Filter: raw(`{"kind": "news"}`), Limit: ptr(1), Offset: ptr(1)})
	must(t, err)
	if len(got) != 1 || (got[0].Key != "stocks" && got[0].Key != "weather") {
		t.Errorf("filtered, paged semantic search: %v", keys(got))
	}
	// Without a query: plain listing, no embeddings call.
	before := f.calls.Load()
	got, err = s.Search(ctx(), o, SearchInput{Limit: ptr(2)})
	must(t, err)
	eq(t, "listing", keys(got), []string{"mem/titled", "mem/plain"})
	if f.calls.Load() != before {
		t.Error("a search without a query called the embeddings endpoint")
	}

	// Too many texts to embed, or embeddings too large: refused, naming index.
	many := put([]string{"mem"}, "many", `{"list": [`+strings.TrimSuffix(strings.Repeat(`"w",`, 40), ",")+`]}`)
	many.Index = raw(`["list[*]"]`)
	if err := s.Put(ctx(), o, many); fail.KindOf(err) != fail.KindInvalid || !strings.HasPrefix(fail.MessageOf(err), "index:") {
		t.Errorf("a put with 40 texts to embed: %v", err)
	}

	// The endpoint failing: the put is refused as unavailable, nothing is
	// stored, and the key is in no error.
	f.status = http.StatusInternalServerError
	err = s.Put(ctx(), o, put([]string{"mem"}, "failed", `{"text": "x"}`))
	if fail.KindOf(err) != fail.KindUnavailable || strings.Contains(err.Error(), key) {
		t.Fatalf("Put with a failing endpoint: %v", err)
	}
	if g, _ := s.Get(ctx(), o, GetInput{Namespace: "mem", Key: "failed"}); g != nil {
		t.Error("an item was stored although its embedding failed")
	}
	_, err = s.Search(ctx(), o, SearchInput{Query: ptr("x")})
	if fail.KindOf(err) != fail.KindUnavailable || strings.Contains(err.Error(), key) {
		t.Fatalf("Search with a failing endpoint: %v", err)
	}
	// The operator's log says so, with the status, and without the key.
	if !strings.Contains(logged.String(), "status=500") || strings.Contains(logged.String(), key) {
		t.Errorf("log of the failing endpoint:\n%s", logged.String())
	}
}

func TestEmbeddingsAnswersBounded(t *testing.T) {
	answers := map[string]string{
		"/short":     `{"data": [{"index": 0, "embedding": [1, 2]}]}`,
		"/bad-index": `{"data": [{"index": 5, "embedding": [1]}, {"index": 0, "embedding": [1]}]}`,
		"/empty":     `{"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [1]}]}`,
		"/not-json":  `<html>`,
		"/too-long":  `{"data": [{"index": 0, "embedding": [` + strings.Repeat("0,", maxDims) + `0]}]}`,
		"/huge":      `{"data": "` + strings.Repeat("x", maxEmbedResponseBytes) + `"}`,
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow/embeddings" {
			select { // until the client gives up, or the test ends
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = w.Write([]byte(answers[strings.TrimSuffix(r.URL.Path, "/embeddings")]))
	}))
	defer srv.Close()
	defer close(release)
	for path := range answers {
		t.Run(path, func(t *testing.T) {
			e := &OpenAIEmbeddings{URL: srv.URL + path, Model: "m", APIKey: "secret-key", Client: weburl.GuardedClient(true, 0)}
			_, err := e.Embed(ctx(), []string{"a", "b"})
			if fail.KindOf(err) != fail.KindUnavailable || strings.Contains(err.Error(), "secret-key") {
				t.Fatalf("Embed: %v, want an unavailable error without the key", err)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		e := &OpenAIEmbeddings{URL: srv.URL + "/slow", Model: "m", Client: weburl.GuardedClient(true, 0), Timeout: 50 * time.Millisecond}
		_, err := e.Embed(ctx(), []string{"a"})
		if fail.KindOf(err) != fail.KindUnavailable || !strings.Contains(err.Error(), "no answer within") {
			t.Fatalf("Embed: %v, want a timeout", err)
		}
	})
	t.Run("guarded client refuses loopback", func(t *testing.T) {
		e := &OpenAIEmbeddings{URL: srv.URL + "/short", Model: "m", Client: weburl.GuardedClient(false, 0)}
		if _, err := e.Embed(ctx(), []string{"a"}); fail.KindOf(err) != fail.KindUnavailable {
			t.Fatalf("Embed through a client without private addresses: %v", err)
		}
	})
}

func TestTextsAt(t *testing.T) {
	var v map[string]any
	must(t, json.Unmarshal([]byte(`{"a": "x", "n": 2, "o": {"b": "y"}, "arr": [{"t": "p"}, {"t": "q"}], "s": ["u", "w"]}`), &v))
	tests := []struct {
		path string
		want []string
	}{
		{"a", []string{"x"}},
		{"n", []string{"2"}},
		{"o.b", []string{"y"}},
		{"arr[*].t", []string{"p", "q"}},
		{"arr[1].t", []string{"q"}},
		{"arr[-1].t", []string{"q"}},
		{"s[*]", []string{"u", "w"}},
		{"missing", nil},
		{"a.b", nil},
	}
	for _, tc := range tests {
		eq(t, tc.path, textsAt(v, tc.path), tc.want)
	}
	if got := textsAt(v, "$"); len(got) != 1 || !strings.Contains(got[0], `"a":"x"`) {
		t.Errorf("$: %v", got)
	}
}

func TestVectorsRoundTrip(t *testing.T) {
	in := []vector{{Path: "a", Vec: []float32{1, -2.5, 3}}, {Path: "b.c[*]", Vec: []float32{0.125}}}
	eq(t, "round trip", decodeVectors(encodeVectors(in)), in)
	if decodeVectors([]byte{1, 9, 9}) != nil || decodeVectors([]byte{2}) != nil {
		t.Error("a damaged encoding decoded")
	}
}

// wideEmbedder answers vectors of maxDims numbers (a unit fake: the HTTP
// embedder is tested against the fake endpoint above).
type wideEmbedder struct{}

func (wideEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, maxDims)
		out[i][i%maxDims] = 1
	}
	return out, nil
}

func TestEmbeddingsBytesBounded(t *testing.T) {
	s, _ := newService(t)
	s.Embedder = wideEmbedder{}
	o := org(t, s)
	// Five texts of 4096 numbers: 80 KiB of vectors, allowed.
	in := put([]string{"w"}, "five", `{"l": ["a", "b", "c", "d", "e"]}`)
	in.Index = raw(`["l[*]"]`)
	must(t, s.Put(ctx(), o, in))
	// Seven: 112 KiB, over the bound.
	in = put([]string{"w"}, "seven", `{"l": ["a", "b", "c", "d", "e", "f", "g"]}`)
	in.Index = raw(`["l[*]"]`)
	if err := s.Put(ctx(), o, in); fail.KindOf(err) != fail.KindInvalid || !strings.Contains(fail.MessageOf(err), "embeddings take") {
		t.Fatalf("a put with 112 KiB of embeddings: %v", err)
	}
}

// TestSweepOnWrite: without workers (AWS functions), writes sweep expired
// items, a batch at most every SweepEvery.
func TestSweepOnWrite(t *testing.T) {
	s, c := newService(t)
	s.SweepOnWrite = true
	o := org(t, s)
	short := put([]string{"s"}, "short", `{}`)
	short.TTL = ptr(1.0)
	must(t, s.Put(ctx(), o, short)) // the first write sweeps (nothing yet)
	c.advance(2 * time.Minute)
	u, err := s.Store.Usage(ctx(), o)
	must(t, err)
	if u.Bytes == 0 {
		t.Fatal("the expired item is not counted before the sweep")
	}
	must(t, s.Put(ctx(), o, put([]string{"s"}, "other", `{}`))) // SweepEvery passed: sweeps
	u, err = s.Store.Usage(ctx(), o)
	must(t, err)
	if want := (store.Item{Namespace: []string{"s"}, Key: "other", Value: []byte(`{}`)}).Bytes(); u.Bytes != want {
		t.Errorf("usage after a sweeping write: %d bytes, want %d (only the live item)", u.Bytes, want)
	}
	// Another expired item, swept by a later delete.
	short.Key = ptr("short2")
	must(t, s.Put(ctx(), o, short))
	c.advance(2 * time.Minute)
	must(t, s.Delete(ctx(), o, DeleteInput{Namespace: []string{"s"}, Key: ptr("none")})) // sweeps: 2 min since
	u, err = s.Store.Usage(ctx(), o)
	must(t, err)
	if want := (store.Item{Namespace: []string{"s"}, Key: "other", Value: []byte(`{}`)}).Bytes(); u.Bytes != want {
		t.Errorf("usage after a sweeping delete: %d bytes, want %d", u.Bytes, want)
	}
}
