package graphdoc

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// F10: an endpoint that echoes the request — in an error status, in a 200
// that is not a chat completion, in a completion, encoded — never gets a
// credential into the run's error or state. The model's key, an http node's
// credential headers and the credential query parameters of nodes and tools
// are all redacted; the rest of the message stays for debugging.
func TestOutboundCredentialsRedacted(t *testing.T) {
	const modelKey = "sk-test-secret-value" // testOptions' KEY
	echo := func(r *http.Request) string {
		return "you sent " + r.Header.Get("Authorization") + " " + r.Header.Get("X-Api-Key") + " " + r.URL.RawQuery
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimSuffix(r.URL.Path, "/chat/completions") {
		case "/plain200":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(echo(r)))
		case "/base64":
			_, _ = w.Write([]byte(base64.StdEncoding.EncodeToString([]byte(r.Header.Get("Authorization")))))
		case "/nochoices":
			b, _ := json.Marshal(map[string]any{"choices": []any{}, "echo": echo(r)})
			_, _ = w.Write(b)
		case "/completion":
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": echo(r)}}}})
			_, _ = w.Write(b)
		default: // an error status echoing the request
			http.Error(w, echo(r), http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	model := func(path string) string {
		return `
state: {messages: {reducer: messages}}
nodes: {llm: {kind: chat_model, base_url: "` + srv.URL + path + `", model: m, api_key_secret: KEY}}
edges: [{from: __start__, to: llm}]
`
	}
	httpNode := func(base string) string {
		return `
state: {messages: {reducer: messages}, out: {}}
nodes:
  call:
    kind: http
    url: "` + base + `/fail?api_key=query-secret-3&page=2"
    headers: {Authorization: "Bearer http-secret-token-1", X-Api-Key: "x-api-key-secret-2", X-Trace: trace-visible}
    update: {out: "{{ response.body }}"}
edges: [{from: __start__, to: call}]
`
	}
	const tool = `
state: {messages: {reducer: messages}}
tools:
  look: {kind: http, description: d, url: "URL/fail?token=tool-secret-4&lang=en"}
nodes: {run: {kind: tools}}
edges: [{from: __start__, to: run}]
`
	hi := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	toolCall := map[string]any{"messages": []any{map[string]any{"type": "ai", "content": "",
		"tool_calls": []any{map[string]any{"id": "c1", "name": "look", "args": map[string]any{}}}}}}
	secrets := []string{modelKey, "http-secret-token-1", "x-api-key-secret-2", "query-secret-3", "tool-secret-4",
		base64.StdEncoding.EncodeToString([]byte("Bearer " + modelKey))}

	cases := []struct {
		name  string
		doc   string
		input map[string]any
		kind  string   // the error's kind; "" when the run succeeds
		shown []string // what the error or state still says
	}{
		{"model 200 text/plain", model("/plain200"), hi, graph.KindValue,
			[]string{"the model endpoint's answer is not a chat completion", "you sent Bearer [redacted]"}},
		{"model error status", model("/status"), hi, "APIStatusError", []string{"answered 500", "you sent Bearer [redacted]"}},
		{"model base64 echo", model("/base64"), hi, graph.KindValue, []string{"not a chat completion", "[redacted]"}},
		{"model answer without choices", model("/nochoices"), hi, graph.KindValue, []string{"it has no choices", "Bearer [redacted]"}},
		{"model completion echoing the key", model("/completion"), hi, "", []string{"you sent Bearer [redacted]"}},
		{"http node error status", httpNode(srv.URL), hi, "HTTPError",
			[]string{"api_key=[redacted]&page=2", "answered 500", "you sent Bearer [redacted] [redacted] api_key=[redacted]&page=2"}},
		{"http node no connection", httpNode(closed.URL), hi, kindConnection, []string{"api_key=[redacted]&page=2", "connection refused"}},
		{"tool error status", strings.Replace(tool, "URL", srv.URL, 1), toolCall, "", []string{"Error: HTTP 500", "token=[redacted]&lang=en"}},
		{"tool no connection", strings.Replace(tool, "URL", closed.URL, 1), toolCall, kindConnection, []string{"token=[redacted]&lang=en"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := compileDocs(t, testOptions(nil), map[string]string{"g": c.doc})["g"]
			cp, out := run(t, g, nil, c.input, graph.Options{})
			said, _ := json.Marshal(map[string]any{"values": cp.Values, "error": out.Error})
			if c.kind == "" {
				wantStatus(t, out, graph.Done)
			} else if out.Error == nil || out.Error.Kind != c.kind {
				t.Fatalf("outcome %s, want a %s", said, c.kind)
			}
			for _, s := range secrets {
				if strings.Contains(string(said), s) {
					t.Errorf("%q reached the run: %s", s, said)
				}
			}
			for _, s := range c.shown {
				if !strings.Contains(strings.ReplaceAll(string(said), `\u0026`, "&"), s) {
					t.Errorf("the run does not say %q: %s", s, said)
				}
			}
		})
	}
}

func TestDisplayURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://api.example.com/v1/x":                        "https://api.example.com/v1/x",
		"https://u:p@api.example.com/x":                       "https://api.example.com/x",
		"https://api.example.com/x?q=1&api_key=abc&Sig=d&x":   "https://api.example.com/x?q=1&api_key=[redacted]&Sig=[redacted]&x",
		"https://api.example.com/x?access_token=t&page=2":     "https://api.example.com/x?access_token=[redacted]&page=2",
		"https://api.example.com/x?%zz=1&city=Paris":          "https://api.example.com/x?%zz=[redacted]&city=Paris",
		"http://127.0.0.1:8080/a%2Fb?password=hunter2&user=u": "http://127.0.0.1:8080/a%2Fb?password=[redacted]&user=u",
	} {
		req, err := http.NewRequest("GET", raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := displayURL(req.URL); got != want {
			t.Errorf("displayURL(%s) = %s, want %s", raw, got, want)
		}
	}
}
