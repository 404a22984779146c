package storeapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// Embedder turns texts into vectors (one per text, in order): the
// operator's embeddings endpoint. Semantic search is off without one.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Bounds of the embeddings calls.
const (
	// DefaultEmbedTimeout bounds one call to the endpoint.
	DefaultEmbedTimeout = 30 * time.Second
	// maxEmbedResponseBytes bounds what one answer may be: enough for a
	// batch of maxIndexFields vectors of maxDims numbers as JSON text.
	maxEmbedResponseBytes = 8 << 20
	// maxDims bounds the length of a vector the endpoint may answer.
	maxDims = 4096
	// maxEmbedTextBytes bounds each text sent (cut at a character).
	maxEmbedTextBytes = 32 << 10
)

// OpenAIEmbeddings is an Embedder on an OpenAI-compatible endpoint:
// POST {URL}/embeddings with {"model", "input": [...]} answering
// {"data": [{"index", "embedding": [...]}]}. The API key is sent as a
// bearer token and never appears in an error or a log line.
type OpenAIEmbeddings struct {
	// URL is the API's base URL, e.g. https://api.openai.com/v1.
	URL    string
	Model  string
	APIKey string
	// Dimensions, when positive, is sent as "dimensions" (models that can
	// shorten their vectors).
	Dimensions int
	// Client makes the calls: the guarded outbound client
	// (weburl.GuardedClient). Required.
	Client *http.Client
	// Timeout bounds one call (DefaultEmbedTimeout when 0).
	Timeout time.Duration
	// Log gets a warning for each answer that is not a list of embeddings
	// (its status and host only: an error body may quote the key); nil:
	// none. Transport failures are the Client's to log
	// (weburl.LogFailures).
	Log *slog.Logger
}

func (e *OpenAIEmbeddings) warn(res *http.Response, problem string) {
	if e.Log != nil {
		e.Log.Warn("store embeddings endpoint failed", "host", res.Request.URL.Host, "status", res.StatusCode, "problem", problem)
	}
}

// embedFailure is the caller-safe error of a failed embeddings call.
func embedFailure(format string, args ...any) error {
	return &fail.Error{Kind: fail.KindUnavailable, Message: "the embeddings endpoint failed: " + fmt.Sprintf(format, args...)}
}

// Embed implements Embedder.
func (e *OpenAIEmbeddings) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultEmbedTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := map[string]any{"model": e.Model, "input": texts, "encoding_format": "float"}
	if e.Dimensions > 0 {
		req["dimensions"] = e.Dimensions
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.URL, "/")+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, embedFailure("its URL is not valid")
	}
	hr.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	res, err := e.Client.Do(hr)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, embedFailure("no answer within %s", timeout)
		}
		return nil, embedFailure("the call did not complete")
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxEmbedResponseBytes+1))
	if err != nil {
		return nil, embedFailure("its answer could not be read")
	}
	if len(raw) > maxEmbedResponseBytes {
		e.warn(res, "answer too large")
		return nil, embedFailure("its answer is over %d bytes", maxEmbedResponseBytes)
	}
	if res.StatusCode != http.StatusOK {
		e.warn(res, "status")
		return nil, embedFailure("it answered status %d", res.StatusCode)
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		e.warn(res, "not an embeddings list")
		return nil, embedFailure("its answer is not an embeddings list")
	}
	vecs := make([][]float32, len(texts))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(texts) || vecs[d.Index] != nil {
			return nil, embedFailure("its answer has an embedding at index %d for %d inputs", d.Index, len(texts))
		}
		if len(d.Embedding) == 0 || len(d.Embedding) > maxDims {
			return nil, embedFailure("its answer has an embedding of %d numbers (1 to %d)", len(d.Embedding), maxDims)
		}
		vecs[d.Index] = d.Embedding
	}
	for i, v := range vecs {
		if v == nil {
			return nil, embedFailure("its answer has no embedding for input %d", i)
		}
	}
	return vecs, nil
}

// cut bounds a text sent to the endpoint, at a character boundary.
func cut(s string) string {
	if len(s) <= maxEmbedTextBytes {
		return s
	}
	s = s[:maxEmbedTextBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// vector is one embedded field of an item.
type vector struct {
	Path string
	Vec  []float32
}

// encodeVectors is the store's opaque Item.Vectors: a version byte, then
// per field its path (uint16 length) and its vector (uint32 length,
// float32 little-endian).
func encodeVectors(vs []vector) []byte {
	if len(vs) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteByte(1)
	for _, v := range vs {
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(v.Path)))
		b.WriteString(v.Path)
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(v.Vec)))
		for _, f := range v.Vec {
			_ = binary.Write(&b, binary.LittleEndian, math.Float32bits(f))
		}
	}
	return b.Bytes()
}

// decodeVectors reads encodeVectors' output; a damaged encoding reads as
// no vectors (the item is then ranked after the scored ones).
func decodeVectors(raw []byte) []vector {
	if len(raw) == 0 || raw[0] != 1 {
		return nil
	}
	r := bytes.NewReader(raw[1:])
	var out []vector
	for r.Len() > 0 {
		var pl uint16
		if binary.Read(r, binary.LittleEndian, &pl) != nil || int(pl) > r.Len() {
			return nil
		}
		path := make([]byte, pl)
		_, _ = io.ReadFull(r, path)
		var n uint32
		if binary.Read(r, binary.LittleEndian, &n) != nil || int(n)*4 > r.Len() {
			return nil
		}
		vec := make([]float32, n)
		for i := range vec {
			var bits uint32
			_ = binary.Read(r, binary.LittleEndian, &bits)
			vec[i] = math.Float32frombits(bits)
		}
		out = append(out, vector{Path: string(path), Vec: vec})
	}
	return out
}

// cosine is the cosine similarity of a and b (0 when either is zero or
// their lengths differ: vectors of another model compare as unrelated).
func cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

// textsAt returns the texts of value at an index path, upstream's
// get_text_at_path: "$" is the whole value as JSON; otherwise fields
// separated by ".", where "field[*]" takes every element of an array and
// "field[n]" one. Strings are themselves, other values their JSON.
func textsAt(value map[string]any, path string) []string {
	if path == "$" {
		b, _ := json.Marshal(value)
		return []string{string(b)}
	}
	cur := []any{value}
	for _, seg := range strings.Split(path, ".") {
		name, idx, hasIdx := strings.Cut(seg, "[")
		var next []any
		for _, c := range cur {
			obj, ok := c.(map[string]any)
			if !ok {
				continue
			}
			v, ok := obj[name]
			if !ok {
				continue
			}
			if !hasIdx {
				next = append(next, v)
				continue
			}
			arr, ok := v.([]any)
			if !ok {
				continue
			}
			idx = strings.TrimSuffix(idx, "]")
			if idx == "*" {
				next = append(next, arr...)
				continue
			}
			var i int
			if _, err := fmt.Sscanf(idx, "%d", &i); err == nil {
				if i < 0 {
					i += len(arr)
				}
				if i >= 0 && i < len(arr) {
					next = append(next, arr[i])
				}
			}
		}
		cur = next
	}
	var out []string
	for _, v := range cur {
		if s, ok := v.(string); ok {
			out = append(out, s)
		} else {
			b, _ := json.Marshal(v)
			out = append(out, string(b))
		}
	}
	return out
}
