package agentauth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stepgraph/stepgraph/internal/fail"
)

// Bounds of an authenticate request: generous for real scopes and user ids,
// small enough that a request cannot make a huge URL or record.
const (
	maxScopes    = 50
	maxScopeLen  = 200
	maxUserIDLen = 256
	// maxAgentIDLen bounds agent_id: an assistant id is a UUID or a graph
	// id, far shorter.
	maxAgentIDLen = 256
)

// AuthenticateInput is a POST /v2/auth/authenticate body (upstream's
// AuthAuthenticateRequest). Pointers tell absent from empty.
type AuthenticateInput struct {
	Provider *string   `json:"provider"`
	Scopes   *[]string `json:"scopes"`
	UserID   *string   `json:"user_id"`
	// LsUserID is accepted as upstream's client sends it; it does not
	// change which token is used (see docs/agent-auth.md).
	LsUserID *string `json:"ls_user_id"`
	// AgentID scopes the token to an agent (an assistant id, which
	// langchain-auth fills in inside a LangGraph run): a token granted
	// with it serves only requests with the same agent_id. Absent or
	// null: the user's unscoped token.
	AgentID *string `json:"agent_id"`
	// ForceNew starts a new authorization even when a token is stored.
	ForceNew *bool `json:"force_new"`
}

// request is a checked AuthenticateInput.
type request struct {
	provider string
	scopes   []string // sorted, unique
	userID   string
	agentID  string // "": unscoped
	forceNew bool
}

func (in AuthenticateInput) check() (request, error) {
	var c fail.Checks
	c.Add(in.Provider == nil, "provider", "is required")
	c.Add(in.Scopes == nil, "scopes", "is required (an array of scope strings, may be empty)")
	c.Add(in.UserID == nil, "user_id", "is required: tokens belong to a user of your application")
	var r request
	if in.Provider != nil {
		r.provider = *in.Provider
		c.Add(r.provider == "", "provider", "must not be empty")
	}
	if in.UserID != nil {
		c.AddErr(checkUserID(*in.UserID))
		r.userID = *in.UserID
	}
	if in.Scopes != nil {
		s, err := normalizeScopes(*in.Scopes)
		c.AddErr(err)
		r.scopes = s
	}
	if in.AgentID != nil {
		c.AddErr(checkAgentID(*in.AgentID))
		r.agentID = *in.AgentID
	}
	r.forceNew = in.ForceNew != nil && *in.ForceNew
	return r, c.Err()
}

// checkAgentFilter checks an optional agent_id query parameter ("": every
// agent's and the unscoped tokens).
func checkAgentFilter(a string) error {
	if a == "" {
		return nil
	}
	return checkAgentID(a)
}

// checkAgentID: an agent id is part of a token's key (and of its DynamoDB
// sort key, where a control character would be ambiguous).
func checkAgentID(a string) error {
	switch {
	case strings.TrimSpace(a) == "":
		return fail.Invalid("agent_id", "must not be empty (leave it out for the user's unscoped token)")
	case utf8.RuneCountInString(a) > maxAgentIDLen:
		return fail.Invalid("agent_id", "must be at most %d characters", maxAgentIDLen)
	case strings.ContainsFunc(a, unicode.IsControl):
		return fail.Invalid("agent_id", "must not contain control characters")
	}
	return nil
}

// checkUserFilter checks an optional user_id query parameter ("": every
// user).
func checkUserFilter(u string) error {
	if u == "" {
		return nil
	}
	return checkUserID(u)
}

func checkUserID(u string) error {
	switch {
	case strings.TrimSpace(u) == "":
		return fail.Invalid("user_id", "must not be empty")
	case utf8.RuneCountInString(u) > maxUserIDLen:
		return fail.Invalid("user_id", "must be at most %d characters", maxUserIDLen)
	case strings.ContainsFunc(u, unicode.IsControl):
		return fail.Invalid("user_id", "must not contain control characters")
	}
	return nil
}

// normalizeScopes checks scopes against RFC 6749 §3.3 (scope-token =
// 1*( %x21 / %x23-5B / %x5D-7E )) and returns them sorted without
// duplicates: the order of scopes means nothing, so ["a","b"] and ["b","a"]
// are one key.
func normalizeScopes(in []string) ([]string, error) {
	if len(in) > maxScopes {
		return nil, fail.Invalid("scopes", "must have at most %d entries", maxScopes)
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		if s == "" || len(s) > maxScopeLen {
			return nil, fail.Invalid("scopes", "entry %d must be 1-%d characters", i, maxScopeLen)
		}
		for j := 0; j < len(s); j++ {
			if c := s[j]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return nil, fail.Invalid("scopes", "entry %d must be printable ASCII without spaces, '\"' or '\\' (RFC 6749 §3.3)", i)
			}
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// covers reports whether a token granted for have serves a request for
// want (both sorted).
func covers(have, want []string) bool {
	for _, w := range want {
		if _, ok := slices.BinarySearch(have, w); !ok {
			return false
		}
	}
	return true
}

// stateHash is what the store keeps of a state: a leaked database row
// cannot be replayed at the callback.
func stateHash(state string) string {
	h := sha256.Sum256([]byte(state))
	return hex.EncodeToString(h[:])
}

// challenge is the PKCE code_challenge of verifier (RFC 7636 §4.2).
func challenge(method, verifier string) string {
	if method == "plain" {
		return verifier
	}
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// providerErrorCode keeps of a provider's error parameter only what is an
// OAuth error code (RFC 6749 §4.1.2.1: printable ASCII); anything else is
// not repeated to the caller.
func providerErrorCode(e string) string {
	if e == "" || len(e) > 64 {
		return "(unreadable)"
	}
	for i := 0; i < len(e); i++ {
		c := e[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "(unreadable)"
		}
	}
	return e
}
