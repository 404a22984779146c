package calltoken

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// prefix marks the format's version.
const prefix = "sgc1."

// DefaultPeriod is how long a key generation signs new tokens.
const DefaultPeriod = 30 * 24 * time.Hour

// Slack is how long past the call's budget a token stays valid: the
// budget is soft (a superstep under way finishes), and the graph's last
// requests are made just before the call answers.
const Slack = 5 * time.Minute

// Claims is what a token binds a call to.
type Claims struct {
	ID          string    `json:"id"` // the call's, random: the key of its counters
	OrgID       string    `json:"org"`
	RunID       string    `json:"run"`
	AssistantID string    `json:"asst"`
	UserID      string    `json:"user,omitempty"`
	Expires     time.Time `json:"exp"`
	// Generation is the key generation that signed the token.
	Generation int64 `json:"gen"`
}

// Keys answers an organization's key of a generation: the same key for
// every caller, forever. Signing creates it on first use (create); a
// verifier only reads it, answering ErrNoKey when there is none (no token
// was ever signed with it), so the functions that verify need no grant to
// create keys.
type Keys func(ctx context.Context, orgID string, generation int64, create bool) ([]byte, error)

// ErrNoKey: the organization has no key of the generation.
var ErrNoKey = errors.New("no such key")

// Signer issues and verifies tokens.
type Signer struct {
	Keys Keys
	// Period is a key generation's (DefaultPeriod when 0).
	Period time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// ErrInvalid is every refusal of Verify: the wrapping error names the rule
// broken (expired, rotated key, ...), never the token.
var ErrInvalid = errors.New("invalid call token")

func (s *Signer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Signer) generation(t time.Time) int64 {
	p := s.Period
	if p <= 0 {
		p = DefaultPeriod
	}
	return t.Unix() / int64(p/time.Second)
}

// Issue signs a token for a call of budget: c's ID, Expires and Generation
// are set here (the expiry is budget plus Slack from now).
func (s *Signer) Issue(ctx context.Context, c Claims, budget time.Duration) (string, Claims, error) {
	if c.OrgID == "" {
		return "", Claims{}, errors.New("calltoken: a call token needs an organization")
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return "", Claims{}, err
	}
	now := s.now()
	c.ID = hex.EncodeToString(raw)
	c.Expires = now.Add(budget + Slack).UTC().Truncate(time.Second)
	c.Generation = s.generation(now)
	key, err := s.Keys(ctx, c.OrgID, c.Generation, true)
	if err != nil {
		return "", Claims{}, fmt.Errorf("calltoken: the organization's key: %w", err)
	}
	token, err := encode(key, c)
	return token, c, err
}

// encode is c signed under key.
func encode(key []byte, c Claims) (string, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signed := prefix + base64.RawURLEncoding.EncodeToString(body)
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac(key, signed)), nil
}

// Verify answers the claims of a valid token; a refusal wraps ErrInvalid
// with the rule it broke. A key that cannot be read is another error (the
// caller answers it as unavailable, not as a bad token).
func (s *Signer) Verify(ctx context.Context, token string) (Claims, error) {
	signed, sig, ok := cut(token)
	if !ok {
		return Claims{}, fmt.Errorf("%w: not a call token", ErrInvalid)
	}
	body, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(signed, prefix))
	var c Claims
	if err != nil || json.Unmarshal(body, &c) != nil || c.OrgID == "" || c.ID == "" {
		return Claims{}, fmt.Errorf("%w: not a call token", ErrInvalid)
	}
	now := s.now()
	if g := s.generation(now); c.Generation != g && c.Generation != g-1 {
		return Claims{}, fmt.Errorf("%w: signed with a rotated key", ErrInvalid)
	}
	key, err := s.Keys(ctx, c.OrgID, c.Generation, false)
	if errors.Is(err, ErrNoKey) {
		return Claims{}, fmt.Errorf("%w: its signature does not match", ErrInvalid)
	}
	if err != nil {
		return Claims{}, fmt.Errorf("calltoken: the organization's key: %w", err)
	}
	if !hmac.Equal(sig, mac(key, signed)) {
		return Claims{}, fmt.Errorf("%w: its signature does not match", ErrInvalid)
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w: expired (the run's call has ended)", ErrInvalid)
	}
	return c, nil
}

// cut splits a token into its signed part and its MAC.
func cut(token string) (string, []byte, bool) {
	if !strings.HasPrefix(token, prefix) {
		return "", nil, false
	}
	i := strings.LastIndexByte(token, '.')
	if i <= len(prefix) {
		return "", nil, false
	}
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil {
		return "", nil, false
	}
	return token[:i], sig, true
}

func mac(key []byte, signed string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(signed))
	return h.Sum(nil)
}

// KeyName is the name, among an organization's secret references, of its
// key of a generation.
func KeyName(generation int64) string { return "runtime_calls_" + strconv.FormatInt(generation, 10) }
