package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/storeapi"
)

func TestStoreFlags(t *testing.T) {
	t.Setenv("STEPGRAPH_STORE_EMBEDDINGS_API_KEY", "sk-flag-test-key")
	c, err := parseServeFlags([]string{"-outbound-allow-private",
		"-store-embeddings-url", "http://127.0.0.1:9/v1", "-store-embeddings-model", "m", "-store-embeddings-dims", "256",
		"-store-index-fields", "text, title", "-store-default-ttl", "720h", "-store-max-item-bytes", "1000"})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Store
	if s.EmbeddingsURL != "http://127.0.0.1:9/v1" || s.EmbeddingsModel != "m" || s.EmbeddingsDims != 256 ||
		strings.Join(s.IndexFields, "|") != "text|title" || s.DefaultTTL != 720*time.Hour || s.MaxValueBytes != 1000 {
		t.Fatalf("store config %+v", s)
	}
	e, ok := s.embedder(nil, nil).(*storeapi.OpenAIEmbeddings)
	if !ok || e.APIKey != "sk-flag-test-key" || e.Dimensions != 256 {
		t.Fatalf("embedder %T", s.embedder(nil, nil))
	}
	if opts := s.options(); opts.DefaultTTL != 720*time.Hour || opts.Limits.MaxValueBytes != 1000 {
		t.Errorf("options %+v", opts)
	}

	// Off by default: no endpoint, the whole value indexed, 64 KiB values.
	c, err = parseServeFlags(nil)
	if err != nil || c.Store.EmbeddingsURL != "" || c.Store.embedder(nil, nil) != nil ||
		strings.Join(c.Store.IndexFields, "|") != "$" || c.Store.MaxValueBytes != storeapi.DefaultMaxValueBytes {
		t.Fatalf("defaults: %+v, %v", c.Store, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-store-embeddings-url", "http://127.0.0.1:9/v1"}, "-store-embeddings-url: must use https"},
		{[]string{"-store-embeddings-url", "http://embed.example.com/v1", "-outbound-allow-private"}, "-store-embeddings-url: must use https"},
		{[]string{"-store-embeddings-url", "https://e.example.com", "-store-embeddings-model", ""}, "-store-embeddings-model"},
		{[]string{"-store-embeddings-dims", "0"}, "-store-embeddings-dims"},
		{[]string{"-store-default-ttl", "10s"}, "-store-default-ttl"},
		{[]string{"-store-max-item-bytes", "999999999"}, "-store-max-item-bytes"},
	} {
		if _, err := parseServeFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
