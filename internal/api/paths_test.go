package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// A path that is not clean never gets the router's redirect (a 307 with an
// HTML body): it is a JSON 404 naming the path, like any unknown route.
func TestUncleanPathsAreJSON404(t *testing.T) {
	e := newEnv(t)
	e.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cases := []struct{ method, path string }{
		{"GET", "/v2/deployments//revisions"},
		{"GET", "/v2/auth/providers/."},
		{"GET", "/v2/auth/providers/.."},
		{"DELETE", "/v2/auth/providers/./x"},
		{"GET", "/v2/deployments/x/../y"},
		{"GET", "//v2/deployments"},
		{"POST", "/v2/deployments/abc/revisions/"},
		{"GET", "/v2/deployments/"},
		{"GET", "/ok/"},
		{"GET", "/docs/assets/../../ok"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := e.do(c.method, c.path, e.keyA, nil)
			if r.Status != http.StatusNotFound {
				t.Fatalf("status %d, want 404: %s (Location %q)", r.Status, r.Body, r.Header.Get("Location"))
			}
			if d := r.detail(t); d != "no route for "+c.path {
				t.Errorf("detail %q, want %q", d, "no route for "+c.path)
			}
			if r.Header.Get("Location") != "" {
				t.Errorf("redirects to %q", r.Header.Get("Location"))
			}
		})
	}
	// Clean paths still route.
	e.must(200, "GET", "/ok", "", nil)
	e.must(200, "GET", "/v2/deployments", e.keyA, nil)
}

// A provider_id made only of dots cannot be addressed by a URL, so it cannot
// be registered either.
func TestProviderIDOnlyDotsNotRegistered(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{".", ".."} {
		r := e.do("POST", "/v2/auth/providers", e.keyA, with(validProvider("x"), "provider_id", id))
		if r.Status != 422 || !strings.Contains(r.detail(t), "provider_id:") {
			t.Errorf("provider_id %q: %d %s", id, r.Status, r.Body)
		}
	}
}
