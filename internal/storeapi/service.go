package storeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// Store is what the use case needs of the store: the items and the
// organization's counters its quota reads.
type Store interface {
	store.Items
	store.Accounting
}

// Limits bound what an organization may keep and ask; zero fields take
// the defaults below.
type Limits struct {
	// MaxValueBytes bounds an item's value, as JSON.
	MaxValueBytes int
	// MaxKeyBytes bounds a key; MaxLabelBytes each namespace label.
	MaxKeyBytes   int
	MaxLabelBytes int
	// MaxDepth bounds the labels of a namespace.
	MaxDepth int
	// MaxLimit bounds the limit of a search and of a namespace listing;
	// MaxOffset their offset.
	MaxLimit  int
	MaxOffset int
	// MaxScan is how many items (the most recently updated under the
	// prefix) a filtered or semantic search considers.
	MaxScan int
	// MaxStoredBytes is the organization's stored-bytes quota, shared with
	// its threads (runs.Limits.MaxStoredBytes; 0: none).
	MaxStoredBytes int64
}

// The defaults of Limits.
const (
	DefaultMaxValueBytes = 64 << 10
	DefaultMaxKeyBytes   = 1024
	DefaultMaxLabelBytes = 256
	DefaultMaxDepth      = 16
	DefaultMaxLimit      = 1000
	DefaultMaxOffset     = 10000
	DefaultMaxScan       = 1000
	// maxNamespaceScan bounds the distinct namespaces a listing reads.
	maxNamespaceScan = 10000
	// maxIndexFields bounds an item's index paths and maxIndexTexts the
	// texts they give (one embeddings call per write).
	maxIndexFields = 16
	maxIndexTexts  = 32
	// maxVectorBytes bounds an item's encoded embeddings: with the largest
	// value (256 KiB) an item stays within a DynamoDB item (400 KB), and a
	// search's candidates within memory.
	maxVectorBytes = 96 << 10
	// maxTTLMinutes is a century: beyond, a TTL is refused.
	maxTTLMinutes = 100 * 365 * 24 * 60
)

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Service is the use case. Store is required; Embedder turns semantic
// search on.
type Service struct {
	Store  Store
	Limits Limits
	// Embedder embeds index fields and queries (nil: plain filtering, and
	// a search's query is ignored, as upstream's stores without an index).
	Embedder Embedder
	// IndexFields are the paths embedded when a put does not name its own
	// (upstream's index.fields; ["$"], the whole value, when empty).
	IndexFields []string
	// DefaultTTL applies to puts without a ttl (0: such items never expire).
	DefaultTTL time.Duration
	// SweepOnWrite: a put or delete sweeps a batch of expired items when
	// the process has not for SweepEvery (AWS functions, which have no
	// workers; the local server runs StartSweeper instead).
	SweepOnWrite bool
	Now          func() time.Time

	sweep sweeper
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Item is an item as the API answers it.
type Item struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
}

// SearchItem is an item found by a search: Score is its similarity to the
// query (null without a query, an embedder or vectors, as upstream).
type SearchItem struct {
	Item
	Score *float64 `json:"score"`
}

// formatTime writes a time as upstream's server does (Python's isoformat
// of an aware UTC datetime): microseconds always, offset +00:00.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000+00:00") }

func view(it store.Item) Item {
	ns := it.Namespace
	if ns == nil {
		ns = []string{}
	}
	return Item{Namespace: ns, Key: it.Key, Value: json.RawMessage(it.Value),
		CreatedAt: formatTime(it.CreatedAt), UpdatedAt: formatTime(it.UpdatedAt)}
}

// ---- inputs ------------------------------------------------------------

// PutInput is PUT /store/items.
type PutInput struct {
	Namespace []string        `json:"namespace"`
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	// Index: null or absent, the default fields; false, not indexed; a
	// list of paths, those.
	Index json.RawMessage `json:"index"`
	// TTL in minutes; null or absent, DefaultTTL.
	TTL *float64 `json:"ttl"`
}

// DeleteInput is DELETE /store/items.
type DeleteInput struct {
	Namespace []string `json:"namespace"`
	Key       *string  `json:"key"`
}

