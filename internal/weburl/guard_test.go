package weburl

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// One row per special-purpose range (IANA IPv4 and IPv6 Special-Purpose
// Address Registries), each at an address inside it, plus public addresses
// on both sides of the ranges' edges.
func TestIsInternal(t *testing.T) {
	cases := []struct {
		addr     string
		internal bool
		why      string
	}{
		// IPv4
		{"0.0.0.0", true, "unspecified"},
		{"0.1.2.3", true, "this network 0.0.0.0/8"},
		{"10.1.2.3", true, "private"},
		{"100.64.0.1", true, "shared (CGN)"},
		{"100.100.100.200", true, "shared (Alibaba metadata)"},
		{"127.0.0.1", true, "loopback"},
		{"127.255.255.254", true, "loopback /8"},
		{"169.254.169.254", true, "link-local metadata"},
		{"172.16.0.1", true, "private"},
		{"172.31.255.255", true, "private /12 end"},
		{"192.0.0.9", true, "IETF protocol assignments 192.0.0.0/24"},
		{"192.0.0.170", true, "NAT64 discovery"},
		{"192.0.2.1", true, "TEST-NET-1"},
		{"192.31.196.1", true, "AS112-v4"},
		{"192.52.193.1", true, "AMT"},
		{"192.88.99.1", true, "6to4 relay anycast"},
		{"192.168.1.1", true, "private"},
		{"192.175.48.1", true, "direct delegation AS112"},
		{"198.18.0.1", true, "benchmarking"},
		{"198.19.255.255", true, "benchmarking /15 end"},
		{"198.51.100.7", true, "TEST-NET-2"},
		{"203.0.113.9", true, "TEST-NET-3"},
		{"224.0.0.1", true, "multicast"},
		{"239.255.255.250", true, "multicast SSDP"},
		{"240.0.0.1", true, "reserved 240.0.0.0/4"},
		{"255.255.255.255", true, "limited broadcast"},
		{"8.8.8.8", false, "public"},
		{"93.184.216.34", false, "public"},
		{"100.63.255.255", false, "just below shared"},
		{"100.128.0.0", false, "just above shared"},
		{"172.32.0.1", false, "just above 172.16.0.0/12"},
		{"198.17.255.255", false, "just below benchmarking"},
		{"198.20.0.0", false, "just above benchmarking"},
		{"223.255.255.255", false, "last unicast below multicast"},
		// IPv6
		{"::", true, "unspecified"},
		{"::1", true, "loopback"},
		{"::ffff:127.0.0.1", true, "IPv4-mapped loopback"},
		{"::ffff:7f00:1", true, "IPv4-mapped loopback, hex"},
		{"::ffff:10.0.0.1", true, "IPv4-mapped private"},
		{"::ffff:8.8.8.8", false, "IPv4-mapped public"},
		{"::127.0.0.1", true, "IPv4-compatible (deprecated)"},
		{"::8.8.8.8", true, "IPv4-compatible, public too (deprecated, ::/96)"},
		{"::ffff:0:127.0.0.1", true, "IPv4-translated"},
		{"64:ff9b::7f00:1", true, "NAT64 of 127.0.0.1"},
		{"64:ff9b::127.0.0.1", true, "NAT64 of 127.0.0.1, dotted"},
		{"64:ff9b::a9fe:a9fe", true, "NAT64 of the metadata address"},
		{"64:ff9b::10.0.0.1", true, "NAT64 of a private address"},
		{"64:ff9b::808:808", false, "NAT64 of 8.8.8.8 (DNS64 answers this for public IPv4-only names)"},
		{"64:ff9b:1::7f00:1", true, "local-use NAT64 64:ff9b:1::/48"},
		{"64:ff9b:1:ffff::808:808", true, "local-use NAT64, any embedding"},
		{"100::1", true, "discard-only 100::/64"},
		{"2001::1", true, "Teredo 2001::/32"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true, "Teredo"},
		{"2001:1::1", true, "PCP anycast"},
		{"2001:2::1", true, "benchmarking 2001:2::/48"},
		{"2001:3::1", true, "AMT"},
		{"2001:4:112::1", true, "AS112-v6"},
		{"2001:10::1", true, "ORCHID"},
		{"2001:20::1", true, "ORCHIDv2"},
		{"2001:db8::1", true, "documentation"},
		{"2002:7f00:1::1", true, "6to4 of 127.0.0.1"},
		{"2002:a00:1::1", true, "6to4 of 10.0.0.1"},
		{"2002:c0a8:101::1", true, "6to4 of 192.168.1.1"},
		{"2002:808:808::1", false, "6to4 of 8.8.8.8"},
		{"2620:4f:8000::1", true, "direct delegation AS112"},
		{"3fff::1", true, "documentation 3fff::/20"},
		{"5f00::1", true, "SRv6 SIDs, outside global unicast"},
		{"fc00::1", true, "ULA"},
		{"fd00:ec2::254", true, "ULA, the EC2 metadata endpoint"},
		{"fe80::1", true, "link-local"},
		{"fe80::1%eth0", true, "link-local with a zone"},
		{"fec0::1", true, "site-local (deprecated)"},
		{"ff02::1", true, "multicast"},
		{"ff05::1:3", true, "multicast site-local"},
		{"2606:2800:220:1:248:1893:25c8:1946", false, "public"},
		{"2a00:1450:4001:80b::200e", false, "public"},
		{"2001:200::1", false, "public, just above 2001::/23"},
		{"2001:db9::1", false, "public, just above documentation"},
	}
	for _, c := range cases {
		if got := IsInternal(netip.MustParseAddr(c.addr)); got != c.internal {
			t.Errorf("IsInternal(%s) = %v, want %v (%s)", c.addr, got, c.internal, c.why)
		}
	}
	if !IsInternal(netip.Addr{}) {
		t.Error("the zero Addr is not internal: the guard must fail closed")
	}
}

