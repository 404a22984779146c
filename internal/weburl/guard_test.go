package weburl

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestIsInternal(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true,
		"169.254.169.254": true, "fd00:ec2::254": true, "fe80::1": true, "100.64.0.1": true, "0.0.0.0": true,
		"::ffff:127.0.0.1": true, "224.0.0.1": true, "fc00::1": true,
		"93.184.216.34": false, "2606:2800:220:1:248:1893:25c8:1946": false, "8.8.8.8": false,
	} {
		if got := IsInternal(netip.MustParseAddr(addr)); got != want {
			t.Errorf("IsInternal(%s) = %v, want %v", addr, got, want)
		}
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
