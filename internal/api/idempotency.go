package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
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
		hashKey, err := s.cfg.RequestHashKey(ctx, r.orgID)
		if err != nil {
			return err
		}
		want := store.IdempotencyRecord{
			OrgID: r.orgID, Scope: r.op.ID, Key: key,
			RequestHash: bodyHash(hashKey, r.body), CreatedAt: time.Now().UTC(),
		}
		got, fresh, err := s.cfg.Idempotency.ReserveIdempotencyKey(ctx, want, abandonedAfter)
		if err != nil {
			return err
		}
		if !fresh {
			return replay(w, got, sameRequest(got.RequestHash, want.RequestHash, r.body))
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

func replay(w http.ResponseWriter, got store.IdempotencyRecord, same bool) error {
	switch {
	case !same:
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

// hashScheme prefixes a request hash made by bodyHash. Records stored
// before it hold a bare hex SHA-256.
const hashScheme = "hmac-sha256:"

// bodyHash is the request hash of an idempotency record: an HMAC of the
// body's canonical JSON form (so a retry that reorders keys or whitespace
// still counts as the same request) under the organization's server-held
// key. A plain hash would let anyone holding the database guess a
// low-entropy client_secret or deployment secret of the body offline
// (security review F18); the key lives in the secrets store, not in the
// database.
func bodyHash(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(canonicalJSON(body))
	return hashScheme + hex.EncodeToString(mac.Sum(nil))
}

// sameRequest reports whether a stored request hash is of body, whose hash
// is now want. A record stored before hashScheme holds the plain SHA-256,
// compared as it was, so a retry across the upgrade still replays.
func sameRequest(stored, want string, body []byte) bool {
	if strings.HasPrefix(stored, hashScheme) {
		return hmac.Equal([]byte(stored), []byte(want))
	}
	sum := sha256.Sum256(canonicalJSON(body))
	return stored == hex.EncodeToString(sum[:])
}

func canonicalJSON(body []byte) []byte {
	var v any
	if json.Unmarshal(body, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			return b
		}
	}
	return body
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
