package api

import (
	"net/http"
	"strconv"

	"github.com/stepgraph/stepgraph/internal/crons"
)

// cronHandlers are the operations of the Crons tag.
func (s *Server) cronHandlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"createCron":       s.createCron,
		"createThreadCron": s.createThreadCron,
		"searchCrons":      s.searchCrons,
		"countCrons":       s.countCrons,
		"getCron":          s.getCron,
		"updateCron":       s.updateCron,
		"deleteCron":       s.deleteCron,
	}
}

func (s *Server) createCron(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in crons.CreateRequest) (any, error) {
		return s.cfg.Crons.Create(r.Context(), r.orgID, "", in)
	})
}

func (s *Server) createThreadCron(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in crons.CreateRequest) (any, error) {
		return s.cfg.Crons.Create(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	})
}

// searchCrons answers a page with upstream's pagination headers.
func (s *Server) searchCrons(w http.ResponseWriter, r *request) error {
	var in crons.SearchRequest
	if err := r.decode(&in); err != nil {
		return err
	}
	page, err := s.cfg.Crons.Search(r.Context(), r.orgID, in)
	if err != nil {
		return err
	}
	offset := 0
	if in.Offset != nil {
		offset = *in.Offset
	}
	if page.NextOffset < 0 {
		w.Header().Set("X-Pagination-Total", strconv.Itoa(offset+len(page.Crons)))
	} else {
		w.Header().Set("X-Pagination-Total", strconv.Itoa(page.NextOffset+1))
		w.Header().Set("X-Pagination-Next", strconv.Itoa(page.NextOffset))
	}
	writeJSON(w, http.StatusOK, page.Crons)
	return nil
}

func (s *Server) countCrons(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in crons.CountRequest) (any, error) {
		return s.cfg.Crons.Count(r.Context(), r.orgID, in)
	})
}

func (s *Server) getCron(w http.ResponseWriter, r *request) error {
	c, err := s.cfg.Crons.Get(r.Context(), r.orgID, r.PathValue("cron_id"))
	return answer(w, c, err)
}

func (s *Server) updateCron(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in crons.UpdateRequest) (any, error) {
		return s.cfg.Crons.Update(r.Context(), r.orgID, r.PathValue("cron_id"), in)
	})
}

func (s *Server) deleteCron(w http.ResponseWriter, r *request) error {
	return noContent(w, s.cfg.Crons.Delete(r.Context(), r.orgID, r.PathValue("cron_id")))
}
