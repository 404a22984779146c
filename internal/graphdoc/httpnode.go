package graphdoc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/graph"
)

// httpNode calls an endpoint with a query, headers and a JSON body rendered
// from the state, and maps the answer into the state through its update
// (the root "response" is {status, headers, body}; body is the parsed JSON,
// or the text when the answer is not JSON). A status outside 2xx fails the
// node.
type httpNode struct {
	node    string
	spec    *nodeSpec
	method  string
	timeout time.Duration
	limit   int64
	client  *http.Client
	tokens  Tokens // for spec.Auth
}

func newHTTPNode(node string, n *nodeSpec, client *http.Client) *httpNode {
	method := n.Method
	if method == "" {
		method = http.MethodGet
		if n.body != nil {
			method = http.MethodPost
		}
	}
	return &httpNode{node: node, spec: n, method: method, client: client,
		timeout: seconds(n.Timeout, 30), limit: cmp.Or(n.MaxResponseBytes, 1<<20)}
}

func (h *httpNode) run(ctx context.Context, state map[string]any, rt *graph.Runtime) (*graph.Command, error) {
	scope := map[string]any{"state": state, "context": rt.Context}
	var token string
	if h.spec.Auth != nil {
		var err error
		if token, err = bearer(ctx, h.node, h.spec.Auth, h.tokens, rt); err != nil {
			return nil, err
		}
	}
	target, err := url.Parse(h.spec.URL)
	if err != nil {
		return nil, nodeError(h.node, graph.KindValue, "%v", err)
	}
	if len(h.spec.query) > 0 {
		q := target.Query()
		for k, v := range renderAll(h.spec.query, scope) {
			q.Set(k, asText(v))
		}
		target.RawQuery = q.Encode()
	}
	var body []byte
	if h.spec.body != nil {
		if body, err = json.Marshal(h.spec.body.render(scope)); err != nil {
			return nil, nodeError(h.node, graph.KindValue, "the body is not JSON: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, h.method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nodeError(h.node, graph.KindValue, "%v", err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range renderAll(h.spec.headers, scope) {
		req.Header.Set(k, asText(v))
	}
	if token != "" {
		// After the document's headers: the granted token is the one sent.
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, data, err := fetch(h.client, req, h.limit)
	if err != nil {
		return nil, redactError(callFailed(h.node, err), credentialsOf(req))
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		// The answer may echo the request (an Authorization header, an
		// api_key parameter): the error, kept with the run, must not.
		return nil, redactError(nodeError(h.node, "HTTPError", "%s %s answered %s: %s",
			h.method, displayURL(target), res.Status, Excerpt(data)), credentialsOf(req))
	}
	if len(h.spec.update) == 0 {
		return nil, nil
	}
	scope["response"] = response(res, data)
	return graph.Update(renderAll(h.spec.update, scope)), nil
}

// response is what an update sees of an answer.
func response(res *http.Response, data []byte) map[string]any {
	headers := map[string]any{}
	for k, v := range res.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	var body any
	if err := decodeJSON(data, &body); err != nil {
		body = string(bytes.ToValidUTF8(data, []byte("?")))
	}
	return map[string]any{"status": res.StatusCode, "headers": headers, "body": body}
}
