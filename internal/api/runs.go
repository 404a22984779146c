package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// DefaultKeepAlive is how often runs/wait and join send a newline while the
// run works (the Python server's interval; the SDKs' read timeouts are far longer).
const DefaultKeepAlive = 5 * time.Second

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

// startRun creates a run and answers it at once.
func (s *Server) startRun(w http.ResponseWriter, r *request, threadID string) error {
	_, run, err := s.decodeAndCreateRun(r, threadID)
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

// createAndWait creates a run and answers its output when it ends.
func (s *Server) createAndWait(w http.ResponseWriter, r *request, threadID string) error {
	in, run, err := s.decodeAndCreateRun(r, threadID)
	if err != nil {
		return err
	}
	cancelOnDisconnect := in.OnDisconnect != nil && *in.OnDisconnect == "cancel"
	s.streamOutput(w, r, run, cancelOnDisconnect)
	return nil
}

// decodeAndCreateRun decodes the run request of the body and creates the run
// on threadID ("" for a stateless run).
func (s *Server) decodeAndCreateRun(r *request, threadID string) (runs.RunRequest, runs.Run, error) {
	var in runs.RunRequest
	if err := r.decode(&in); err != nil {
		return in, runs.Run{}, err
	}
	run, err := s.cfg.Runs.CreateRun(r.Context(), r.orgID, threadID, in)
	return in, run, err
}

func (s *Server) createRunBatch(w http.ResponseWriter, r *request) error {
	return decodeAndAnswer(w, r, func(in []runs.RunRequest) (any, error) {
		return s.cfg.Runs.CreateRunBatch(r.Context(), r.orgID, in)
	})
}

func (s *Server) cancelRuns(w http.ResponseWriter, r *request) error {
	var in runs.RunsCancel
	if err := r.decode(&in); err != nil {
		return err
	}
	_, err := s.cfg.Runs.CancelRuns(r.Context(), r.orgID, in, r.URL.Query().Get("action"))
	return noContent(w, err)
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

// ErrResponseBudget is the cause (context.Cause) with which a transport
// ends a request whose response it cannot keep open any longer (the AWS
// functions: API Gateway's and Lambda's limits). The client did not leave:
// it reconnects (a stream, to Location) or joins (a wait), so the run is
// not cancelled for on_disconnect: cancel.
var ErrResponseBudget = errors.New("the response budget of this transport is spent")

func (s *Server) disconnected(r *request, run runs.Run, cancel bool) {
	if !cancel || errors.Is(context.Cause(r.Context()), ErrResponseBudget) {
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
