package api

import (
	"encoding/json"
	"net/http"

	"github.com/stepgraph/stepgraph/internal/fail"

	"github.com/stepgraph/stepgraph/internal/runs"
)

func (s *Server) createThread(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadInput) (any, error) { return s.cfg.Runs.CreateThread(r.Context(), r.orgID, in) })
}

func (s *Server) searchThreads(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadSearch) (any, error) {
		return s.cfg.Runs.SearchThreadsSelected(r.Context(), r.orgID, in)
	})
}

func (s *Server) countThreads(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadCount) (any, error) { return s.cfg.Runs.CountThreads(r.Context(), r.orgID, in) })
}

func (s *Server) pruneThreads(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadPrune) (any, error) { return s.cfg.Runs.PruneThreads(r.Context(), r.orgID, in) })
}

func (s *Server) copyThread(w http.ResponseWriter, r *request) error {
	t, err := s.cfg.Runs.CopyThread(r.Context(), r.orgID, r.PathValue("thread_id"))
	return answer(w, t, err)
}

func (s *Server) updateThreadState(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.StateUpdate) (any, error) {
		return s.cfg.Runs.UpdateState(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	})
}

func (s *Server) patchThreadState(w http.ResponseWriter, r *request) error {
	var in runs.StatePatch
	if err := r.decode(&in); err != nil {
		return err
	}
	return noContent(w, s.cfg.Runs.PatchState(r.Context(), r.orgID, r.PathValue("thread_id"), in))
}

func (s *Server) postThreadStateAt(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.StateAtRequest) (any, error) {
		return s.cfg.Runs.StateAt(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	})
}

func (s *Server) getThread(w http.ResponseWriter, r *request) error {
	t, err := s.cfg.Runs.GetThread(r.Context(), r.orgID, r.PathValue("thread_id"))
	return answer(w, t, err)
}

func (s *Server) patchThread(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadPatch) (any, error) {
		return s.cfg.Runs.PatchThread(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	})
}

func (s *Server) deleteThread(w http.ResponseWriter, r *request) error {
	return noContent(w, s.cfg.Runs.DeleteThread(r.Context(), r.orgID, r.PathValue("thread_id")))
}

func (s *Server) getThreadState(w http.ResponseWriter, r *request) error {
	if wantsSubgraphs(r) {
		st, err := s.cfg.Runs.ThreadStateSubgraphs(r.Context(), r.orgID, r.PathValue("thread_id"), "")
		return answer(w, st, err)
	}
	st, err := s.cfg.Runs.ThreadState(r.Context(), r.orgID, r.PathValue("thread_id"))
	return answer(w, st, err)
}

func (s *Server) getThreadStateAt(w http.ResponseWriter, r *request) error {
	if wantsSubgraphs(r) {
		st, err := s.cfg.Runs.ThreadStateSubgraphs(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("checkpoint_id"))
		return answer(w, st, err)
	}
	st, err := s.cfg.Runs.ThreadStateAt(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("checkpoint_id"))
	return answer(w, st, err)
}

// wantsSubgraphs reads ?subgraphs=true (the SDKs send true or True).
func wantsSubgraphs(r *request) bool {
	v := r.URL.Query().Get("subgraphs")
	return v == "true" || v == "True"
}

func (s *Server) getThreadHistory(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.HistoryQuery) (any, error) {
		return s.cfg.Runs.History(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	})
}

// getThreadHistoryGet is upstream's GET form of the history: limit and
// before from the query string (api/threads.py get_thread_history), the
// limit defaulting to 1 as upstream's server reads it.
func (s *Server) getThreadHistoryGet(w http.ResponseWriter, r *request) error {
	q := runs.HistoryQuery{Limit: r.intQuery("limit", 1)}
	if query := r.URL.Query(); query.Has("before") {
		// Present, it names a checkpoint: an empty value is no id (the
		// use case reads "" as "no before").
		b := query.Get("before")
		if b == "" {
			return fail.Invalid("before", "Invalid checkpoint ID: must be a UUID")
		}
		q.Before, _ = json.Marshal(b)
	}
	st, err := s.cfg.Runs.History(r.Context(), r.orgID, r.PathValue("thread_id"), q)
	return answer(w, st, err)
}

func (s *Server) getThreadStorage(w http.ResponseWriter, r *request) error {
	st, err := s.cfg.Runs.ThreadStorage(r.Context(), r.orgID, r.PathValue("thread_id"))
	return answer(w, st, err)
}
