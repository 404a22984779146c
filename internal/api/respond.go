package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/stepgraph/stepgraph/internal/auth"
	"github.com/stepgraph/stepgraph/internal/fail"
)

// writeJSON encodes v with status. Encoding errors after the status line can
// only be logged by the caller's access log; values here are plain structs.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeDetail(w, http.StatusInternalServerError, "could not encode the response")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(map[string]string{"detail": detail})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
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

// storageRetryAfter is the Retry-After of a 503 for failed storage, in
// seconds: long enough not to hammer a full disk, short enough to notice
// its recovery soon.
const storageRetryAfter = "10"

// statusOf maps a use-case failure to its HTTP status; 0 means unexpected.
func statusOf(err error) int {
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	}
	switch fail.KindOf(err) {
	case fail.KindInvalid:
		return http.StatusUnprocessableEntity
	case fail.KindBadRequest:
		return http.StatusBadRequest
	case fail.KindNotFound:
		return http.StatusNotFound
	case fail.KindConflict:
		return http.StatusConflict
	case fail.KindUnavailable:
		return http.StatusServiceUnavailable
	case fail.KindQuota:
		return http.StatusTooManyRequests
	}
	return 0
}

// fail answers err. Classified failures carry caller-safe messages; anything
// else is an internal error: logged with the request id, answered without
// internals.
func (s *Server) fail(w http.ResponseWriter, r *request, err error) {
	if status := statusOf(err); status != 0 {
		msg := err.Error()
		switch status {
		case http.StatusRequestEntityTooLarge:
			msg = "request body exceeds the limit of " + formatBytes(s.cfg.MaxBodyBytes)
		case http.StatusServiceUnavailable:
			// The storage failed and the write was rolled back, so a retry
			// is safe; the caller gets the cause, the log the files and codes.
			msg = fail.MessageOf(err)
			w.Header().Set("Retry-After", storageRetryAfter)
			id, _ := r.Context().Value(requestIDKey{}).(string)
			s.log.Error("storage unavailable", slog.String("request_id", id), slog.String("operation", r.op.ID), slog.String("error", err.Error()))
		}
		writeDetail(w, status, msg)
		return
	}
	id, _ := r.Context().Value(requestIDKey{}).(string)
	if errors.Is(context.Cause(r.Context()), ErrResponseBudget) {
		// The transport's budget (API Gateway's integration timeout on AWS)
		// ended the request before the use case answered: a slow store, not
		// a defect, and the caller may try again.
		s.log.Warn("request out of time", slog.String("request_id", id), slog.String("operation", r.op.ID), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "1")
		writeDetail(w, http.StatusServiceUnavailable, "the request ran out of time before it was answered; retry it")
		return
	}
	s.log.Error("request failed", slog.String("request_id", id), slog.String("operation", r.op.ID), slog.String("error", err.Error()))
	writeDetail(w, http.StatusInternalServerError, "internal error (request id "+id+")")
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
