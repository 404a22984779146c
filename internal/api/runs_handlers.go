package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// DefaultKeepAlive is how often runs/wait and join send a newline while the
// run works (the Python server's interval; the SDKs' read timeouts are far longer).
const DefaultKeepAlive = 5 * time.Second

func (s *Server) runHandlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"createAssistant":     s.createAssistant,
		"searchAssistants":    s.searchAssistants,
		"getAssistant":        s.getAssistant,
		"deleteAssistant":     s.deleteAssistant,
		"getAssistantGraph":   s.getAssistantGraph,
		"getAssistantSchemas": s.getAssistantSchemas,

		"createThread":     s.createThread,
		"searchThreads":    s.searchThreads,
		"getThread":        s.getThread,
		"patchThread":      s.patchThread,
		"deleteThread":     s.deleteThread,
		"getThreadState":   s.getThreadState,
		"getThreadStateAt": s.getThreadStateAt,
		"getThreadHistory": s.getThreadHistory,

		"listRuns":           s.listRuns,
		"createRun":          s.createRun,
		"waitRun":            s.waitRun,
		"getRun":             s.getRun,
		"deleteRun":          s.deleteRun,
		"joinRun":            s.joinRun,
		"cancelRun":          s.cancelRun,
		"createStatelessRun": s.createStatelessRun,
		"waitStatelessRun":   s.waitStatelessRun,
	}
}

// answer writes v as JSON, or the error.
func answer[T any](w http.ResponseWriter, v T, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// decodeAndAnswer decodes the body into In, calls the use case and answers.
func decodeAndAnswer[In any](w http.ResponseWriter, r *request, call func(In) (any, error)) error {
	var in In
	if err := r.decode(&in); err != nil {
		return err
	}
	out, err := call(in)
	return answer(w, out, err)
}

func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// --- assistants ---

func (s *Server) createAssistant(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantInput) (any, error) { return s.cfg.Runs.CreateAssistant(r.Context(), r.orgID, in) })
}

func (s *Server) searchAssistants(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.AssistantSearch) (any, error) {
		return s.cfg.Runs.SearchAssistants(r.Context(), r.orgID, in)
	})
}

func (s *Server) getAssistant(w http.ResponseWriter, r *request) error {
	a, err := s.cfg.Runs.GetAssistant(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, a, err)
}

func (s *Server) deleteAssistant(w http.ResponseWriter, r *request) error {
	return noContent(w, s.cfg.Runs.DeleteAssistant(r.Context(), r.orgID, r.PathValue("assistant_id")))
}

func (s *Server) getAssistantGraph(w http.ResponseWriter, r *request) error {
	info, err := s.cfg.Runs.AssistantGraph(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, map[string]any{"nodes": info.Nodes, "edges": info.Edges}, err)
}

func (s *Server) getAssistantSchemas(w http.ResponseWriter, r *request) error {
	sc, err := s.cfg.Runs.AssistantSchemas(r.Context(), r.orgID, r.PathValue("assistant_id"))
	return answer(w, sc, err)
}

// --- threads ---

func (s *Server) createThread(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadInput) (any, error) { return s.cfg.Runs.CreateThread(r.Context(), r.orgID, in) })
}

func (s *Server) searchThreads(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.ThreadSearch) (any, error) { return s.cfg.Runs.SearchThreads(r.Context(), r.orgID, in) })
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
	st, err := s.cfg.Runs.ThreadState(r.Context(), r.orgID, r.PathValue("thread_id"))
	return answer(w, st, err)
}

func (s *Server) getThreadStateAt(w http.ResponseWriter, r *request) error {
	st, err := s.cfg.Runs.ThreadStateAt(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("checkpoint_id"))
	return answer(w, st, err)
}

func (s *Server) getThreadHistory(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in runs.HistoryQuery) (any, error) {
		return s.cfg.Runs.History(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	})
}

// --- runs ---

func (s *Server) listRuns(w http.ResponseWriter, r *request) error {
	list, err := s.cfg.Runs.ListRuns(r.Context(), r.orgID, r.PathValue("thread_id"),
		r.URL.Query().Get("status"), r.intQuery("limit", 10), r.intQuery("offset", 0))
	return answer(w, list, err)
}

func (s *Server) createRun(w http.ResponseWriter, r *request) error {
	return s.startRun(w, r, r.PathValue("thread_id"))
}

