package weburl

import (
	"bytes"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// Every failure is told in words naming only the URL's host and port, never
// the resolver, a resolved or a local address (the 10.x ones below).
func TestCallFailureNamesOnlyTheTenantsHost(t *testing.T) {
	target, _ := url.Parse("https://api.example.com/v1?token=T")
	local := &net.TCPAddr{IP: net.ParseIP("10.0.3.7"), Port: 41234}
	remote := &net.TCPAddr{IP: net.ParseIP("10.9.9.9"), Port: 443}
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: target.String(), Err: &net.OpError{Op: "dial", Net: "tcp", Source: local, Addr: remote, Err: err}}
	}
	dnsErr := func(notFound, timeout bool) error {
		return dial(&net.DNSError{Err: "no such host", Name: "api.example.com", Server: "10.255.255.53:53", IsNotFound: notFound, IsTimeout: timeout})
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"unknown name", dnsErr(true, false), "could not resolve host api.example.com"},
		{"lookup timed out", dnsErr(false, true), "looking up host api.example.com timed out"},
		{"lookup failed", dnsErr(false, false), "could not resolve host api.example.com (the lookup failed)"},
		{"refused by the guard", dial(&RefusedError{Addr: "10.9.9.9:443"}), "host api.example.com is refused: it is, or resolves to, a private, loopback, link-local or metadata address"},
		{"connection refused", dial(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), "connection refused by api.example.com:443"},
		{"unreachable", dial(&os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}), "api.example.com:443 is unreachable"},
		{"reset", &url.Error{Op: "Get", URL: target.String(), Err: &net.OpError{Op: "read", Net: "tcp", Source: local, Addr: remote,
			Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}}, "the connection to api.example.com:443 was closed before a complete answer"},
		{"cut answer", io.ErrUnexpectedEOF, "the connection to api.example.com:443 was closed before a complete answer"},
		{"untrusted certificate", &url.Error{Op: "Get", URL: target.String(), Err: x509.UnknownAuthorityError{}}, "TLS with api.example.com:443 failed: the certificate is not trusted"},
		{"certificate for another name", &url.Error{Op: "Get", URL: target.String(), Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "api.example.com"}},
			"TLS with api.example.com:443 failed: the certificate is not valid for api.example.com"},
		{"through the proxy", &url.Error{Op: "Get", URL: target.String(), Err: &net.OpError{Op: "proxyconnect", Net: "tcp", Addr: remote,
			Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}, "could not reach api.example.com:443 through the server's outbound proxy"},
		{"the client's own words", &url.Error{Op: "Get", URL: target.String(), Err: errors.New("stopped after 5 redirects")}, "stopped after 5 redirects"},
		{"redirected elsewhere", &url.Error{Op: "Get", URL: "http://other.example.org:8080/x", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: remote,
			Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}, "connection refused by other.example.org:8080"},
		{"anything else", errors.New("10.0.3.7 said no"), "the call to api.example.com:443 failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CallFailure(target, c.err)
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
			if strings.Contains(got, "10.") || strings.Contains(got, "token") {
				t.Errorf("%q names an address or the query", got)
			}
		})
	}
}

// LogFailures logs a failed call with the whole error and the host, never
// the path or query.
func TestLogFailuresLogsTheWholeErrorForTheOperator(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	failing := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "api.example.com", Server: "10.255.255.53:53", IsNotFound: true}}
	})}
	c := LogFailures(failing, log)
	if _, err := c.Get("https://api.example.com/secret-path?token=T0K3N"); err == nil {
		t.Fatal("the call succeeded")
	}
	out := buf.String()
	if !strings.Contains(out, "outbound call failed") || !strings.Contains(out, "10.255.255.53:53") || !strings.Contains(out, "host=api.example.com") {
		t.Errorf("log %q lacks the message, the whole error or the host", out)
	}
	if strings.Contains(out, "T0K3N") || strings.Contains(out, "secret-path") {
		t.Errorf("log %q has the path or query", out)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
