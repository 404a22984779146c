package api

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/stepgraph/stepgraph/internal/runs"
)

// Run streams over server-sent events: the framing of what runs.RunStream
// delivers, as the upstream Python server writes it (langgraph_api/sse.py:
// "event:", "data:", "id:" lines ended by CRLF, a blank line after each
// event, a ": heartbeat" comment every 5 s). The stream ends, without an
// event of its own, when the run does; clients that lose it reconnect to
// Location with Last-Event-ID.

// DefaultStreamHeartbeat is how often a quiet stream sends a heartbeat
// comment (the Python server's interval; the JS SDK's idle reconnect
// watches for them).
const DefaultStreamHeartbeat = 5 * time.Second

// streamWriteTimeout bounds one write to a stream: a client that reads
// nothing for that long is let go, so it holds no handler forever.
const streamWriteTimeout = 30 * time.Second

func (s *Server) streamRun(w http.ResponseWriter, r *request) error {
	return s.createAndStream(w, r, r.PathValue("thread_id"))
}

func (s *Server) streamStatelessRun(w http.ResponseWriter, r *request) error {
	return s.createAndStream(w, r, "")
}

// createAndStream creates a run and streams it: errors before the run
// exists have their status code, as in runs/wait.
func (s *Server) createAndStream(w http.ResponseWriter, r *request, threadID string) error {
	var in runs.RunRequest
	if err := r.decode(&in); err != nil {
		return err
	}
	run, rs, err := s.cfg.Runs.CreateRunStream(r.Context(), r.orgID, threadID, in)
	if err != nil {
		return err
	}
	defer rs.Close()
	cancel := in.OnDisconnect != nil && *in.OnDisconnect == "cancel"
	s.serveStream(w, r, rs, &run, cancel)
	return nil
}

func (s *Server) joinRunStream(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	run, rs, err := s.cfg.Runs.JoinRunStream(r.Context(), r.orgID, r.PathValue("thread_id"), r.PathValue("run_id"),
		r.Header.Get("Last-Event-ID"), q["stream_mode"])
	if err != nil {
		return err
	}
	defer rs.Close()
	s.serveStream(w, r, rs, &run, truthy(q.Get("cancel_on_disconnect")))
	return nil
}

func (s *Server) joinThreadStream(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	modes := append(q["stream_mode"], q["stream_modes"]...)
	rs, err := s.cfg.Runs.JoinThreadStream(r.Context(), r.orgID, r.PathValue("thread_id"), r.Header.Get("Last-Event-ID"), modes)
	if err != nil {
		return err
	}
	defer rs.Close()
	s.serveStream(w, r, rs, nil, false)
	return nil
}

// serveStream answers 200 with rs's events until the stream is over or the
// client leaves (cancelling the run when asked). run is nil for a thread
// stream. Nothing after the status line can be an error status: a stream
// that cannot go on is closed, and the client reconnects to Location.
func (s *Server) serveStream(w http.ResponseWriter, r *request, rs *runs.RunStream, run *runs.Run, cancelOnDisconnect bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if run != nil {
		path := runPath(*run)
		h.Set("Content-Location", path)
		h.Set("Location", path+"/stream")
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if !s.flushStream(rc, nil) {
		return
	}
	every := s.cfg.StreamHeartbeat
	if every <= 0 {
		every = DefaultStreamHeartbeat
	}
	var buf bytes.Buffer
	for {
		evs, done, err := rs.Next(r.Context(), every)
		switch {
		case err != nil && r.Context().Err() != nil:
			if run != nil {
				s.disconnected(r, *run, cancelOnDisconnect)
			}
			return
		case errors.Is(err, runs.ErrStreamDropped):
			s.log.Warn("stream client too slow; dropped", "run_id", rs.RunID(), "thread_id", r.PathValue("thread_id"))
			return
		case err != nil:
			s.log.Error("stream", "run_id", rs.RunID(), "error", err.Error())
			return
		}
		buf.Reset()
		if len(evs) == 0 && !done {
			buf.WriteString(": heartbeat\r\n\r\n")
		}
		for _, e := range evs {
			writeSSE(&buf, e)
		}
		if buf.Len() > 0 && !s.flushStream(rc, func() error { _, err := w.Write(buf.Bytes()); return err }) {
			if run != nil && r.Context().Err() != nil {
				s.disconnected(r, *run, cancelOnDisconnect)
			}
			return
		}
		if done {
			return
		}
	}
}

// flushStream writes (when write is set) and flushes under the stream's
// write deadline; it reports whether the client is still there.
func (s *Server) flushStream(rc *http.ResponseController, write func() error) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // unsupported by some writers: then unbounded
	if write != nil {
		if err := write(); err != nil {
			return false
		}
	}
	err := rc.Flush()
	// A writer that cannot flush (a buffered one) sends it all at the end.
	return err == nil || errors.Is(err, http.ErrNotSupported)
}

// writeSSE frames one event. JSON has no raw line breaks, so data is one
// line; anything else is split over data lines, as SSE requires.
func writeSSE(buf *bytes.Buffer, e runs.StreamEvent) {
	buf.WriteString("event: ")
	buf.WriteString(e.Event)
	buf.WriteString("\r\n")
	for _, line := range bytes.FieldsFunc(e.Data, func(r rune) bool { return r == '\n' || r == '\r' }) {
		buf.WriteString("data: ")
		buf.Write(line)
		buf.WriteString("\r\n")
	}
	if len(e.Data) == 0 {
		buf.WriteString("data: null\r\n")
	}
	if e.ID >= 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatInt(e.ID, 10))
		buf.WriteString("\r\n")
	}
	buf.WriteString("\r\n")
}
