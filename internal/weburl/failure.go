package weburl

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"syscall"
)

// CallFailure says why an outbound call to target failed, for the tenant who
// made it (a run's error, a revision's status_message): in generic words that
// name only the host and port of the URL the tenant gave. Go's network
// errors name what the tenant must not see (security review F17): the
// server's resolver ("lookup x on 10.255.255.53:53"), the address a name
// resolved to (a private one, behind split-horizon DNS), the server's own
// address ("read tcp 10.0.3.7:41234->…"). The full error goes to the
// operator's log instead (LogFailures). target is the URL of the failed
// request; for a redirect, the one it was redirected to.
func CallFailure(target *url.URL, err error) string {
	var ue *url.Error
	inner := err // below url.Error, which is a net.Error itself
	if errors.As(err, &ue) {
		inner = ue.Err
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			target = u
		}
	}
	host := target.Hostname()
	hostPort := net.JoinHostPort(host, portOf(target))
	var (
		refused  *RefusedError
		dns      *net.DNSError
		op       *net.OpError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		netErr   net.Error
	)
	switch {
	case errors.As(err, &refused):
		return "host " + host + " is refused: it is, or resolves to, a private, loopback, link-local or metadata address"
	case errors.As(err, &op) && op.Op == "proxyconnect":
		return "could not reach " + hostPort + " through the server's outbound proxy"
	case errors.As(err, &dns):
		if dns.IsTimeout {
			return "looking up host " + host + " timed out"
		}
		if dns.IsNotFound {
			return "could not resolve host " + host
		}
		return "could not resolve host " + host + " (the lookup failed)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused by " + hostPort
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return hostPort + " is unreachable"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection to " + hostPort + " was closed before a complete answer"
	case errors.As(err, &hostname):
		return "TLS with " + hostPort + " failed: the certificate is not valid for " + host
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &verify):
		return "TLS with " + hostPort + " failed: the certificate is not trusted"
	case errors.As(err, &record):
		return "TLS with " + hostPort + " failed: the server does not speak TLS there"
	case errors.As(inner, &netErr) && netErr.Timeout():
		return "no answer from " + hostPort + " in the time allowed"
	case errors.As(inner, &op), errors.As(inner, &netErr), isErrno(inner):
		return "could not connect to " + hostPort
	case ue != nil:
		// Not a network failure but the HTTP client's own words ("stopped
		// after 5 redirects", "server gave HTTP response to HTTPS client"),
		// which name no address; without url.Error's URL prefix.
		return ue.Err.Error()
	}
	return "the call to " + hostPort + " failed"
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

func isErrno(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno)
}

// LogFailures returns a copy of c whose transport logs every failed call
// (and every answer whose body breaks off) at warn level with the full
// error, for the operator: what CallFailure leaves out of the tenant's
// message. It logs the host only, never the path or query, which may carry
// a tenant's tokens; a transport's errors do not contain the URL. A call
// ended by its own context (a canceled run) is not a failure.
func LogFailures(c *http.Client, log *slog.Logger) *http.Client {
	cc := *c
	base := cc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = &loggingTransport{base: base, log: log}
	return &cc
}

type loggingTransport struct {
	base http.RoundTripper
	log  *slog.Logger
}

func (t *loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		t.failed(req, "outbound call failed", err)
		return res, err
	}
	res.Body = &loggedBody{ReadCloser: res.Body, t: t, req: req}
	return res, nil
}

func (t *loggingTransport) failed(req *http.Request, msg string, err error) {
	if req.Context().Err() != nil {
		return
	}
	t.log.Warn(msg, "method", req.Method, "host", req.URL.Host, "error", err.Error())
}

// loggedBody logs a body that breaks off (once).
type loggedBody struct {
	io.ReadCloser
	t      *loggingTransport
	req    *http.Request
	logged bool
}

func (b *loggedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !b.logged {
		b.logged = true
		b.t.failed(b.req, "outbound answer broke off", err)
	}
	return n, err
}