func (s *Server) createStatelessRun(w http.ResponseWriter, r *request) error {
	return s.startRun(w, r, "")
}

func (s *Server) startRun(w http.ResponseWriter, r *request, threadID string) error {
	var in runs.RunRequest
	if err := r.decode(&in); err != nil {
		return err
	}
	run, err := s.cfg.Runs.CreateRun(r.Context(), r.orgID, threadID, in)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Location", runPath(run))
	writeJSON(w, http.StatusOK, run)
	return nil
}

func (s *Server) waitRun(w http.ResponseWriter, r *request) error {
	return s.createAndWait(w, r, r.PathValue("thread_id"))
}

func (s *Server) waitStatelessRun(w http.ResponseWriter, r *request) error {
	return s.createAndWait(w, r, "")
}

func (s *Server) createAndWait(w http.ResponseWriter, r *request, threadID string) error {
	var in runs.RunRequest
	if err := r.decode(&in); err != nil {
		return err
	}
	run, err := s.cfg.Runs.CreateRun(r.Context(), r.orgID, threadID, in)
	if err != nil {
		return err
	}
	cancelOnDisconnect := in.OnDisconnect != nil && *in.OnDisconnect == "cancel"
	s.streamOutput(w, r, run, cancelOnDisconnect)
	return nil
}

func (s *Server) getRun(w http.ResponseWriter, r *request) error {
	run, err := s.cfg.Runs.GetRun(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("run_id"))
	return answer(w, run, err)
}

func (s *Server) deleteRun(w http.ResponseWriter, r *request) error {
	return noContent(w, s.cfg.Runs.DeleteRun(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("run_id")))
}

func (s *Server) joinRun(w http.ResponseWriter, r *request) error {
	run, err := s.cfg.Runs.GetRun(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	s.streamOutput(w, r, run, truthy(r.URL.Query().Get("cancel_on_disconnect")))
	return nil
}

func (s *Server) cancelRun(w http.ResponseWriter, r *request) error {
	run, err := s.cfg.Runs.CancelRun(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("run_id"), r.URL.Query().Get("action"))
	if err != nil {
		return err
	}
	if !truthy(r.URL.Query().Get("wait")) {
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	s.streamOutput(w, r, run, false)
	return nil
}

// streamOutput answers 200 at once and then the run's output, with newline
// keep-alives meanwhile. Nothing after the status line can be an error
// status: a failure is reported in the body. cancelOnDisconnect interrupts
// the run when the client goes away first.
func (s *Server) streamOutput(w http.ResponseWriter, r *request, run runs.Run, cancelOnDisconnect bool) {
	path := runPath(run)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Location", path)
	w.Header().Set("Location", path+"/join")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	type result struct {
		body json.RawMessage
		err  error
	}
	done := make(chan result, 1)
	go func() {
		body, err := s.cfg.Runs.Wait(r.Context(), r.orgID, run.ThreadID, run.RunID)
		done <- result{body, err}
	}()
	every := s.cfg.KeepAlive
	if every <= 0 {
		every = DefaultKeepAlive
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			switch {
			case res.err != nil && r.Context().Err() != nil:
				s.disconnected(r, run, cancelOnDisconnect)
			case res.err != nil:
				s.log.Error("wait for run", "run_id", run.RunID, "error", res.err.Error())
				body, _ := json.Marshal(map[string]any{"__error__": map[string]string{
					"error": "InternalError", "message": "the server could not read the run's result; GET " + path + "/join to retry"}})
				_, _ = w.Write(body)
			default:
				_, _ = w.Write(res.body)
			}
			return
		case <-tick.C:
			if _, err := w.Write([]byte("\n")); err == nil {
				_ = rc.Flush()
			}
		}
	}
}

func (s *Server) disconnected(r *request, run runs.Run, cancel bool) {
	if !cancel {
		return
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer stop()
	if _, err := s.cfg.Runs.CancelRun(ctx, r.orgID, run.ThreadID, run.RunID, "interrupt"); err != nil {
		s.log.Warn("cancel run on disconnect", "run_id", run.RunID, "error", err.Error())
	}
}

func runPath(run runs.Run) string {
	return "/threads/" + run.ThreadID + "/runs/" + run.RunID
}

func truthy(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes":
		return true
	}
	return false
}
