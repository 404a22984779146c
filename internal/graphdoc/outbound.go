package graphdoc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepgraph/stepgraph/internal/graph"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

const userAgent = "stepgraph"

// kindConnection is the error kind of a call that could not connect.
const kindConnection = "ConnectionError"

// fetchError is an outbound call that got no usable answer. kind is the
// error kind a node reports (TimeoutError, ConnectionError, ValueError).
// Its message is for the tenant; the network error it wraps, which may name
// the server's resolver and addresses, is not part of it (see classify).
type fetchError struct {
	kind  string
	dial  bool // the connection failed, so the request was never sent
	err   error
	cause error // the network error, when err is its tenant-facing summary
}

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	return e.err
}

// fetch sends req and reads at most limit bytes of the answer. Every
// outbound call of the package goes through it, and so through the client
// the platform injected (with its dial-time SSRF guard). Its errors name the
// URL without its query (displayURL): a query often carries a credential.
func fetch(client *http.Client, req *http.Request, limit int64) (*http.Response, []byte, error) {
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, classify(req, err)
	}
	defer res.Body.Close()
	data, err := readBounded(req, res.Body, limit)
	if err != nil {
		return nil, nil, err
	}
	return res, data, nil
}

func classify(req *http.Request, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return &fetchError{kind: graph.KindTimeout,
			err: fmt.Errorf("%s %s: no answer in the time allowed", req.Method, displayURL(req.URL))}
	case errors.Is(err, context.Canceled):
		return err
	}
	// net/http names the URL it was asked (or redirected) to, query and
	// all; keep the host and path only.
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			ue.URL = displayURL(u)
		} else {
			ue.URL = "(URL redacted)"
		}
	}
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	// Go's text would show the tenant the server's resolver, the address a
	// name resolved to or the server's own address: the tenant reads a
	// summary naming only their URL's host; the whole error is in the
	// operator's log (weburl.LogFailures on the outbound client).
	return &fetchError{kind: kindConnection, dial: dial, cause: err,
		err: fmt.Errorf("%s %s: %s", req.Method, req.URL.Redacted(), weburl.CallFailure(req.URL, err))}
}

// displayURL is u as an error may show it: without its userinfo, and with
// the values of credential query parameters (api_key=, token=, sig=, ...)
// replaced by [redacted]; the other parameters stay, for debugging.
func displayURL(u *url.URL) string {
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.RawQuery == "" {
		return shown.String()
	}
	pairs := strings.Split(u.RawQuery, "&")
	for i, p := range pairs {
		k, _, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil || isCredentialName(name) && hasValue {
			pairs[i] = k + "=[redacted]"
		}
	}
	return shown.String() + "?" + strings.Join(pairs, "&")
}

// credentialWords mark a header or query parameter whose value is a
// credential (Authorization, X-Api-Key, X-Auth-Token, api_key=, sig=, ...).
var credentialWords = []string{"auth", "key", "token", "secret", "pass", "session", "cookie", "sig", "credential"}

func isCredentialName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// minSecretLen: shorter values are not redacted (they would mangle
// messages and protect nothing).
const minSecretLen = 4

// credentialsOf lists what of req must not appear in an error: the values
// of credential headers (and the credential after an auth scheme, as in
// "Bearer <token>") and of credential query parameters, plus extra.
func credentialsOf(req *http.Request, extra ...string) []string {
	out := append([]string(nil), extra...)
	for name, values := range req.Header {
		if !isCredentialName(name) {
			continue
		}
		for _, v := range values {
			out = append(out, v)
			if _, cred, ok := strings.Cut(v, " "); ok {
				out = append(out, strings.TrimSpace(cred))
			}
		}
	}
	for name, values := range req.URL.Query() {
		if isCredentialName(name) {
			out = append(out, values...)
		}
	}
	return out
}

// redact replaces every credential in s — as it is, JSON-escaped and
// base64-encoded, the forms an endpoint echoing a request most often
// answers with — by "[redacted]". A value holding another one (a header
// "Bearer <token>" and its token) is left to the shorter one as text, so the
// message still says "Bearer [redacted]"; its base64 differs, so that form
// is kept. Longer forms go first, so none is replaced piecemeal.
func redact(s string, credentials []string) string {
	for _, f := range credentialForms(credentials) {
		s = strings.ReplaceAll(s, f, "[redacted]")
	}
	return s
}

// credentialForms are the texts redact replaces, longest first.
func credentialForms(credentials []string) []string {
	var forms []string
	for _, c := range credentials {
		if len(c) < minSecretLen {
			continue
		}
		if !slices.ContainsFunc(credentials, func(o string) bool { return len(o) >= minSecretLen && o != c && strings.Contains(c, o) }) {
			quoted, _ := json.Marshal(c)
			forms = append(forms, c, string(quoted[1:len(quoted)-1]))
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(c)))
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

// redactError is err with every credential redacted from its message; a
// *graph.Error keeps its kind.
func redactError(err error, credentials []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := redact(msg, credentials)
	if clean == msg {
		return err
	}
	if e, ok := err.(*graph.Error); ok {
		return &graph.Error{Kind: e.Kind, Message: redact(e.Message, credentials)}
	}
	return errors.New(clean)
}

// Excerpt is the start of a body, for an error message (runtime transports
// and outbound calls).
func Excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty)"
	}
	return Truncate(s, 200)
}

// Truncate cuts s to at most max bytes of valid UTF-8, marking the cut.
func Truncate(s string, max int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// nodeError makes the error a node reports: its kind, and a message that
// starts by naming the node.
func nodeError(node, kind, format string, args ...any) *graph.Error {
	return graph.Errorf(kind, "node %q: %s", node, fmt.Sprintf(format, args...))
}

// callFailed reports a failed outbound call of node.
func callFailed(node string, err error) error {
	var fe *fetchError
	if errors.As(err, &fe) {
		return nodeError(node, fe.kind, "%v", fe.err)
	}
	return err // the run's context ended: the engine reports it
}

// seconds converts a document's timeout (0: unset) to a duration.
func seconds(s, def float64) time.Duration {
	if s == 0 {
		s = def
	}
	return time.Duration(s * float64(time.Second))
}
