// Package weburl owns the rule for URLs that stepgraph stores and later
// calls (OAuth endpoints, a deployment's custom_url, the URLs of graph
// documents): absolute, no fragment, no embedded credentials, https — plain
// http only on loopback hosts, and only when the caller allows it (local
// development).
//
// It also owns the SSRF guard of the calls themselves (guard.go): the
// client every outbound call made on a caller's behalf goes through
// (webhooks, deployed graphs' runtimes, model endpoints, tools and http
// nodes) refuses private, loopback, link-local, metadata and every other
// special-purpose address (IsInternal) at dial time, after DNS resolution
// and on every redirect, unless the server is configured for local
// development.
package weburl

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// MaxLen bounds a stored URL.
const MaxLen = 2048

// Check reports, as a fail.Invalid naming field, why raw is not an acceptable
// endpoint URL; nil when it is.
func Check(field, raw string, allowLoopbackHTTP bool) error {
	if raw == "" {
		return fail.Invalid(field, "must not be empty")
	}
	if len(raw) > MaxLen {
		return fail.Invalid(field, "must be at most %d characters", MaxLen)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return fail.Invalid(field, "must not contain spaces or control characters (percent-encode them)")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fail.Invalid(field, "must be an absolute URL")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fail.Invalid(field, "must have a port between 1 and 65535")
		}
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fail.Invalid(field, "must not contain a fragment")
	}
	if u.User != nil {
		return fail.Invalid(field, "must not contain credentials")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowLoopbackHTTP && IsLoopback(u.Hostname()) {
			return nil
		}
		return fail.Invalid(field, "must use https (http is accepted only for loopback hosts in development)")
	default:
		return fail.Invalid(field, "must use https")
	}
}

// IsLoopback reports whether host names this machine: localhost or a
// loopback IP address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
