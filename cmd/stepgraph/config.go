package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/cors"
	"github.com/stepgraph/stepgraph/internal/runs"
	"github.com/stepgraph/stepgraph/internal/sources/git"
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
	// CORSOrigins are the browser origins allowed to call the API (a
	// LangGraph Studio, a useStream UI): internal/cors; none by default.
	CORSOrigins []string
	// WebhooksAllowPrivate lets webhooks reach loopback and private
	// addresses (development).
	WebhooksAllowPrivate bool
	// OutboundAllowPrivate lets deployed graphs (their runtime, model
	// endpoints, tools and http nodes, and the describe call) and git
	// fetches reach loopback and private addresses, and accepts plain-http
	// loopback URLs in graph documents (development).
	OutboundAllowPrivate bool
	// LocalRepos are the directories deployments may read file://
	// repositories under, resolved (none: local repositories are refused).
	LocalRepos []string
	// GitMaxBytes bounds what one git fetch reads from the network.
	GitMaxBytes int64
	// GitTimeout bounds one check of a git source.
	GitTimeout time.Duration
	// LangGraphPython, when set, runs the LangGraph Python apps of
	// hosted_repo deployments with this interpreter (its environment holds
	// runtimes/python/requirements.txt); LangGraphFindLinks and
	// LangGraphNoIndex are pip's options for the apps' dependencies.
	LangGraphPython    string
	LangGraphFindLinks string
	LangGraphNoIndex   bool

	// MaxRunningPerOrg caps the runs of one organization that execute at
	// once, as runs.Service.MaxRunningPerOrg takes it (negative: no cap).
	MaxRunningPerOrg int
	// Limits are the run limits and organization quotas (limitFlags).
	Limits limitsConfig
	// StreamHeartbeat is how often a quiet run or thread stream sends a
	// heartbeat comment.
	StreamHeartbeat time.Duration
	// HTTP limits of the listener (see httpLimits).
	HTTP httpLimits
	// Crons: the in-process scheduler and the limits of crons.
	Crons cronConfig
	// PublicURL is the server's address as users' browsers reach it, for
	// agent auth's OAuth redirect URIs ("": http:// and the listen address).
	PublicURL string
	// Store: the long-term memory store's settings (storeflags.go).
	Store storeConfig
}

