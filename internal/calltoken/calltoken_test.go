package calltoken

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
)

// testKeys derives a distinct key per organization and generation; the
// organization "org-keyless" has none (nothing was signed for it).
func testKeys(_ context.Context, orgID string, gen int64, create bool) ([]byte, error) {
	if orgID == "org-keyless" && !create {
		return nil, ErrNoKey
	}
	k := sha256.Sum256(fmt.Appendf(nil, "%s/%d", orgID, gen))
	return k[:], nil
}

func TestVerify(t *testing.T) {
	start := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	period := 24 * time.Hour
	signerAt := func(at time.Time) *Signer {
		return &Signer{Keys: testKeys, Period: period, Now: func() time.Time { return at }}
	}
	claims := Claims{OrgID: "org-a", RunID: "run-1", AssistantID: "asst-1", UserID: "alice"}
	token, issued, err := signerAt(start).Issue(context.Background(), claims, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	signed, sig, _ := strings.Cut(token[len(prefix):], ".")
	withClaims := func(edit func(*Claims)) string {
		c := issued
		edit(&c)
		other, _, _ := strings.Cut(mustIssueRaw(t, c)[len(prefix):], ".")
		return prefix + other + "." + sig // the original MAC over edited claims
	}
	cases := []struct {
		name  string
		token string
		at    time.Time
		rule  string // "" when valid
	}{
		{"valid", token, start.Add(time.Minute), ""},
		{"valid just before its expiry", token, start.Add(10*time.Minute + Slack - time.Second), ""},
		{"expired", token, start.Add(10*time.Minute + Slack), "expired"},
		{"another organization's claims", withClaims(func(c *Claims) { c.OrgID = "org-b" }), start, "signature"},
		{"an organization without keys", withClaims(func(c *Claims) { c.OrgID = "org-keyless" }), start, "signature"},
		{"another run's claims", withClaims(func(c *Claims) { c.RunID = "run-2" }), start, "signature"},
		{"a later expiry", withClaims(func(c *Claims) { c.Expires = c.Expires.Add(time.Hour) }), start, "signature"},
		{"tampered signature", prefix + signed + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 32)), start, "signature"},
		{"previous key generation (rotation overlap)", token, start.Add(period), ""},
		{"rotated key", token, start.Add(2 * period), "rotated"},
		{"not a token", "Bearer nothing", start, "not a call token"},
		{"empty", "", start, "not a call token"},
		{"garbled claims", prefix + "!!!." + sig, start, "not a call token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := signerAt(tc.at)
			if tc.name == "previous key generation (rotation overlap)" || tc.name == "rotated key" {
				// Tokens live far less than a period; this one is
				// re-dated to test the generations alone.
				tc.token = reissue(t, issued, tc.at.Add(time.Hour))
			}
			got, err := s.Verify(context.Background(), tc.token)
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if got.OrgID != "org-a" || got.RunID != "run-1" || got.AssistantID != "asst-1" || got.UserID != "alice" || got.ID == "" {
					t.Fatalf("claims %+v", got)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("Verify: %v, want ErrInvalid naming %q", err, tc.rule)
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Fatalf("the error names the token: %v", err)
			}
		})
	}
}

// mustIssueRaw signs c as it is (for the tampering cases).
func mustIssueRaw(t *testing.T, c Claims) string {
	t.Helper()
	tok, err := sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// reissue signs issued's claims, expiring at exp, under their own generation.
func reissue(t *testing.T, issued Claims, exp time.Time) string {
	t.Helper()
	issued.Expires = exp
	return mustIssueRaw(t, issued)
}

func sign(c Claims) (string, error) {
	key, _ := testKeys(context.Background(), c.OrgID, c.Generation, true)
	return encode(key, c)
}

// memBudgets is store.CallBudgets in memory (the adapters are held to the
// contract in storetest).
type memBudgets map[string]*struct {
	spent store.CallSpent
	seen  map[string]bool
}

func (m memBudgets) SpendCall(_ context.Context, id, request string, size int64, _ time.Time) (store.CallSpent, error) {
	e := m[id]
	if e == nil {
		e = &struct {
			spent store.CallSpent
			seen  map[string]bool
		}{seen: map[string]bool{}}
		m[id] = e
	}
	if !e.seen[request] {
		e.seen[request] = true
		e.spent.Requests++
		e.spent.Bytes += size
	}
	return e.spent, nil
}

func TestSpend(t *testing.T) {
	budgets := memBudgets{}
	call := Claims{ID: "c1", OrgID: "org-a", Expires: time.Now().Add(time.Hour)}
	other := Claims{ID: "c2", OrgID: "org-a", Expires: time.Now().Add(time.Hour)}
	tokens := Limit{Route: "auth", Requests: 2}
	events := Limit{Route: "events", Bytes: 100}
	cases := []struct {
		name    string
		call    Claims
		limit   Limit
		request string
		size    int64
		over    string // "" when within
	}{
		{"first token request", call, tokens, "a", 10, ""},
		{"second", call, tokens, "b", 10, ""},
		{"a retry of the second counts once", call, tokens, "b", 10, ""},
		{"third: over the requests", call, tokens, "c", 10, "at most 2 requests"},
		{"another call has its own budget", other, tokens, "a", 10, ""},
		{"another route has its own budget", call, events, "a", 60, ""},
		{"over the bytes", call, events, "b", 60, "at most 100 bytes"},
	}
	for _, tc := range cases {
		err := Spend(context.Background(), budgets, tc.call, tc.limit, tc.request, tc.size)
		switch {
		case tc.over == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.over != "" && (fail.KindOf(err) != fail.KindQuota || !strings.Contains(err.Error(), tc.over)):
			t.Errorf("%s: %v, want a quota error naming %q", tc.name, err, tc.over)
		}
	}
}
