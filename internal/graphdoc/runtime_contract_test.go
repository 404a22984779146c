package graphdoc_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stepgraph/stepgraph/internal/graphdoc"
	"github.com/stepgraph/stepgraph/internal/graphdoc/runtimetest"
)

// HTTPRuntime honours the runtime contract, over an httptest server on
// 127.0.0.1 that plays the script: a crash is a 500, a call turned away a
// 503 of the runtime's gateway.
func TestHTTPRuntimeContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T, fn *runtimetest.Function, s runtimetest.Settings) graphdoc.Runtime {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var answer runtimetest.Answer
			switch {
			case r.Method == http.MethodPost && r.URL.Path == "/invoke":
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return
				}
				answer = fn.Invoke(body)
			case r.Method == http.MethodGet && r.URL.Path == "/describe":
				answer = fn.Describe()
			default:
				http.NotFound(w, r)
				return
			}
			switch answer.Kind {
			case runtimetest.Reply:
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(answer.Body)
			case runtimetest.Crash:
				http.Error(w, string(answer.Body), http.StatusInternalServerError)
			case runtimetest.Unavailable:
				http.Error(w, string(answer.Body), http.StatusServiceUnavailable)
			case runtimetest.Hang:
				select {
				case <-r.Context().Done():
				case <-fn.Released():
				}
			}
		}))
		t.Cleanup(srv.Close)
		return &graphdoc.HTTPRuntime{URL: srv.URL, Client: &http.Client{},
			MaxAttempts: s.MaxAttempts, Backoff: s.Backoff, MaxResponseBytes: s.MaxResponseBytes}
	})
}
