package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stepgraph/stepgraph/internal/api"
)

// waitOps are the operations of the stateless-run-wait function
// (functions/routes.json): what a small function's cold start builds.
var waitOps = []string{"POST /runs/wait"}

// BenchmarkNew is the API's share of a cold start (INIT) on Lambda: the whole
// API (the local server, the system function's fallback) and one small
// function's routes. Timings for bench/results, not a pass/fail test:
//
//	go test -run '^$' -bench BenchmarkNew -benchtime 20x ./internal/api/
func BenchmarkNew(b *testing.B) {
	for _, bc := range []struct {
		name string
		ops  []string
	}{{"all-operations", nil}, {"one-function", waitOps}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := api.New(api.Config{Operations: bc.ops}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The pages built at their first request (the docs page, the console)
// build from the embedded documents, for a server of every operation and
// for one that serves only a few.
func TestLazyPagesBuild(t *testing.T) {
	for _, ops := range [][]string{nil, {"GET /docs", "GET /"}} {
		srv, err := api.New(api.Config{Operations: ops})
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/docs", "/"} {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("%v: GET %s: %d %s %.200s", ops, path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
		}
	}
}