// httpLimits bound what one connection may hold of the server: without
// them an idle keep-alive connection, or a body sent a byte at a time, keeps
// a file descriptor for ever, and a few hundred of them stop the server
// accepting anyone (security review F7). Each is a flag so that tests can
// make it small.
type httpLimits struct {
	// ReadHeaderTimeout bounds the wait for a request's headers, and so
	// also a connection that sends no request at all.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds the wait for a request's body, from the end of
	// its headers. It is a per-request read deadline lifted once the body
	// is read, not http.Server.ReadTimeout: a runs/wait or join answers
	// for as long as the run lasts.
	ReadBodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next
	// request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (431 above it).
	MaxHeaderBytes int
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
	localRepos := os.Getenv("STEPGRAPH_ALLOW_LOCAL_REPOS")
	gitMax, err := strconv.ParseInt(envOr("STEPGRAPH_GIT_MAX_BYTES", strconv.Itoa(git.DefaultMaxBytes)), 10, 64)
	if err != nil {
		return c, fmt.Errorf("STEPGRAPH_GIT_MAX_BYTES: must be an integer")
	}
	gitTimeout, err := time.ParseDuration(envOr("STEPGRAPH_GIT_TIMEOUT", git.DefaultTimeout.String()))
	if err != nil {
		return c, fmt.Errorf("STEPGRAPH_GIT_TIMEOUT: must be a duration like 2m")
	}
	limits, err := parseLimitEnv()
	if err != nil {
		return c, err
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env STEPGRAPH_ADDR)")
	fs.StringVar(&c.PublicURL, "public-url", os.Getenv("STEPGRAPH_PUBLIC_URL"), "the server's address as users' browsers reach it; agent auth's OAuth redirect URI is PUBLIC_URL/v2/auth/callback/{provider_id} (env STEPGRAPH_PUBLIC_URL; default: http:// and the listen address)")
	fs.StringVar(&c.DataDir, "data", c.DataDir, "data directory: database and secrets (env STEPGRAPH_DATA_DIR)")
	fs.BoolVar(&c.LogJSON, "log-json", c.LogJSON, "write logs as JSON (env STEPGRAPH_LOG_FORMAT=json)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env STEPGRAPH_LOG_LEVEL)")
	fs.Int64Var(&maxBody, "max-body-bytes", maxBody, "largest accepted request body (env STEPGRAPH_MAX_BODY_BYTES)")
	fs.DurationVar(&lease, "run-lease", lease, "how long a run stays owned by a process that stopped answering; after a crash its runs resume once it passed (env STEPGRAPH_RUN_LEASE)")
	fs.BoolVar(&c.WebhooksAllowPrivate, "webhooks-allow-private", c.WebhooksAllowPrivate, "let webhooks reach loopback and private addresses, for development (env STEPGRAPH_WEBHOOKS_ALLOW_PRIVATE=true)")
	fs.BoolVar(&c.OutboundAllowPrivate, "outbound-allow-private", c.OutboundAllowPrivate, "let deployed graphs (runtimes, model endpoints, tools, http nodes) and git fetches reach loopback and private addresses, and accept http:// loopback URLs in graph documents, for development (env STEPGRAPH_OUTBOUND_ALLOW_PRIVATE=true)")
	corsOrigins := os.Getenv("STEPGRAPH_CORS_ORIGINS")
	fs.StringVar(&corsOrigins, "cors-origins", corsOrigins, "ORIGIN[,ORIGIN]: browser origins allowed to call the API (CORS), e.g. https://smith.langchain.com for LangGraph Studio, or * for any (env STEPGRAPH_CORS_ORIGINS; default: none)")
	fs.Float64Var(&rate, "rate-limit", rate, "requests per second per API key, bursts of twice that; 0 = no limit (env STEPGRAPH_RATE_LIMIT)")
	fs.StringVar(&localRepos, "allow-local-repos", localRepos, "DIR[,DIR]: let deployments read file:// repositories (and absolute paths) under these directories, symbolic links evaluated; every organization can read them, so for a single-tenant server (env STEPGRAPH_ALLOW_LOCAL_REPOS; default: none, local repositories refused)")
	fs.Int64Var(&gitMax, "git-max-bytes", gitMax, "most bytes one git fetch reads from the network; a larger repository fails to build (env STEPGRAPH_GIT_MAX_BYTES)")
	fs.StringVar(&c.LangGraphPython, "langgraph-python", os.Getenv("STEPGRAPH_LANGGRAPH_PYTHON"), "PYTHON: run the LangGraph Python apps of hosted_repo deployments (a langgraph.json naming Python graphs) with this interpreter, whose environment holds the runtime's requirements (runtimes/python/requirements.txt); each app runs as a process on 127.0.0.1 with the repository's code and the server's permissions, so enable it only for repositories you trust (env STEPGRAPH_LANGGRAPH_PYTHON; default: off, such revisions fail saying so)")
	fs.StringVar(&c.LangGraphFindLinks, "langgraph-find-links", os.Getenv("STEPGRAPH_LANGGRAPH_FIND_LINKS"), "DIR: a wheelhouse pip installs the apps' missing dependencies from (env STEPGRAPH_LANGGRAPH_FIND_LINKS)")
	fs.BoolVar(&c.LangGraphNoIndex, "langgraph-no-index", os.Getenv("STEPGRAPH_LANGGRAPH_NO_INDEX") == "true", "install the apps' missing dependencies only from -langgraph-find-links, never from a package index (env STEPGRAPH_LANGGRAPH_NO_INDEX=true)")
	fs.DurationVar(&gitTimeout, "git-timeout", gitTimeout, "time limit of one check of a git source, fetch included (env STEPGRAPH_GIT_TIMEOUT)")
	fs.DurationVar(&limits.ReadHeaderTimeout, "read-header-timeout", limits.ReadHeaderTimeout, "longest wait for a request's headers, also on a new connection (env STEPGRAPH_READ_HEADER_TIMEOUT)")
	fs.DurationVar(&limits.ReadBodyTimeout, "read-body-timeout", limits.ReadBodyTimeout, "longest wait for a request's body once its headers arrived; answers such as runs/wait are not limited by it (env STEPGRAPH_READ_BODY_TIMEOUT)")
	fs.DurationVar(&limits.IdleTimeout, "idle-timeout", limits.IdleTimeout, "a keep-alive connection without a next request is closed after this (env STEPGRAPH_IDLE_TIMEOUT)")
	fs.IntVar(&limits.MaxHeaderBytes, "max-header-bytes", limits.MaxHeaderBytes, "largest accepted request headers; larger get 431 (env STEPGRAPH_MAX_HEADER_BYTES)")
	fs.DurationVar(&heartbeat, "stream-heartbeat", heartbeat, "how often a quiet run stream sends a heartbeat comment (env STEPGRAPH_STREAM_HEARTBEAT)")
	finishLimits := limitFlags(fs)
	checkFairness := addFairnessFlags(fs, &c)
	checkCrons := addCronFlags(fs, &c.Crons)
	checkStore := addStoreFlags(fs, &c.Store)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := checkCrons(); err != nil {
		return c, err
	}
	if err := checkStore(c.OutboundAllowPrivate); err != nil {
		return c, err
	}
	if err := checkFairness(); err != nil {
		return c, err
	}
	if heartbeat < 100*time.Millisecond {
		return c, fmt.Errorf("-stream-heartbeat: must be at least 100ms")
	}
	c.StreamHeartbeat = heartbeat
	if c.Limits, err = finishLimits(); err != nil {
		return c, err
	}
	if localRepos != "" {
		dirs, err := git.ResolveLocalDirs(strings.Split(localRepos, ","))
		if err != nil {
			return c, fmt.Errorf("-allow-local-repos: %w", err)
		}
		c.LocalRepos = dirs
	}
	if gitMax <= 0 {
		return c, fmt.Errorf("-git-max-bytes: must be positive")
	}
	c.GitMaxBytes = gitMax
	if gitTimeout < time.Second {
		return c, fmt.Errorf("-git-timeout: must be at least 1s")
	}
	c.GitTimeout = gitTimeout
	if err := limits.check(); err != nil {
		return c, err
	}
	c.HTTP = limits
	if rate < 0 {
		return c, fmt.Errorf("-rate-limit: must be >= 0")
	}
	if c.CORSOrigins, err = cors.Parse(corsOrigins); err != nil {
		return c, fmt.Errorf("-cors-origins: %w", err)
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

// Defaults of httpLimits: a header within 10 s, a body (10 MiB at most)
// within 60 s, keep-alive connections idle for 2 minutes, headers of 64 KiB
// (an API key and the usual headers need well under 8 KiB).
const (
	defaultReadHeaderTimeout = "10s"
	defaultReadBodyTimeout   = "60s"
	defaultIdleTimeout       = "120s"
	defaultMaxHeaderBytes    = "65536"
)

// parseLimitEnv reads httpLimits from the environment, with the defaults.
func parseLimitEnv() (httpLimits, error) {
	var l httpLimits
	durations := []struct {
		env, def string
		dst      *time.Duration
	}{
		{"STEPGRAPH_READ_HEADER_TIMEOUT", defaultReadHeaderTimeout, &l.ReadHeaderTimeout},
		{"STEPGRAPH_READ_BODY_TIMEOUT", defaultReadBodyTimeout, &l.ReadBodyTimeout},
		{"STEPGRAPH_IDLE_TIMEOUT", defaultIdleTimeout, &l.IdleTimeout},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(envOr(d.env, d.def))
		if err != nil {
			return l, fmt.Errorf("%s: must be a duration like %s", d.env, d.def)
		}
		*d.dst = v
	}
	n, err := strconv.Atoi(envOr("STEPGRAPH_MAX_HEADER_BYTES", defaultMaxHeaderBytes))
	if err != nil {
		return l, fmt.Errorf("STEPGRAPH_MAX_HEADER_BYTES: must be an integer")
	}
	l.MaxHeaderBytes = n
	return l, nil
}

// check refuses limits that would turn a limit off: a zero timeout means
// "none" to net/http, which is the hole these flags close.
func (l httpLimits) check() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"-read-header-timeout", l.ReadHeaderTimeout},
		{"-read-body-timeout", l.ReadBodyTimeout},
		{"-idle-timeout", l.IdleTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s: must be a positive duration", d.flag)
		}
	}
	if l.MaxHeaderBytes < 1024 {
		return fmt.Errorf("-max-header-bytes: must be at least 1024")
	}
	return nil
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

