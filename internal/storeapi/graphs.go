package storeapi

import (
	"context"
	"encoding/json"
	"strings"
)

// OrgStore is the store of one organization as its graphs' store nodes
// reach it (graphdoc.Store): the same operations, rules, limits and quota
// as the API's.
type OrgStore struct {
	s     *Service
	orgID string
}

// ForOrg returns the store of orgID's graphs.
func (s *Service) ForOrg(orgID string) *OrgStore { return &OrgStore{s: s, orgID: orgID} }

// asMap turns an answer into the JSON a graph's state holds.
func asMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// GetItem implements graphdoc.Store.
func (o *OrgStore) GetItem(ctx context.Context, namespace []string, key string) (map[string]any, error) {
	if err := o.s.checkNamespace("namespace", namespace); err != nil {
		return nil, err
	}
	it, err := o.s.Get(ctx, o.orgID, GetInput{Namespace: strings.Join(namespace, "."), Key: key})
	if err != nil || it == nil {
		return nil, err
	}
	return asMap(it), nil
}

// PutItem implements graphdoc.Store.
func (o *OrgStore) PutItem(ctx context.Context, namespace []string, key string, value map[string]any, ttl *float64, index any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return err
	}
	in := PutInput{Namespace: namespace, Key: &key, Value: raw, TTL: ttl}
	if index != nil {
		in.Index, _ = json.Marshal(index)
	}
	return o.s.Put(ctx, o.orgID, in)
}

// DeleteItem implements graphdoc.Store.
func (o *OrgStore) DeleteItem(ctx context.Context, namespace []string, key string) error {
	return o.s.Delete(ctx, o.orgID, DeleteInput{Namespace: namespace, Key: &key})
}

// SearchItems implements graphdoc.Store.
func (o *OrgStore) SearchItems(ctx context.Context, prefix []string, query string, filter map[string]any, limit int) ([]map[string]any, error) {
	in := SearchInput{NamespacePrefix: prefix, Limit: &limit}
	if query != "" {
		in.Query = &query
	}
	if filter != nil {
		in.Filter, _ = json.Marshal(filter)
	}
	items, err := o.s.Search(ctx, o.orgID, in)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = asMap(it)
	}
	return out, nil
}
