package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/assembly"
	"github.com/stepgraph/stepgraph/internal/storeapi"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// storeConfig is the long-term memory store's settings: semantic search
// on an OpenAI-compatible embeddings endpoint, index fields, default TTL,
// item size. The endpoint's API key is read from the environment only
// (STEPGRAPH_STORE_EMBEDDINGS_API_KEY): a flag would show it in the
// process list.
type storeConfig struct {
	EmbeddingsURL   string
	EmbeddingsModel string
	EmbeddingsDims  int
	embeddingsKey   string
	IndexFields     []string
	DefaultTTL      time.Duration
	MaxValueBytes   int
}

// addStoreFlags registers the store's flags (environment defaults) and
// returns the function that checks them after parsing.
func addStoreFlags(fs *flag.FlagSet, c *storeConfig) func(allowLoopbackHTTP bool) error {
	c.EmbeddingsURL = os.Getenv("STEPGRAPH_STORE_EMBEDDINGS_URL")
	c.EmbeddingsModel = envOr("STEPGRAPH_STORE_EMBEDDINGS_MODEL", "text-embedding-3-small")
	c.embeddingsKey = os.Getenv("STEPGRAPH_STORE_EMBEDDINGS_API_KEY")
	dims, fields := os.Getenv("STEPGRAPH_STORE_EMBEDDINGS_DIMS"), envOr("STEPGRAPH_STORE_INDEX_FIELDS", "$")
	ttl, maxValue := os.Getenv("STEPGRAPH_STORE_DEFAULT_TTL"), envOr("STEPGRAPH_STORE_MAX_ITEM_BYTES", strconv.Itoa(storeapi.DefaultMaxValueBytes))
	fs.StringVar(&c.EmbeddingsURL, "store-embeddings-url", c.EmbeddingsURL, "base URL of an OpenAI-compatible embeddings API (POST <url>/embeddings) for the store's semantic search; its key is read from env STEPGRAPH_STORE_EMBEDDINGS_API_KEY; none: searches filter only (env STEPGRAPH_STORE_EMBEDDINGS_URL)")
	fs.StringVar(&c.EmbeddingsModel, "store-embeddings-model", c.EmbeddingsModel, "embeddings model (env STEPGRAPH_STORE_EMBEDDINGS_MODEL)")
	fs.StringVar(&dims, "store-embeddings-dims", dims, "ask the model for vectors of this length; empty: the model's own (env STEPGRAPH_STORE_EMBEDDINGS_DIMS)")
	fs.StringVar(&fields, "store-index-fields", fields, "comma-separated paths of an item's value embedded when a put names none; $ is the whole value (env STEPGRAPH_STORE_INDEX_FIELDS)")
	fs.StringVar(&ttl, "store-default-ttl", ttl, "TTL of items put without one, e.g. 720h; empty: they never expire (env STEPGRAPH_STORE_DEFAULT_TTL)")
	fs.StringVar(&maxValue, "store-max-item-bytes", maxValue, "largest item value, as JSON (env STEPGRAPH_STORE_MAX_ITEM_BYTES)")
	return func(allowLoopbackHTTP bool) error {
		if dims != "" {
			n, err := strconv.Atoi(dims)
			if err != nil || n < 1 || n > 4096 {
				return fmt.Errorf("-store-embeddings-dims: must be an integer from 1 to 4096")
			}
			c.EmbeddingsDims = n
		}
		for _, f := range strings.Split(fields, ",") {
			if f = strings.TrimSpace(f); f != "" {
				c.IndexFields = append(c.IndexFields, f)
			}
		}
		if ttl != "" {
			d, err := time.ParseDuration(ttl)
			if err != nil || d < time.Minute {
				return fmt.Errorf("-store-default-ttl: must be a duration of at least 1m, like 720h")
			}
			c.DefaultTTL = d
		}
		n, err := strconv.Atoi(maxValue)
		if err != nil || n < 2 || n > 256<<10 {
			return fmt.Errorf("-store-max-item-bytes: must be an integer from 2 to %d", 256<<10)
		}
		c.MaxValueBytes = n
		if c.EmbeddingsURL != "" {
			if err := weburl.Check("-store-embeddings-url", c.EmbeddingsURL, allowLoopbackHTTP); err != nil {
				return err
			}
			if c.EmbeddingsModel == "" {
				return fmt.Errorf("-store-embeddings-model: must not be empty with -store-embeddings-url")
			}
		}
		return nil
	}
}

// embedder is the store's Embedder on outbound (nil without an endpoint);
// its failures go to log (never its key).
func (c storeConfig) embedder(outbound *http.Client, log *slog.Logger) storeapi.Embedder {
	if c.EmbeddingsURL == "" {
		return nil
	}
	if log != nil {
		outbound = weburl.LogFailures(outbound, log)
	}
	return &storeapi.OpenAIEmbeddings{URL: c.EmbeddingsURL, Model: c.EmbeddingsModel, APIKey: c.embeddingsKey,
		Dimensions: c.EmbeddingsDims, Client: outbound, Log: log}
}

func (c storeConfig) options() assembly.StoreOptions {
	return assembly.StoreOptions{IndexFields: c.IndexFields, DefaultTTL: c.DefaultTTL,
		Limits: storeapi.Limits{MaxValueBytes: c.MaxValueBytes}}
}
