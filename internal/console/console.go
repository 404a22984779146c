package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

const (
	// PagePath is where the console's page is served.
	PagePath = "/"
	// AssetsPath prefixes the script and stylesheet the page loads.
	AssetsPath = "/console/assets/"
)

//go:embed dist
var dist embed.FS

// ContentSecurityPolicy of every console response: scripts and styles from
// the origin only (no inline code), requests to the origin only, no frames
// of the page elsewhere. The graph is inline SVG, which needs no img-src.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type resource struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves GET/HEAD of the page and of its assets, and answers
// anything else 404 (or 405) as JSON, like the API.
type Handler struct {
	page   resource
	assets map[string]resource
}

// New loads the embedded build.
func New() (*Handler, error) {
	h := &Handler{assets: map[string]resource{}}
	entries, err := fs.ReadDir(dist, "dist")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		body, err := fs.ReadFile(dist, "dist/"+e.Name())
		if err != nil {
			return nil, err
		}
		ct := mime.TypeByExtension(path.Ext(e.Name()))
		if ct == "" {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		r := resource{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		if e.Name() == "index.html" {
			h.page = r
		} else {
			h.assets[e.Name()] = r
		}
	}
	if h.page.body == nil {
		return nil, fmt.Errorf("console: the embedded build has no index.html")
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeDetail(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
		return
	}
	switch p := r.URL.Path; {
	case p == PagePath:
		serve(w, r, h.page)
	case strings.HasPrefix(p, AssetsPath):
		name := strings.TrimPrefix(p, AssetsPath)
		a, ok := h.assets[name]
		if !ok {
			writeDetail(w, http.StatusNotFound, fmt.Sprintf("no console asset %q", name))
			return
		}
		serve(w, r, a)
	default:
		writeDetail(w, http.StatusNotFound, fmt.Sprintf("no console page at %q", p))
	}
}

// serve answers with a resource; the browser revalidates each time (the
// asset names carry no hash), which costs a 304 with the ETag.
func serve(w http.ResponseWriter, r *http.Request, res resource) {
	hd := w.Header()
	hd.Set("Content-Type", res.contentType)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", res.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(res.body))
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(map[string]string{"detail": detail})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
