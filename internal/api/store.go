package api

import (
	"net/http"
	"strconv"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/storeapi"
)

// The long-term memory store (storeapi): upstream's routes and answers —
// 204 for writes, 200 with null for a missing item.

// errNoStore answers the store's routes on a server whose store adapter
// keeps no items.
var errNoStore = fail.BadRequest("this server has no long-term memory store")

func (s *Server) putStoreItem(w http.ResponseWriter, r *request) error {
	if s.cfg.Store == nil {
		return errNoStore
	}
	var in storeapi.PutInput
	if err := r.decode(&in); err != nil {
		return err
	}
	return noContent(w, s.cfg.Store.Put(r.Context(), r.orgID, in))
}

func (s *Server) getStoreItem(w http.ResponseWriter, r *request) error {
	if s.cfg.Store == nil {
		return errNoStore
	}
	q := r.URL.Query()
	in := storeapi.GetInput{Namespace: q.Get("namespace"), Key: q.Get("key")}
	if q.Has("refresh_ttl") {
		// Validated as a boolean against openapi.yaml.
		v, _ := strconv.ParseBool(q.Get("refresh_ttl"))
		in.RefreshTTL = &v
	}
	it, err := s.cfg.Store.Get(r.Context(), r.orgID, in)
	return answer(w, it, err)
}

func (s *Server) deleteStoreItem(w http.ResponseWriter, r *request) error {
	if s.cfg.Store == nil {
		return errNoStore
	}
	var in storeapi.DeleteInput
	if err := r.decode(&in); err != nil {
		return err
	}
	return noContent(w, s.cfg.Store.Delete(r.Context(), r.orgID, in))
}

func (s *Server) searchStoreItems(w http.ResponseWriter, r *request) error {
	if s.cfg.Store == nil {
		return errNoStore
	}
	return decodeAndAnswer(w, r, func(in storeapi.SearchInput) (any, error) {
		items, err := s.cfg.Store.Search(r.Context(), r.orgID, in)
		return map[string]any{"items": items}, err
	})
}

func (s *Server) listStoreNamespaces(w http.ResponseWriter, r *request) error {
	if s.cfg.Store == nil {
		return errNoStore
	}
	return decodeAndAnswer(w, r, func(in storeapi.NamespacesInput) (any, error) {
		return s.cfg.Store.Namespaces(r.Context(), r.orgID, in)
	})
}
