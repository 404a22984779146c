package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stepgraph/stepgraph/internal/api"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A server restricted to some operations (an AWS function: its routes
// only) serves those, and answers every other request as an unknown route
// without reaching a use case: this server has no Keys, so a request that
// got to authentication would panic and answer 500.
const aUUID = "5b1c7c2a-4c1e-4f0e-9a3e-1d2c3b4a5f60"

func TestOperationsRestrictWhatIsServed(t *testing.T) {
	h, err := api.New(api.Config{Logger: quiet, Operations: []string{"GET /ok", "GET /docs"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		allow        []string
	}{
		{"GET", "/ok", 200, nil},
		{"HEAD", "/ok", 200, nil},
		{"GET", "/docs", 200, nil},
		{"POST", "/ok", 405, []string{"GET"}},
		// Operations of the document this server does not serve.
		{"GET", "/info", 404, nil},
		{"GET", "/threads/t1", 404, nil},
		{"POST", "/runs/wait", 404, nil},
		// No operation has HEAD: the methods the path has.
		{"HEAD", "/threads/" + aUUID, 405, []string{"GET", "PATCH", "DELETE"}},
		{"PUT", "/threads/" + aUUID, 405, []string{"GET", "PATCH", "DELETE"}},
		// A word where the path has a thread id is an unknown route.
		{"PUT", "/threads/t1", 404, nil},
		{"DELETE", "/threads/nope", 404, nil},
		{"POST", "/threads/" + aUUID + "/runs/bulk", 404, nil},
		// A path that is an operation's keeps its own methods only.
		{"TRACE", "/threads/search", 405, []string{"POST"}},
		{"DELETE", "/threads/count", 405, []string{"POST"}},
		{"GET", "/nope", 404, nil},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.Header.Set("X-Api-Key", "sg_any")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || !slices.Equal(rec.Header().Values("Allow"), tc.allow) {
			t.Errorf("%s %s: %d Allow %v (%s), want %d Allow %v", tc.method, tc.path, rec.Code,
				rec.Header().Values("Allow"), strings.TrimSpace(rec.Body.String()), tc.status, tc.allow)
		}
		if tc.status != 200 && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: Content-Type %q, want the API's JSON error", tc.method, tc.path, rec.Header().Get("Content-Type"))
		}
	}
}

func TestOperationsMustBeInTheDocument(t *testing.T) {
	if _, err := api.New(api.Config{Logger: quiet, Operations: []string{"GET /ok", "GET /okay"}}); err == nil ||
		!strings.Contains(err.Error(), `"GET /okay"`) {
		t.Fatalf("New with an unknown operation: %v", err)
	}
	// Empty serves nothing; nil serves everything.
	h, err := api.New(api.Config{Logger: quiet, Operations: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ok", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /ok with no operations: %d", rec.Code)
	}
	h, err = api.New(api.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/info", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("GET /info with every operation: %d", rec.Code)
	}
}
