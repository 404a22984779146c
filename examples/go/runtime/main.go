// Command runtime is a stepgraph function runtime in Go, standard library
// only. It speaks the function runtime protocol (docs/runtime-protocol.md):
//
//	POST /invoke     run one function node, or one function tool
//	GET  /describe   the graph config, every graph document inline
//
// Run it with
//
//	go run ./examples/go/runtime --host 127.0.0.1 --port 8080
//
// The first line it prints is "listening on http://HOST:PORT" (with --port 0
// it picks a free port and prints it). Point an external_docker
// deployment's custom_url at that URL.
//
// Copy this directory to start your own runtime: runtime.go is the protocol
// (a tiny library), this file is the agent — the graph config that describe
// returns and the functions it names — and the server. It serves the same
// agent as examples/python/runtime.py.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The agent.

// orders are the orders the lookup_order tool knows about.
var orders = map[string]map[string]any{
	"42": {"order_id": "42", "status": "shipped", "carrier": "UPS", "total": "59.90 EUR"},
	"43": {"order_id": "43", "status": "processing", "carrier": nil, "total": "12.00 EUR"},
}

type obj = map[string]any

// graphConfig is what describe answers. The model endpoint and the name of
// the deployment secret that holds its API key come from the environment,
// so the same runtime can talk to OpenAI or to a local OpenAI-compatible
// server. An empty STEPGRAPH_EXAMPLE_API_KEY_SECRET sends no API key.
func graphConfig() map[string]any {
	model := obj{
		"kind":        "chat_model",
		"description": "Answers the customer; may look orders up.",
		"base_url":    cmp.Or(os.Getenv("STEPGRAPH_EXAMPLE_MODEL_URL"), "https://api.openai.com/v1"),
		"model":       cmp.Or(os.Getenv("STEPGRAPH_EXAMPLE_MODEL"), "gpt-4o-mini"),
		"system": "You are the support agent of an online shop. The request is about {{ state.topic }}. " +
			"Use lookup_order to check an order. Be brief.",
		"temperature": 0,
		"tools":       []any{"lookup_order"},
	}
	secret, set := os.LookupEnv("STEPGRAPH_EXAMPLE_API_KEY_SECRET")
	if !set {
		secret = "OPENAI_API_KEY"
	}
	if secret != "" {
		model["api_key_secret"] = secret
	}
	return obj{"graphs": obj{
		"support": obj{
			"description": "Classifies a support request, then answers it, looking orders up.",
			"state": obj{
				"messages": obj{"reducer": "messages"},
				"topic":    obj{"schema": obj{"type": "string"}},
			},
			"input_schema": obj{
				"type":       "object",
				"required":   []any{"messages"},
				"properties": obj{"messages": obj{"type": "array", "minItems": 1}},
			},
			"tools": obj{
				"lookup_order": obj{
					"kind":        "function",
					"description": "The status of an order, by its id.",
					"parameters": obj{
						"type":       "object",
						"properties": obj{"order_id": obj{"type": "string"}},
						"required":   []any{"order_id"},
					},
					"timeout": 10,
				},
			},
			"nodes": obj{
				"classify": obj{"kind": "function", "description": "Sets topic from the last user message.", "timeout": 20},
				"agent":    model,
				"tools":    obj{"kind": "tools"},
			},
			"edges": []any{
				obj{"from": "__start__", "to": "classify"},
				obj{"from": "classify", "to": "agent"},
				obj{"from": "agent", "when": "tool_calls", "then": "tools", "else": "__end__"},
				obj{"from": "tools", "to": "agent"},
			},
		},
		"refund": obj{
			"description": "Asks a human to approve the refund of an order.",
			"state": obj{
				"order_id": obj{"schema": obj{"type": "string"}},
				"approved": obj{"schema": obj{"type": "boolean"}},
			},
			"input_schema": obj{
				"type":       "object",
				"required":   []any{"order_id"},
				"properties": obj{"order_id": obj{"type": "string"}},
			},
			"nodes": obj{
				"confirm": obj{"kind": "function", "description": "Looks the order up and asks for approval."},
			},
			"edges": []any{
				obj{"from": "__start__", "to": "confirm"},
				obj{"from": "confirm", "to": "__end__"},
			},
		},
	}}
}

// newAgent registers the agent's functions.
func newAgent() *Runtime {
	rt := NewRuntime(graphConfig)
	rt.Node("support", "classify", classify)
	rt.Tool("lookup_order", lookupOrder)
	rt.Node("refund", "confirm", confirm)
	return rt
}

// classify sets topic from the last user message.
func classify(_ context.Context, c *Call) (*Command, error) {
	text := ""
	messages, _ := c.State["messages"].([]any)
	for i := len(messages) - 1; i >= 0; i-- {
		if m, ok := messages[i].(map[string]any); ok && (m["role"] == "user" || m["type"] == "human") {
			text = strings.ToLower(messageText(m))
			break
		}
	}
	topic := "other"
	switch {
	case strings.Contains(text, "refund"):
		topic = "refunds"
	case strings.Contains(text, "order"):
		topic = "orders"
	}
	c.Emit(obj{"step": "classify", "topic": topic}) // for clients streaming custom events
	return Update(obj{"topic": topic}), nil
}

// lookupOrder is the lookup_order tool: an order's record.
func lookupOrder(_ context.Context, _ *Call, args map[string]any) (any, error) {
	id, _ := args["order_id"].(string)
	order, ok := orders[id]
	if !ok {
		return nil, &Error{Type: "LookupError", Message: "no order " + pyStr(args["order_id"])}
	}
	return order, nil
}

// confirm looks the order up and asks a human to approve its refund.
func confirm(_ context.Context, c *Call) (*Command, error) {
	id, _ := c.State["order_id"].(string)
	order, ok := orders[id]
	if !ok {
		return nil, &Error{Type: "LookupError", Message: "no order " + pyStr(c.State["order_id"])}
	}
	c.Emit(obj{"step": "confirm", "order_id": id})
	answer := c.Interrupt(obj{"question": fmt.Sprintf("Refund order %s (%s)?", id, order["total"]), "choices": []any{"yes", "no"}})
	return Update(obj{"approved": answer == "yes"}), nil
}

// pyStr writes v as the Python runtime's f-strings do, so both runtimes
// give the same messages.
func pyStr(v any) string {
	if v == nil {
		return "None"
	}
	return fmt.Sprint(v)
}

// The server.

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run serves the agent until ctx is done; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("runtime", flag.ContinueOnError)
	flags.SetOutput(stderr)
	host := flags.String("host", "127.0.0.1", "address to listen on")
	port := flags.Int("port", 8080, "port to listen on; 0 picks a free one")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 || *port < 0 || *port > 65535 {
		fmt.Fprintln(stderr, "usage: runtime [--host HOST] [--port PORT]   (PORT between 0 and 65535)")
		return 2
	}
	logger := log.New(stderr, "", log.LstdFlags)
	l, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		logger.Print(err)
		return 1
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", net.JoinHostPort(*host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)))

	srv := &http.Server{
		Handler:           logRequests(logger, newAgent()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          logger,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		logger.Print(err)
		return 1
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		logger.Print(err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		logger.Print(err)
	}
	return 0
}

// logRequests logs each request and its status.
func logRequests(logger *log.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		logger.Printf("%s %q %d", r.Method, r.URL.Path, sw.status)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
