package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// CORS is the cross-origin policy of the API: which browser origins (a
// LangGraph Studio, a useStream UI) may call it. Requests carry their API
// key in a header, never a cookie, so no credentials are allowed and an
// allowed origin gains nothing a script elsewhere could not already do with
// the key; the list only keeps other pages from using a key a browser was
// given. The same lists configure the gateways on AWS (infra/stack), which
// answer preflights there before any function runs.
type CORS struct {
	// Origins are the allowed origins, each scheme://host[:port] (http or
	// https, no path), compared without regard to case; "*" allows any.
	Origins []string
}

// CORS headers shared with the gateways' configurations (infra/stack).
var (
	// CORSMethods are the methods a preflight may ask for: every method of
	// an operation.
	CORSMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	// CORSAllowHeaders: "*" is any header for requests without
	// credentials; Authorization is named because the wildcard never
	// covers it.
	CORSAllowHeaders = []string{"*", "Authorization", "Content-Type", "Last-Event-ID", "X-Api-Key"}
	// CORSExposeHeaders are the response headers scripts may read: the
	// SDKs take a stream's run from Content-Location, a created resource's
	// address is in Location, a 429's wait in Retry-After.
	CORSExposeHeaders = []string{"Content-Location", "Location", "Retry-After", "X-Request-Id"}
)

// CORSMaxAge is how long a browser may keep a preflight's answer, in
// seconds: Chromium's cap.
const CORSMaxAge = 7200

// ParseCORSOrigins reads a comma-separated allow-list ("" is none) and
// checks every entry.
func ParseCORSOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if err := checkOrigin(o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// checkOrigin: "*" or an origin as browsers send it.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(u.Host, "*") {
		return fmt.Errorf("CORS origin %q: want * or scheme://host[:port] (http or https, no path)", o)
	}
	return nil
}

// allowed is the Access-Control-Allow-Origin value for origin, "" when the
// origin may not call.
func (c *CORS) allowed(origin string) string {
	if c == nil || origin == "" {
		return ""
	}
	for _, o := range c.Origins {
		if o == "*" {
			return "*"
		}
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return origin
		}
	}
	return ""
}

// apply adds the CORS headers of the request's origin to w, and answers a
// preflight (OPTIONS with Access-Control-Request-Method): 204 for an allowed
// origin, 403 otherwise. It reports whether it answered.
func (c *CORS) apply(w http.ResponseWriter, r *http.Request) bool {
	if c == nil {
		return false
	}
	origin := r.Header.Get("Origin")
	allow := c.allowed(origin)
	h := w.Header()
	if len(c.Origins) > 0 && allow != "*" {
		// The answer depends on the origin: caches must keep them apart.
		h.Add("Vary", "Origin")
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if allow != "" {
		h.Set("Access-Control-Allow-Origin", allow)
		if !preflight {
			h.Set("Access-Control-Expose-Headers", strings.Join(CORSExposeHeaders, ", "))
		}
	}
	if !preflight {
		return false
	}
	if allow == "" {
		if len(origin) > 200 {
			origin = origin[:200] + "…"
		}
		writeDetail(w, http.StatusForbidden, "origin "+strconv.Quote(origin)+" is not allowed to call this API (CORS)")
		return true
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(CORSMethods, ", "))
	h.Set("Access-Control-Allow-Headers", strings.Join(CORSAllowHeaders, ", "))
	h.Set("Access-Control-Max-Age", strconv.Itoa(CORSMaxAge))
	w.WriteHeader(http.StatusNoContent)
	return true
}
