package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
		r.Header.Get("Last-Event-ID"), queryModes(q, "stream_mode"))
	if err != nil {
		return err
	}
	defer rs.Close()
	s.serveStream(w, r, rs, &run, truthy(q.Get("cancel_on_disconnect")))
	return nil
}

func (s *Server) joinThreadStream(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	modes := queryModes(q, "stream_mode", "stream_modes")
	rs, err := s.cfg.Runs.JoinThreadStream(r.Context(), r.orgID, r.PathValue("thread_id"), r.Header.Get("Last-Event-ID"), modes)
	if err != nil {
		return err
	}
	defer rs.Close()
	s.serveStream(w, r, rs, nil, false)
	return nil
}

// queryModes are the stream modes of the query parameters names: each
// parameter repeated, or a JSON list in one (the JS SDK sends an array
// option as JSON: stream_mode=["values","updates"]).
func queryModes(q url.Values, names ...string) []string {
	var modes []string
	for _, name := range names {
		for _, v := range q[name] {
			var list []string
			if strings.HasPrefix(strings.TrimSpace(v), "[") && json.Unmarshal([]byte(v), &list) == nil {
				modes = append(modes, list...)
				continue
			}
			modes = append(modes, v)
		}
	}
	return modes
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
	gone := func() {
		if run != nil {
			s.disconnected(r, *run, cancelOnDisconnect)
		}
	}
	s.serveSSE(w, r, rs.Next, gone, "run_id", rs.RunID())
}

// serveSSE answers 200 and writes what next gives as server-sent events,
// with heartbeats, until next says the stream is done, fails, or the
// client leaves (gone is called then). what and id name the stream in logs.
func (s *Server) serveSSE(w http.ResponseWriter, r *request, next func(context.Context, time.Duration) ([]runs.StreamEvent, bool, error),
	gone func(), what, id string) {
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
		evs, done, err := next(r.Context(), every)
		switch {
		case err != nil && r.Context().Err() != nil:
			gone()
			return
		case errors.Is(err, runs.ErrStreamDropped):
			s.log.Warn("stream client too slow; dropped", what, id, "thread_id", r.PathValue("thread_id"))
			return
		case err != nil:
			s.log.Error("stream", what, id, "error", err.Error())
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
			if r.Context().Err() != nil {
				gone()
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

// The thread event protocol (runs/protocol*.go): commands are JSON in,
// JSON out; the event stream is framed like a run stream, with the
// event's seq as its id and its method as its name.

func (s *Server) threadCommand(w http.ResponseWriter, r *request) error {
	var cmd runs.Command
	if err := r.decode(&cmd); err != nil {
		return err
	}
	reply, err := s.cfg.Runs.ThreadCommand(r.Context(), r.orgID, r.PathValue("thread_id"), cmd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

func (s *Server) threadEvents(w http.ResponseWriter, r *request) error {
	var in runs.EventStreamRequest
	if err := r.decode(&in); err != nil {
		return err
	}
	ts, err := s.cfg.Runs.OpenThreadEvents(r.Context(), r.orgID, r.PathValue("thread_id"), in)
	if err != nil {
		return err
	}
	defer ts.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	next := func(ctx context.Context, wait time.Duration) ([]runs.StreamEvent, bool, error) {
		evs, err := ts.Next(ctx, wait)
		return evs, false, err // it ends with its client
	}
	s.serveSSE(w, r, next, func() {}, "thread_id", r.PathValue("thread_id"))
	return nil
}