// The dial-time check refuses the same addresses before any packet is sent:
// Control runs after the socket is made and before connect.
func TestGuardedDialerRefusesSpecialPurpose(t *testing.T) {
	control := GuardedDialer(false).Control
	for _, addr := range []string{"[64:ff9b::7f00:1]:80", "[::127.0.0.1]:80", "[2002:7f00:1::1]:443", "0.1.2.3:80",
		"192.0.0.9:80", "198.18.0.1:80", "240.0.0.1:80", "255.255.255.255:80", "[2001::1]:80", "[fd00:ec2::254]:80"} {
		err := control("tcp", addr, nil)
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Addr != addr {
			t.Errorf("dial %s: %v, want a RefusedError", addr, err)
		}
	}
	for _, addr := range []string{"8.8.8.8:443", "[2606:2800:220:1:248:1893:25c8:1946]:443", "[64:ff9b::808:808]:443"} {
		if err := control("tcp", addr, nil); err != nil {
			t.Errorf("dial %s: %v, want allowed", addr, err)
		}
	}
	if err := GuardedDialer(true).Control("tcp", "[64:ff9b::7f00:1]:80", nil); err != nil {
		t.Errorf("allowPrivate still refuses: %v", err)
	}
}

// The guard refuses at dial time: a loopback server is never reached unless
// private addresses are allowed, and a redirect chain is bounded.
func TestGuardedClient(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	_, err := GuardedClient(false, 0).Get(srv.URL)
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("guarded GET of a loopback server: %v, want a RefusedError", err)
	}
	if hits != 0 {
		t.Fatalf("the refused server got %d requests", hits)
	}

	res, err := GuardedClient(true, 0).Get(srv.URL)
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("allowed GET: %v %v", res, err)
	}
	res.Body.Close()

	_, err = GuardedClient(true, 0).Get(srv.URL + "/loop")
	if err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
	if hits != 1+MaxRedirects {
		t.Errorf("%d requests for a redirect loop, want %d", hits, 1+MaxRedirects)
	}
}
