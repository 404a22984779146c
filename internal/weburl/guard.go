package weburl

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// MaxRedirects bounds the redirects a guarded client follows.
const MaxRedirects = 5

// IsInternal reports whether ip is an address stepgraph must not call on a
// caller's behalf: loopback, private (RFC 1918, fc00::/7), carrier-grade
// NAT, link-local (the cloud metadata endpoints 169.254.169.254 and
// fd00:ec2::254 among them), multicast and unspecified addresses.
func IsInternal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip == netip.MustParseAddr("169.254.169.254") || ip == netip.MustParseAddr("fd00:ec2::254") ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

// RefusedError is a connection the guard refused: its address is internal.
type RefusedError struct {
	Addr string // ip:port
}

func (e *RefusedError) Error() string {
	return "destination " + e.Addr + " is a private, loopback, link-local or metadata address"
}

// GuardedDialer returns a dialer that refuses, unless allowPrivate, every
// connection to an internal address (IsInternal). The check runs on the
// address actually dialed — after DNS resolution, for every address tried
// and for every connection, redirects included — so a name cannot be
// pointed at an internal address later (DNS rebinding).
func GuardedDialer(allowPrivate bool) *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			if allowPrivate {
				return nil
			}
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return err
			}
			if IsInternal(ip) {
				return &RefusedError{Addr: address}
			}
			return nil
		}}
}

// GuardedTransport is an http.Transport dialing through GuardedDialer.
//
// It honours the proxy settings of the environment (HTTPS_PROXY, NO_PROXY,
// ...); the guard then applies to the proxy's address, so a proxy on an
// internal address is refused unless allowPrivate: the transport fails
// closed rather than let a proxy reach what it may not. (Go never proxies
// requests to loopback hosts; those are dialed, and refused, directly.)
func GuardedTransport(allowPrivate bool) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           GuardedDialer(allowPrivate).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// GuardedClient is the HTTP client of every outbound call stepgraph makes on
// a caller's behalf (webhooks; a deployment's runtime, model endpoints,
// tools and http nodes): GuardedTransport, at most MaxRedirects redirects
// (each dialed through the guard too), and timeout for a whole request
// (0: none; callers then bound requests with their contexts).
func GuardedClient(allowPrivate bool, timeout time.Duration) *http.Client {
	return &http.Client{Transport: GuardedTransport(allowPrivate), Timeout: timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= MaxRedirects {
				return errors.New("stopped after " + strconv.Itoa(MaxRedirects) + " redirects")
			}
			return nil
		}}
}
