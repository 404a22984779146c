package console

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestServesThePageAndItsAssetsUnderAStrictPolicy(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method, path string
		status       int
		contentType  string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/console/assets/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/console/assets/app.css", 200, "text/css; charset=utf-8"},
		{"GET", "/console/assets/index.html", 404, "application/json"},
		{"GET", "/console/assets/nope.js", 404, "application/json"},
		{"GET", "/console/other", 404, "application/json"},
		{"POST", "/", 405, "application/json"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status || rec.Header().Get("Content-Type") != c.contentType {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, rec.Code, rec.Header().Get("Content-Type"), c.status, c.contentType)
		}
		if c.status == 200 {
			csp := rec.Header().Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("%s: policy %q lacks %q", c.path, csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("%s: policy %q allows inline code", c.path, csp)
			}
		}
	}
	// The page has no inline script or style: everything comes from assets.
	page := string(h.page.body)
	if strings.Contains(page, "<script>") || strings.Contains(page, "<style") || regexp.MustCompile(`\son[a-z]+=`).MatchString(page) {
		t.Errorf("inline code in the page:\n%s", page)
	}
}

// TestBuildMatchesSources rebuilds the console with the pinned toolchain
// (console/package-lock.json, installed by scripts/install-test-deps.sh)
// and compares it with the committed dist/, so the embedded build cannot
// drift from its sources. `cd console && npm ci && npm run build` updates it.
func TestBuildMatchesSources(t *testing.T) {
	src, err := filepath.Abs("../../console")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "node_modules", "esbuild")); err != nil {
		t.Fatalf("console/node_modules is not installed: run scripts/install-test-deps.sh (%v)", err)
	}
	out := t.TempDir()
	cmd := exec.Command("node", "build.mjs")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CONSOLE_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	built, _ := os.ReadDir(out)
	committed, _ := os.ReadDir("dist")
	if len(built) != len(committed) {
		t.Fatalf("the build has %d files, dist/ %d: rebuild with `cd console && npm run build`", len(built), len(committed))
	}
	for _, e := range built {
		a, _ := os.ReadFile(filepath.Join(out, e.Name()))
		b, err := os.ReadFile(filepath.Join("dist", e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("dist/%s differs from its sources: rebuild with `cd console && npm run build`", e.Name())
		}
	}
}

func TestAssetsAskNothingFromElsewhere(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	// Namespace URIs of SVG/XHTML/MathML are names, not requests; the SDK's
	// default apiUrl (localhost) is replaced by the page's origin.
	allowed := []string{"http://www.w3.org/", "http://localhost"}
	for name, a := range h.assets {
		for _, scheme := range []string{"http://", "https://", "//cdn", "wss://", "ws://"} {
			body := string(a.body)
			for i := strings.Index(body, scheme); i >= 0; {
				rest := body[i:]
				ok := false
				for _, p := range allowed {
					if strings.HasPrefix(rest, p) {
						ok = true
					}
				}
				if !ok {
					end := min(len(rest), 60)
					t.Errorf("%s names %q", name, rest[:end])
				}
				next := strings.Index(body[i+1:], scheme)
				if next < 0 {
					break
				}
				i += 1 + next
			}
		}
	}
}