// addFairnessFlags adds the flags of fair run scheduling (issue 12, F2) to
// fs and returns the check to call after parsing, which sets c.
func addFairnessFlags(fs *flag.FlagSet, c *config) (check func() error) {
	perOrg := envOr("STEPGRAPH_MAX_RUNNING_PER_ORG", strconv.Itoa(runs.DefaultMaxRunningPerOrg))
	fs.StringVar(&perOrg, "max-running-per-org", perOrg, "how many runs of one organization execute at once, across processes on the data directory; "+
		"the organization's other runs wait, pending; 0 = no cap (env STEPGRAPH_MAX_RUNNING_PER_ORG)")
	return func() error {
		n, err := strconv.Atoi(perOrg)
		if err != nil || n < 0 {
			return fmt.Errorf("-max-running-per-org (env STEPGRAPH_MAX_RUNNING_PER_ORG): must be a whole number >= 0 (0 = no cap), got %q", perOrg)
		}
		c.MaxRunningPerOrg = n
		if n == 0 {
			c.MaxRunningPerOrg = -1 // the runs service reads 0 as its default
		}
		return nil
	}
}

// Limits and quotas (docs/reliability.md, "Limits and quotas"): what one
// run may use and what one organization may store, each flag with an
// environment default, from runs.LimitSettings (shared with the AWS
// functions' environment). limitFlags registers the flags, its finish
// function checks them once the flags are parsed.

