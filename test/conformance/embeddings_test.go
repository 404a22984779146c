package conformance

import (
	"encoding/json"
	"hash/fnv"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// embeddingsKey is the fake endpoint's API key: the server gets it from its
// environment (STEPGRAPH_STORE_EMBEDDINGS_API_KEY) and must send it as a
// bearer token; the suites check it appears in no answer.
const embeddingsKey = "sk-store-embeddings-Zq81xT"

// fakeEmbeddings is an OpenAI-compatible /v1/embeddings endpoint on
// 127.0.0.1 for the store's semantic search: deterministic vectors, each
// word of a text adding one to the dimension its hash picks, so texts that
// share words are similar. It answers 401 without the key.
type fakeEmbeddings struct {
	url   string
	mu    sync.Mutex
	calls int
}

func startFakeEmbeddings(t *testing.T) *fakeEmbeddings {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEmbeddings{url: "http://" + ln.Addr().String() + "/v1"}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+embeddingsKey {
		http.Error(w, `{"error": "bad key"}`, http.StatusUnauthorized)
		return
	}
	var req struct {
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error": "bad request"}`, http.StatusBadRequest)
		return
	}
	data := make([]map[string]any, len(req.Input))
	for i, text := range req.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": wordVector(text)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "fake"})
}

func wordVector(text string) []float32 {
	const dims = 64
	v := make([]float32, dims)
	for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
		h := fnv.New32a()
		h.Write([]byte(word))
		v[h.Sum32()%dims]++
	}
	return v
}
