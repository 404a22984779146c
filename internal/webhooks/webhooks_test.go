package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type fixedKey []byte

func (k fixedKey) SigningSecret(context.Context, string) ([]byte, error) { return k, nil }

// receiver records deliveries and answers with the given statuses in turn.
type receiver struct {
	mu       sync.Mutex
	bodies   [][]byte
	sigs     []string
	statuses []int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, b)
	rc.sigs = append(rc.sigs, r.Header.Get(SignatureHeader))
	status := http.StatusOK
	if n := len(rc.bodies); n <= len(rc.statuses) {
		status = rc.statuses[n-1]
	}
	w.WriteHeader(status)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.bodies)
}

func TestDeliverSignsAndRetries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int
		want     int // attempts
	}{
		{"ok at once", nil, 1},
		{"5xx then ok", []int{503}, 2},
		{"429 twice then ok", []int{429, 429}, 3},
		{"always 500 stops after three", []int{500, 500, 500, 500}, 3},
		{"4xx is final", []int{400}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := &receiver{statuses: c.statuses}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			key := fixedKey("k3y")
			s := &Sender{Keys: key, AllowPrivate: true, Backoff: time.Millisecond}
			s.Deliver("org", srv.URL+"/hook", map[string]any{"run_id": "r1", "status": "success"})
			s.Wait()
			if got := rc.count(); got != c.want {
				t.Fatalf("%d attempts, want %d", got, c.want)
			}
			mac := hmac.New(sha256.New, key)
			mac.Write(rc.bodies[0])
			if rc.sigs[0] != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
				t.Errorf("signature %q does not match the body", rc.sigs[0])
			}
			var body map[string]any
			if err := json.Unmarshal(rc.bodies[0], &body); err != nil || body["run_id"] != "r1" || body["webhook_sent_at"] == nil {
				t.Errorf("body %s (%v)", rc.bodies[0], err)
			}
		})
	}
}

func TestPrivateDestinationsRefused(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := &Sender{Keys: fixedKey("k"), Backoff: time.Millisecond}
	for _, u := range []string{"http://127.0.0.1/x", "http://localhost:8080/x", "http://10.1.2.3/x", "http://169.254.169.254/latest",
		"http://[::1]/x", "http://192.168.0.1/x", "ftp://example.com/x", "/relative", "http://u:p@example.com/x"} {
		if err := s.Check(u); err == nil || !strings.HasPrefix(err.Error(), "webhook: ") {
			t.Errorf("Check(%q) = %v, want a webhook error", u, err)
		}
	}
	if err := s.Check("https://hooks.example.com/x?token=1"); err != nil {
		t.Errorf("public URL refused: %v", err)
	}
	// The dial-time check refuses loopback even when Check was bypassed (a
	// name resolving to 127.0.0.1, or a redirect there).
	if _, err := s.post(context.Background(), srv.URL, []byte("{}"), "sig"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("dial to loopback: %v", err)
	}
	if rc.count() != 0 {
		t.Errorf("refused destination received %d requests", rc.count())
	}
}
