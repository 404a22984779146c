package cors

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Policy is an allow-list of origins. Requests carry their API key in a
// header, never a cookie, so no credentials are allowed and an allowed
// origin gains nothing a script elsewhere could not already do with the
// key; the list keeps other pages from using a key a browser was given.
type Policy struct {
	// Origins are the allowed origins, each scheme://host[:port] (http or
	// https, no path), compared without regard to case; "*" allows any.
	Origins []string
}

// The headers of the policy, shared with the gateways' configurations.
var (
	// Methods are the methods a preflight may ask for: every method of an
	// operation.
	Methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	// AllowHeaders: "*" is any header for requests without credentials;
	// Authorization is named because the wildcard never covers it.
	AllowHeaders = []string{"*", "Authorization", "Content-Type", "Last-Event-ID", "X-Api-Key"}
	// ExposeHeaders are the response headers scripts may read: the SDKs
	// take a stream's run from Content-Location, a created resource's
	// address is in Location, a 429's wait in Retry-After.
	ExposeHeaders = []string{"Content-Location", "Location", "Retry-After", "X-Request-Id"}
)

// MaxAge is how long a browser may keep a preflight's answer, in seconds:
// Chromium's cap (Firefox keeps up to a day).
const MaxAge = 7200

// Parse reads a comma-separated allow-list ("" is none) and checks every
// entry (CheckOrigin).
func Parse(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if err := CheckOrigin(o); err != nil {
			return nil, err
		}
		out = append(out, strings.TrimSuffix(o, "/"))
	}
	return out, nil
}

// CheckOrigin: "*" or an origin as browsers send it, scheme://host[:port].
func CheckOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Host, "*,") {
		return fmt.Errorf("CORS origin %q: want * or scheme://host[:port] (http or https, no path)", o)
	}
	return nil
}

// Allowed is the Access-Control-Allow-Origin value for origin, "" when the
// origin may not call.
func (p *Policy) Allowed(origin string) string {
	if p == nil || origin == "" {
		return ""
	}
	for _, o := range p.Origins {
		if o == "*" {
			return "*"
		}
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return origin
		}
	}
	return ""
}

// Apply sets the CORS headers of r's origin on h. A preflight (OPTIONS with
// Access-Control-Request-Method) gets the preflight's headers, and the
// caller answers it: 204 when allowed, else a refusal. Other requests get
// the origin and the exposed headers when allowed, and go on.
func (p *Policy) Apply(h http.Header, r *http.Request) (preflight, allowed bool) {
	if p == nil {
		return false, false
	}
	allow := p.Allowed(r.Header.Get("Origin"))
	if len(p.Origins) > 0 && allow != "*" {
		// The answer depends on the origin: caches must keep them apart.
		h.Add("Vary", "Origin")
	}
	preflight = r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if allow == "" {
		return preflight, false
	}
	h.Set("Access-Control-Allow-Origin", allow)
	if !preflight {
		h.Set("Access-Control-Expose-Headers", strings.Join(ExposeHeaders, ", "))
		return false, true
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(Methods, ", "))
	h.Set("Access-Control-Allow-Headers", strings.Join(AllowHeaders, ", "))
	h.Set("Access-Control-Max-Age", strconv.Itoa(MaxAge))
	return true, true
}
