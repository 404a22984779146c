// Package docs serves the human API reference: one HTML page rendered on
// the server from the OpenAPI document, plus the small stylesheet and
// script it uses. Everything is embedded in the binary and the page loads
// nothing from elsewhere, so it works offline; the script only adds
// conveniences (filtering, expand/collapse, copying curl examples) to a
// page that is complete without it.
package docs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

const (
	pagePath   = "/docs"
	assetsPath = "/docs/assets/"
)

//go:embed page.gohtml
var pageSource string

//go:embed static
var static embed.FS

var pageTemplate = template.Must(template.New("page").Parse(pageSource))

// Headers of the page: it may load only its own assets.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

type resource struct {
	body        []byte
	contentType string
	etag        string
	cache       string
}

type handler struct {
	page   resource
	assets map[string]resource
}

// Handler serves the human API reference built from an OpenAPI 3.1 document (given as JSON bytes).
// It answers GET /docs with an HTML page and GET /docs/assets/{name} with embedded static assets.
// specURL is where the page links the raw document. The page is rendered
// here, once; serving it costs a copy. Handler fails when spec is not JSON,
// not an object, or lacks "openapi" (3.x) or a "paths" object.
func Handler(spec []byte, specURL string) (http.Handler, error) {
	v, err := parseJSON(spec)
	if err != nil {
		return nil, fmt.Errorf("openapi document is not valid JSON: %w", err)
	}
	doc, ok := v.(*object)
	if !ok {
		return nil, errors.New("openapi document is not a JSON object")
	}
	version, ok := doc.get("openapi").(string)
	if !ok || version == "" {
		return nil, errors.New(`openapi document lacks "openapi"`)
	}
	if !strings.HasPrefix(version, "3.") {
		return nil, fmt.Errorf("openapi document has version %q; only 3.x is supported", version)
	}
	if _, ok := doc.get("paths").(*object); !ok {
		return nil, errors.New(`openapi document lacks a "paths" object`)
	}

	h := &handler{assets: map[string]resource{}}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		body, err := static.ReadFile("static/" + e.Name())
		if err != nil {
			return nil, err
		}
		ct := mime.TypeByExtension(path.Ext(e.Name()))
		switch path.Ext(e.Name()) { // not left to the host's mime tables
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".js":
			ct = "text/javascript; charset=utf-8"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.assets[e.Name()] = newResource(body, ct, "public, max-age=86400")
	}

	p := build(doc, specURL, h.assetURL("docs.css"), h.assetURL("docs.js"))
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("render docs page: %w", err)
	}
	h.page = newResource(buf.Bytes(), "text/html; charset=utf-8", "no-cache")
	return h, nil
}

func newResource(body []byte, contentType, cache string) resource {
	sum := sha256.Sum256(body)
	return resource{body: body, contentType: contentType, cache: cache, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// assetURL names an asset with its content hash, so a new build is never
// served a stale cached copy.
func (h *handler) assetURL(name string) string {
	return assetsPath + name + "?v=" + strings.Trim(h.assets[name].etag, `"`)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeDetail(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
		return
	}
	switch p := r.URL.Path; {
	case p == pagePath:
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		w.Header().Set("Referrer-Policy", "no-referrer")
		serve(w, r, h.page)
	case strings.HasPrefix(p, assetsPath):
		name := strings.TrimPrefix(p, assetsPath)
		a, ok := h.assets[name]
		if !ok {
			writeDetail(w, http.StatusNotFound, fmt.Sprintf("no docs asset %q", name))
			return
		}
		serve(w, r, a)
	default:
		writeDetail(w, http.StatusNotFound, fmt.Sprintf("no docs page at %q", p))
	}
}

func serve(w http.ResponseWriter, r *http.Request, res resource) {
	hd := w.Header()
	hd.Set("Content-Type", res.contentType)
	hd.Set("Cache-Control", res.cache)
	hd.Set("ETag", res.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(res.body))
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(map[string]string{"detail": detail})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