// limitsConfig is what the limit flags set.
type limitsConfig struct {
	Limits     runs.Limits
	RunTimeout time.Duration
}

func limitFlags(fs *flag.FlagSet) (finish func() (limitsConfig, error)) {
	values := make([]int64, len(runs.LimitSettings))
	var problems []string
	for i, f := range runs.LimitSettings {
		values[i] = f.Default
		if raw, ok := os.LookupEnv(f.Env); ok && raw != "" {
			v, err := strconv.ParseInt(raw, 10, 64)
			if err != nil {
				problems = append(problems, f.Env+": must be an integer")
			}
			values[i] = v
		}
		fs.Int64Var(&values[i], f.Flag, values[i], f.Usage+" (env "+f.Env+")")
	}
	runTime := time.Hour
	if raw, ok := os.LookupEnv("STEPGRAPH_MAX_RUN_TIME"); ok && raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil {
			problems = append(problems, "STEPGRAPH_MAX_RUN_TIME: must be a duration like 1h")
		}
		runTime = d
	}
	fs.DurationVar(&runTime, "max-run-time", runTime, "time per run, from its first start; past it the run ends with status timeout (env STEPGRAPH_MAX_RUN_TIME)")
	return func() (limitsConfig, error) {
		var c limitsConfig
		for i, f := range runs.LimitSettings {
			if err := f.Set(&c.Limits, values[i]); err != nil {
				problems = append(problems, fmt.Sprintf("-%s: %v", f.Flag, err))
			}
		}
		if runTime < time.Second {
			problems = append(problems, "-max-run-time: must be at least 1s")
		}
		c.RunTimeout = runTime
		if len(problems) > 0 {
			return c, errors.New(strings.Join(problems, "; "))
		}
		return c, nil
	}
}
