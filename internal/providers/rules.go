package providers

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/store"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Bounds on field sizes: generous for real providers, small enough that a
// registry entry can never be used as a blob store.
const (
	maxNameLen         = 200
	maxClientIDLen     = 512
	maxClientSecretLen = 4096
)

var providerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

var (
	challengeMethods = []string{"S256", "plain"}
	authMethods      = []string{"none", "client_secret_basic", "client_secret_post"}
	providerTypes    = []string{"microsoft", "salesforce", "slack"}
)

func checkProviderID(id string) error {
	if !providerIDPattern.MatchString(id) {
		return fail.Invalid("provider_id", "must be 1-64 characters of letters, digits, '.', '_' or '-'")
	}
	if strings.Trim(id, ".") == "" {
		// "." and ".." cannot be named in a URL path (/v2/auth/providers/..).
		return fail.Invalid("provider_id", "must not be only dots")
	}
	return nil
}

// checkRecord applies every rule that holds for a stored registration, on
// create and after an update alike. secret is a client secret sent with the
// request (nil: none); keepsSecret tells that a stored one stays in effect.
func checkRecord(c *fail.Checks, r store.Provider, secret *string, keepsSecret, allowLoopback bool) {
	checkText(c, "name", r.Name, maxNameLen)
	checkText(c, "client_id", r.ClientID, maxClientIDLen)
	if secret != nil {
		// Blank is empty: no provider issues a secret of spaces, and one
		// pasted wrong would only fail later, at the token exchange.
		c.Add(strings.TrimSpace(*secret) == "", "client_secret", "must not be empty or only whitespace")
		c.Add(utf8.RuneCountInString(*secret) > maxClientSecretLen, "client_secret", "must be at most %d characters", maxClientSecretLen)
	}
	hasSecret := keepsSecret || (secret != nil && *secret != "")
	public := r.TokenEndpointAuthMethod == "none"
	c.Add(public && hasSecret, "client_secret", "must not be set when token_endpoint_auth_method is none (a public client has no secret)")
	// A confidential client (client_secret_basic or client_secret_post, the
	// default) authenticates at the token endpoint with its secret: without
	// one every token exchange would fail.
	c.Add(!public && secret == nil && !keepsSecret && slices.Contains(authMethods, r.TokenEndpointAuthMethod), "client_secret",
		"is required unless token_endpoint_auth_method is none (a public client)")
	c.AddErr(weburl.Check("auth_url", r.AuthURL, allowLoopback))
	c.AddErr(weburl.Check("token_url", r.TokenURL, allowLoopback))
	if r.RevocationURL != "" { // optional: "" (or absent) is none
		c.AddErr(weburl.Check("revocation_url", r.RevocationURL, allowLoopback))
	}
	c.Add(!slices.Contains(challengeMethods, r.CodeChallengeMethod), "code_challenge_method", "must be one of S256, plain")
	c.Add(!slices.Contains(authMethods, r.TokenEndpointAuthMethod), "token_endpoint_auth_method", "must be one of none, client_secret_basic, client_secret_post")
	c.Add(r.ProviderType != "" && !slices.Contains(providerTypes, r.ProviderType), "provider_type", "must be one of microsoft, salesforce, slack or null")
}

func checkText(c *fail.Checks, field, v string, max int) {
	c.Add(strings.TrimSpace(v) == "", field, "must not be empty")
	c.Add(utf8.RuneCountInString(v) > max, field, "must be at most %d characters", max)
	c.Add(strings.ContainsFunc(v, unicode.IsControl), field, "must not contain control characters")
}
