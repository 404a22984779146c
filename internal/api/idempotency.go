package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// abandonedAfter: an in-progress reservation older than this belongs to a
// request that died; a retry may take it over.
const abandonedAfter = 2 * time.Minute

// idempotent makes a create operation retry-safe under an Idempotency-Key
// header: the first successful answer is stored and replayed for a retry with
// the same key and body; the same key with another body is a conflict.
func (s *Server) idempotent(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *request) error {
		key := r.Header.Get("Idempotency-Key")
		if key == "" || s.cfg.Idempotency == nil {
			return h(w, r)
		}
		ctx := r.Context()
		want := store.IdempotencyRecord{
			OrgID: r.orgID, Scope: r.op.ID, Key: key,
			RequestHash: bodyHash(r.body), CreatedAt: time.Now().UTC(),
		}
		got, fresh, err := s.cfg.Idempotency.ReserveIdempotencyKey(ctx, want, abandonedAfter)
		if err != nil {
			return err
		}
		if !fresh {
			return replay(w, got, want.RequestHash)
		}
		rec := &bufferedResponse{header: http.Header{}}
		if err := h(rec, r); err != nil || rec.status >= 300 {
			_ = s.cfg.Idempotency.ReleaseIdempotencyKey(ctx, r.orgID, r.op.ID, key)
			if err != nil {
				return err
			}
		} else if err := s.cfg.Idempotency.CompleteIdempotencyKey(ctx, r.orgID, r.op.ID, key, rec.status, rec.body.Bytes()); err != nil {
			// The record exists; only its replay is lost. Answer, but say so.
			s.log.Error("store idempotent answer", "operation", r.op.ID, "error", err.Error())
		}
		rec.copyTo(w)
		return nil
	}
}

func replay(w http.ResponseWriter, got store.IdempotencyRecord, hash string) error {
	switch {
	case got.RequestHash != hash:
		return fail.Conflict("Idempotency-Key: already used with a different request body")
	case got.Status == 0:
		return fail.Conflict("Idempotency-Key: a request with this key is still in progress; retry later")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(got.Status)
	_, _ = w.Write(got.Body)
	return nil
}

// bodyHash hashes the body's canonical JSON form, so a retry that reorders
// keys or whitespace still counts as the same request.
func bodyHash(body []byte) string {
	var v any
	canonical := body
	if json.Unmarshal(body, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canonical = b
		}
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// bufferedResponse holds an answer until it is known whether to store it.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) copyTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}
