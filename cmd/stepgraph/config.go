package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// config is everything serve reads from flags, with environment defaults.
type config struct {
	Addr         string
	DataDir      string
	LogJSON      bool
	LogLevel     string
	MaxBodyBytes int64
	// RunLease is how long a crashed process's runs wait before another
	// start resumes them.
	RunLease time.Duration
	// RateLimit is requests per second per API key (bursts of twice that);
	// 0 disables the limit.
	RateLimit float64
	// WebhooksAllowPrivate lets webhooks reach loopback and private
	// addresses (development).
	WebhooksAllowPrivate bool
	// OutboundAllowPrivate lets deployed graphs (their runtime, model
	// endpoints, tools and http nodes, and the describe call) reach loopback
	// and private addresses, and accepts plain-http loopback URLs in graph
	// documents (development).
	OutboundAllowPrivate bool
	// StreamHeartbeat is how often a quiet run or thread stream sends a
	// heartbeat comment.
	StreamHeartbeat time.Duration
}

func parseServeFlags(args []string) (config, error) {
	c := config{
		Addr:     envOr("STEPGRAPH_ADDR", "127.0.0.1:8080"),
		DataDir:  envOr("STEPGRAPH_DATA_DIR", "./.stepgraph"),
		LogJSON:  os.Getenv("STEPGRAPH_LOG_FORMAT") == "json",
		LogLevel: envOr("STEPGRAPH_LOG_LEVEL", "info"),
	}
	lease, err := time.ParseDuration(envOr("STEPGRAPH_RUN_LEASE", "10s"))
	if err != nil {
		return c, fmt.Errorf("STEPGRAPH_RUN_LEASE: must be a duration like 10s")
	}
	rate, err := strconv.ParseFloat(envOr("STEPGRAPH_RATE_LIMIT", "1000"), 64)
	if err != nil {
		return c, fmt.Errorf("STEPGRAPH_RATE_LIMIT: must be a number")
	}
	c.WebhooksAllowPrivate = os.Getenv("STEPGRAPH_WEBHOOKS_ALLOW_PRIVATE") == "true"
	c.OutboundAllowPrivate = os.Getenv("STEPGRAPH_OUTBOUND_ALLOW_PRIVATE") == "true"
	heartbeat, err := time.ParseDuration(envOr("STEPGRAPH_STREAM_HEARTBEAT", "5s"))
	if err != nil {
		return c, fmt.Errorf("STEPGRAPH_STREAM_HEARTBEAT: must be a duration like 5s")
	}
	maxBody, err := strconv.ParseInt(envOr("STEPGRAPH_MAX_BODY_BYTES", "10485760"), 10, 64)
	if err != nil {
		return c, fmt.Errorf("STEPGRAPH_MAX_BODY_BYTES: must be an integer")
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env STEPGRAPH_ADDR)")
	fs.StringVar(&c.DataDir, "data", c.DataDir, "data directory: database and secrets (env STEPGRAPH_DATA_DIR)")
	fs.BoolVar(&c.LogJSON, "log-json", c.LogJSON, "write logs as JSON (env STEPGRAPH_LOG_FORMAT=json)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env STEPGRAPH_LOG_LEVEL)")
	fs.Int64Var(&maxBody, "max-body-bytes", maxBody, "largest accepted request body (env STEPGRAPH_MAX_BODY_BYTES)")
	fs.DurationVar(&lease, "run-lease", lease, "how long a run stays owned by a process that stopped answering; after a crash its runs resume once it passed (env STEPGRAPH_RUN_LEASE)")
	fs.BoolVar(&c.WebhooksAllowPrivate, "webhooks-allow-private", c.WebhooksAllowPrivate, "let webhooks reach loopback and private addresses, for development (env STEPGRAPH_WEBHOOKS_ALLOW_PRIVATE=true)")
	fs.BoolVar(&c.OutboundAllowPrivate, "outbound-allow-private", c.OutboundAllowPrivate, "let deployed graphs (runtimes, model endpoints, tools, http nodes) reach loopback and private addresses, and accept http:// loopback URLs in graph documents, for development (env STEPGRAPH_OUTBOUND_ALLOW_PRIVATE=true)")
	fs.Float64Var(&rate, "rate-limit", rate, "requests per second per API key, bursts of twice that; 0 = no limit (env STEPGRAPH_RATE_LIMIT)")
	fs.DurationVar(&heartbeat, "stream-heartbeat", heartbeat, "how often a quiet run stream sends a heartbeat comment (env STEPGRAPH_STREAM_HEARTBEAT)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if heartbeat < 100*time.Millisecond {
		return c, fmt.Errorf("-stream-heartbeat: must be at least 100ms")
	}
	c.StreamHeartbeat = heartbeat
	if rate < 0 {
		return c, fmt.Errorf("-rate-limit: must be >= 0")
	}
	c.RateLimit = rate
	if lease < time.Second {
		return c, fmt.Errorf("-run-lease: must be at least 1s")
	}
	c.RunLease = lease
	if maxBody <= 0 {
		return c, fmt.Errorf("-max-body-bytes: must be positive")
	}
	c.MaxBodyBytes = maxBody
	return c, nil
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func newLogger(w io.Writer, asJSON bool, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: must be debug, info, warn or error")
	}
	opts := &slog.HandlerOptions{Level: lv}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
