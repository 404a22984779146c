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
// caller's behalf: every special-purpose range of the IANA IPv4 and IPv6
// Special-Purpose Address Registries (loopback, private, shared, link-local
// with the cloud metadata endpoints, documentation, benchmarking, reserved,
// IETF protocol assignments, ULA, ...), multicast and broadcast, and, for
// IPv6, everything outside global unicast (2000::/3).
//
// IPv6 is an allowlist rather than a blocklist: only 2000::/3 is handed out
// for global unicast, so the rest (unspecified, loopback, the deprecated
// IPv4-compatible ::a.b.c.d, IPv4-translated, 64:ff9b:1::/48, discard-only,
// ULA fc00::/7 with fd00:ec2::254, link-local, site-local, multicast) is
// refused whatever new use it gets. Addresses that carry an IPv4 address
// are judged by it: IPv4-mapped ::ffff:a.b.c.d, 6to4 2002:aabb:ccdd::/48,
// and the well-known NAT64 prefix 64:ff9b::/96 — the last is allowed for a
// public IPv4 address because DNS64 on IPv6-only networks (AWS among them)
// answers every IPv4-only public name with it; 64:ff9b::7f00:1 still reaches
// 127.0.0.1 through the translator, so it is refused like 127.0.0.1.
func IsInternal(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true // fail closed
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is4() {
		return inAny(internalV4, ip)
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return IsInternal(netip.AddrFrom4([4]byte(b[12:16])))
	case !globalUnicast.Contains(ip):
		return true
	case sixToFour.Contains(ip):
		return IsInternal(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return inAny(internalV6, ip)
}

var (
	globalUnicast = netip.MustParsePrefix("2000::/3")
	nat64         = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known prefix
	sixToFour     = netip.MustParsePrefix("2002::/16")    // RFC 3056
)

// internalV4 is the IANA IPv4 Special-Purpose Address Registry, every entry
// (the globally reachable anycast ones too: no webhook, model or tool lives
// there), plus multicast; 240.0.0.0/4 holds the limited broadcast address.
var internalV4 = prefixes(
	"0.0.0.0/8",       // "this network" (RFC 791)
	"10.0.0.0/8",      // private (RFC 1918)
	"100.64.0.0/10",   // shared address space, carrier-grade NAT (RFC 6598)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, 169.254.169.254 metadata among them
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments (DS-Lite, PCP, TURN, NAT64 discovery)
	"192.0.2.0/24",    // documentation TEST-NET-1
	"192.31.196.0/24", // AS112-v4
	"192.52.193.0/24", // AMT
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // private
	"192.175.48.0/24", // direct delegation AS112
	"198.18.0.0/15",   // benchmarking (RFC 2544)
	"198.51.100.0/24", // documentation TEST-NET-2
	"203.0.113.0/24",  // documentation TEST-NET-3
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, with 255.255.255.255 (limited broadcast)
)

// internalV6 are the entries of the IANA IPv6 Special-Purpose Address
// Registry inside 2000::/3 (those outside it are refused wholesale).
var internalV6 = prefixes(
	"2001::/23",         // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID, AMT, AS112, anycast
	"2001:db8::/32",     // documentation
	"2620:4f:8000::/48", // direct delegation AS112
	"3fff::/20",         // documentation (RFC 9637)
)

func prefixes(ps ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

func inAny(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// RefusedError is a connection the guard refused: its address is internal.
type RefusedError struct {
	Addr string // ip:port
}

func (e *RefusedError) Error() string {
	return "destination " + e.Addr + " is a private, loopback, link-local, metadata or other special-purpose address"
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