// GetInput is GET /store/items: the namespace as the SDKs send it, its
// labels joined by ".".
type GetInput struct {
	Namespace  string
	Key        string
	RefreshTTL *bool
}

// SearchInput is POST /store/items/search.
type SearchInput struct {
	NamespacePrefix []string        `json:"namespace_prefix"`
	Filter          json.RawMessage `json:"filter"`
	Limit           *int            `json:"limit"`
	Offset          *int            `json:"offset"`
	Query           *string         `json:"query"`
	RefreshTTL      *bool           `json:"refresh_ttl"`
}

// NamespacesInput is POST /store/namespaces.
type NamespacesInput struct {
	Prefix   []string `json:"prefix"`
	Suffix   []string `json:"suffix"`
	MaxDepth *int     `json:"max_depth"`
	Limit    *int     `json:"limit"`
	Offset   *int     `json:"offset"`
}

// NamespacesOutput is what upstream's server answers (a wrapper object,
// where its document says a bare array).
type NamespacesOutput struct {
	Namespaces [][]string `json:"namespaces"`
}

// ---- rules -------------------------------------------------------------

// checkNamespace applies upstream's label rules (non-empty, no ".", no NUL)
// and ours (no control characters: the adapters' separators; sizes).
// wildcard admits "*" labels (namespace listings match them as any label).
func (s *Service) checkNamespace(field string, ns []string) error {
	if len(ns) > orDefault(s.Limits.MaxDepth, DefaultMaxDepth) {
		return fail.Invalid(field, "has %d labels, at most %d are allowed", len(ns), orDefault(s.Limits.MaxDepth, DefaultMaxDepth))
	}
	for i, l := range ns {
		switch {
		case l == "":
			return fail.Invalid(field, "label %d is empty; namespace labels must be non-empty strings", i)
		case strings.Contains(l, "."):
			return fail.Invalid(field, "label %q contains a period; namespace labels cannot contain periods ('.')", l)
		case strings.IndexFunc(l, isControl) >= 0:
			return fail.Invalid(field, "label %d contains a control character", i)
		case len(l) > orDefault(s.Limits.MaxLabelBytes, DefaultMaxLabelBytes):
			return fail.Invalid(field, "label %d is %d bytes, at most %d are allowed", i, len(l), orDefault(s.Limits.MaxLabelBytes, DefaultMaxLabelBytes))
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func (s *Service) checkKey(key string) error {
	switch {
	case key == "":
		return fail.Invalid("key", "must not be empty")
	case strings.ContainsRune(key, 0):
		return fail.Invalid("key", "contains a NUL character")
	case len(key) > orDefault(s.Limits.MaxKeyBytes, DefaultMaxKeyBytes):
		return fail.Invalid("key", "is %d bytes, at most %d are allowed", len(key), orDefault(s.Limits.MaxKeyBytes, DefaultMaxKeyBytes))
	}
	return nil
}

func (s *Service) page(limit, offset *int, def int) (int, int, error) {
	l, o := def, 0
	// Upstream reads a limit of 0 as its default ("limit or 10").
	if limit != nil && *limit != 0 {
		l = *limit
	}
	if offset != nil {
		o = *offset
	}
	if max := orDefault(s.Limits.MaxLimit, DefaultMaxLimit); l < 1 || l > max {
		return 0, 0, fail.Invalid("limit", "must be between 1 and %d", max)
	}
	if max := orDefault(s.Limits.MaxOffset, DefaultMaxOffset); o < 0 || o > max {
		return 0, 0, fail.Invalid("offset", "must be between 0 and %d", max)
	}
	return l, o, nil
}

// ttlOf reads a TTL in minutes.
func (s *Service) ttlOf(minutes *float64) (time.Duration, error) {
	if minutes == nil {
		return s.DefaultTTL, nil
	}
	m := *minutes
	if math.IsNaN(m) || m <= 0 || m > maxTTLMinutes {
		return 0, fail.Invalid("ttl", "must be a number of minutes above 0 and at most %d, or null for no expiry", maxTTLMinutes)
	}
	d := time.Duration(m * float64(time.Minute))
	if d < time.Millisecond {
		return 0, fail.Invalid("ttl", "must be at least a millisecond (%.6g minutes)", 1.0/60000)
	}
	return d, nil
}

// indexPaths reads a put's index: nil for not indexed.
func (s *Service) indexPaths(raw json.RawMessage) ([]string, error) {
	switch strings.TrimSpace(string(raw)) {
	case "", "null":
		if len(s.IndexFields) == 0 {
			return []string{"$"}, nil
		}
		return s.IndexFields, nil
	case "false":
		return nil, nil
	}
	var paths []string
	if err := json.Unmarshal(raw, &paths); err != nil {
		return nil, fail.Invalid("index", "must be false, null or a list of field paths")
	}
	if len(paths) > maxIndexFields {
		return nil, fail.Invalid("index", "names %d paths, at most %d are allowed", len(paths), maxIndexFields)
	}
	for i, p := range paths {
		if p == "" || len(p) > 256 || !utf8.ValidString(p) {
			return nil, fail.Invalid("index", "path %d must be 1 to 256 bytes", i)
		}
	}
	return paths, nil
}

func quotaError(has, max int64) error {
	return fail.Quota("quota exceeded: the organization stores %d bytes, its quota is %d bytes (stored bytes per organization, store items included); delete items or threads to make room", has, max)
}

// ---- operations --------------------------------------------------------

// Put stores or replaces an item.
func (s *Service) Put(ctx context.Context, orgID string, in PutInput) error {
	if len(in.Namespace) == 0 {
		return fail.Invalid("namespace", "must have at least one label")
	}
	if err := s.checkNamespace("namespace", in.Namespace); err != nil {
		return err
	}
	if in.Namespace[0] == "langgraph" {
		return fail.Invalid("namespace", `the root label cannot be "langgraph" (reserved)`)
	}
	if in.Key == nil {
		return fail.Invalid("key", "is required")
	}
	if err := s.checkKey(*in.Key); err != nil {
		return err
	}
	var value map[string]any
	if len(in.Value) == 0 || json.Unmarshal(in.Value, &value) != nil || value == nil {
		return fail.Invalid("value", "must be an object")
	}
	if max := orDefault(s.Limits.MaxValueBytes, DefaultMaxValueBytes); len(in.Value) > max {
		return fail.Invalid("value", "is %d bytes of JSON, at most %d are allowed", len(in.Value), max)
	}
	ttl, err := s.ttlOf(in.TTL)
	if err != nil {
		return err
	}
	paths, err := s.indexPaths(in.Index)
	if err != nil {
		return err
	}
	now := s.now()
	it := store.Item{OrgID: orgID, Namespace: in.Namespace, Key: *in.Key, Value: compact(in.Value),
		CreatedAt: now, UpdatedAt: now, TTL: ttl}
	if ttl > 0 {
		it.ExpiresAt = now.Add(ttl)
	}
	if s.Embedder != nil && len(paths) > 0 {
		if it.Vectors, err = s.embedItem(ctx, value, paths); err != nil {
			return err
		}
	}
	if err := s.checkQuota(ctx, it, now); err != nil {
		return err
	}
	if err := s.Store.PutItem(ctx, it); err != nil {
		return err
	}
	s.afterWrite(ctx)
	return nil
}

// compact stores a value without the request's insignificant spaces.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// checkQuota refuses a put that grows the organization's stored bytes past
// its quota (a put that shrinks or keeps them is always allowed).
func (s *Service) checkQuota(ctx context.Context, it store.Item, now time.Time) error {
	max := s.Limits.MaxStoredBytes
	if max <= 0 {
		return nil
	}
	var old int64
	prev, err := s.Store.Item(ctx, it.OrgID, it.Namespace, it.Key, now, false)
	switch {
	case err == nil:
		old = prev.Bytes()
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	grow := it.Bytes() - old
	if grow <= 0 {
		return nil
	}
	u, err := s.Store.Usage(ctx, it.OrgID)
	if err != nil {
		return err
	}
	if u.Bytes+grow > max {
		return quotaError(u.Bytes, max)
	}
	return nil
}

func (s *Service) embedItem(ctx context.Context, value map[string]any, paths []string) ([]byte, error) {
	var texts, owners []string
	for _, p := range paths {
		for _, t := range textsAt(value, p) {
			if len(texts) == maxIndexTexts {
				return nil, fail.Invalid("index", "the paths give more than %d texts to embed", maxIndexTexts)
			}
			texts, owners = append(texts, cut(t)), append(owners, p)
		}
	}
	if len(texts) == 0 {
		return nil, nil
	}
	vecs, err := s.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	vs := make([]vector, len(vecs))
	for i, v := range vecs {
		vs[i] = vector{Path: owners[i], Vec: v}
	}
	enc := encodeVectors(vs)
	if len(enc) > maxVectorBytes {
		return nil, fail.Invalid("index", "the paths give %d texts whose embeddings take %d bytes, at most %d are allowed: index fewer fields", len(texts), len(enc), maxVectorBytes)
	}
	return enc, nil
}

// Get returns the item, or nil when there is none (upstream answers 200
// with null).
func (s *Service) Get(ctx context.Context, orgID string, in GetInput) (*Item, error) {
	// The SDKs join the labels with "."; upstream splits them back, so an
	// empty namespace is one empty label, refused.
	ns := strings.Split(in.Namespace, ".")
	if err := s.checkNamespace("namespace", ns); err != nil {
		return nil, err
	}
	if in.Key == "" {
		return nil, fail.Invalid("key", "is required")
	}
	refresh := in.RefreshTTL == nil || *in.RefreshTTL
	it, err := s.Store.Item(ctx, orgID, ns, in.Key, s.now(), refresh)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := view(it)
	return &v, nil
}

// Delete removes the item; a missing item is no error (upstream's 204).
func (s *Service) Delete(ctx context.Context, orgID string, in DeleteInput) error {
	if in.Key == nil {
		return fail.Invalid("key", "is required")
	}
	if err := s.checkNamespace("namespace", in.Namespace); err != nil {
		return err
	}
	if len(in.Namespace) == 0 {
		return nil // upstream deletes nothing under the empty namespace
	}
	if err := s.Store.DeleteItem(ctx, orgID, in.Namespace, *in.Key); err != nil {
		return err
	}
	s.afterWrite(ctx)
	return nil
}

// Search lists the items under a namespace prefix, most recently updated
// first, filtered; with a query and an Embedder, ranked by similarity.
func (s *Service) Search(ctx context.Context, orgID string, in SearchInput) ([]SearchItem, error) {
	prefix := in.NamespacePrefix
	if err := s.checkNamespace("namespace_prefix", prefix); err != nil {
		return nil, err
	}
	f, err := parseFilter(in.Filter)
	if err != nil {
		return nil, err
	}
	limit, offset, err := s.page(in.Limit, in.Offset, 10)
	if err != nil {
		return nil, err
	}
	query := ""
	if in.Query != nil {
		query = *in.Query
	}
	semantic := query != "" && s.Embedder != nil
	now := s.now()
	scan := offset + limit
	if f != nil || semantic {
		scan = orDefault(s.Limits.MaxScan, DefaultMaxScan)
	}
	items, err := s.Store.ListItems(ctx, orgID, prefix, now, scan)
	if err != nil {
		return nil, err
	}
	if f != nil {
		kept := items[:0]
		for _, it := range items {
			var v map[string]any
			if json.Unmarshal(it.Value, &v) == nil && f.matches(v) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	out := []SearchItem{}
	if semantic {
		out, err = s.rank(ctx, items, query)
		if err != nil {
			return nil, err
		}
	} else {
		for _, it := range items {
			out = append(out, SearchItem{Item: view(it)})
		}
	}
	if offset >= len(out) {
		out = []SearchItem{}
	} else {
		out = out[offset:min(len(out), offset+limit)]
	}
	if in.RefreshTTL == nil || *in.RefreshTTL {
		keys := make([]store.ItemKey, len(out))
		for i, it := range out {
			keys[i] = store.ItemKey{Namespace: it.Namespace, Key: it.Key}
		}
		if err := s.Store.RefreshItems(ctx, orgID, keys, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rank orders items by their best field's cosine similarity to the query
// (upstream's max pooling); items without vectors follow, most recently
// updated first, with a null score.
func (s *Service) rank(ctx context.Context, items []store.Item, query string) ([]SearchItem, error) {
	vecs, err := s.Embedder.Embed(ctx, []string{cut(query)})
	if err != nil {
		return nil, err
	}
	q := vecs[0]
	type scored struct {
		it    store.Item
		score float64
		order int
	}
	var withScore []scored
	var without []SearchItem
	for i, it := range items {
		vs := decodeVectors(it.Vectors)
		if len(vs) == 0 {
			without = append(without, SearchItem{Item: view(it)})
			continue
		}
		best := math.Inf(-1)
		for _, v := range vs {
			best = math.Max(best, cosine(q, v.Vec))
		}
		withScore = append(withScore, scored{it, best, i})
	}
	sort.SliceStable(withScore, func(a, b int) bool { return withScore[a].score > withScore[b].score })
	out := make([]SearchItem, 0, len(items))
	for _, w := range withScore {
		score := w.score
		out = append(out, SearchItem{Item: view(w.it), Score: &score})
	}
	return append(out, without...), nil
}

// Namespaces lists the organization's namespaces matching a prefix and a
// suffix ("*" labels match any label), cut to max_depth labels and
// deduplicated, sorted, paged.
func (s *Service) Namespaces(ctx context.Context, orgID string, in NamespacesInput) (NamespacesOutput, error) {
	if err := s.checkNamespace("prefix", in.Prefix); err != nil {
		return NamespacesOutput{}, err
	}
	if err := s.checkNamespace("suffix", in.Suffix); err != nil {
		return NamespacesOutput{}, err
	}
	if in.MaxDepth != nil && (*in.MaxDepth < 1 || *in.MaxDepth > orDefault(s.Limits.MaxDepth, DefaultMaxDepth)) {
		return NamespacesOutput{}, fail.Invalid("max_depth", "must be between 1 and %d", orDefault(s.Limits.MaxDepth, DefaultMaxDepth))
	}
	limit, offset, err := s.page(in.Limit, in.Offset, 100)
	if err != nil {
		return NamespacesOutput{}, err
	}
	if in.Limit != nil && *in.Limit == 0 {
		// Upstream passes a namespace listing's limit 0 through: nothing.
		return NamespacesOutput{Namespaces: [][]string{}}, nil
	}
	// The store narrows by the literal labels before the first wildcard.
	literal := in.Prefix
	if i := slices.Index(literal, "*"); i >= 0 {
		literal = literal[:i]
	}
	all, err := s.Store.ItemNamespaces(ctx, orgID, literal, s.now(), maxNamespaceScan)
	if err != nil {
		return NamespacesOutput{}, err
	}
	seen := map[string]bool{}
	var out [][]string
	for _, ns := range all {
		if !matchPrefix(ns, in.Prefix) || !matchSuffix(ns, in.Suffix) {
			continue
		}
		if in.MaxDepth != nil && len(ns) > *in.MaxDepth {
			ns = ns[:*in.MaxDepth]
		}
		k := strings.Join(ns, ".")
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, ns)
	}
	slices.SortFunc(out, slices.Compare[[]string])
	if offset >= len(out) {
		return NamespacesOutput{Namespaces: [][]string{}}, nil
	}
	return NamespacesOutput{Namespaces: out[offset:min(len(out), offset+limit)]}, nil
}

func matchPrefix(ns, prefix []string) bool {
	if len(ns) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if p != "*" && ns[i] != p {
			return false
		}
	}
	return true
}

func matchSuffix(ns, suffix []string) bool {
	if len(ns) < len(suffix) {
		return false
	}
	off := len(ns) - len(suffix)
	for i, p := range suffix {
		if p != "*" && ns[off+i] != p {
			return false
		}
	}
	return true
}
