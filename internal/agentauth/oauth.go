package agentauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stepgraph/stepgraph/internal/providers"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// Bounds of a call to a provider's token endpoint: a token response is a
// few kilobytes; one that is larger or slower is not a token endpoint we
// can use, and the callback or authenticate waiting on it must end.
const (
	DefaultTokenTimeout   = 10 * time.Second
	maxTokenResponseBytes = 64 << 10
)

// tokenValue is what the vault keeps in the secrets store for one token.
type tokenValue struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token,omitempty"`
	TokenType    string `json:"token_type,omitempty"`
}

// tokenResponse is a successful answer of a token endpoint (RFC 6749 §5.1).
type tokenResponse struct {
	tokenValue
	ExpiresIn json.Number `json:"expires_in"`
}

// endpointError is a failed call to a token endpoint. Its message names the
// provider's host and, at most, the OAuth error code: never the code,
// verifier, secret or token sent, nor the body received. Refused is true
// when the provider answered and said no (an OAuth error, a 4xx): the
// grant is dead. Otherwise the endpoint could not be used this time
// (unreachable, slow, 5xx, garbage).
type endpointError struct {
	msg     string
	refused bool
}

func (e *endpointError) Error() string { return e.msg }

// callTokenEndpoint posts form to the provider's token endpoint with the
// client authentication the provider is registered with.
func (s *Service) callTokenEndpoint(ctx context.Context, p providers.Provider, clientSecret string, form url.Values) (tokenResponse, error) {
	target, err := url.Parse(p.TokenURL)
	if err != nil {
		return tokenResponse{}, &endpointError{msg: "the provider's token_url is not a URL"}
	}
	host := target.Host
	switch p.TokenEndpointAuthMethod {
	case "client_secret_basic":
		// RFC 6749 §2.3.1: both parts form-encoded before the Basic
		// encoding.
	case "client_secret_post":
		form.Set("client_id", p.ClientID)
		form.Set("client_secret", clientSecret)
	default: // none: a public client names itself only
		form.Set("client_id", p.ClientID)
	}
	timeout := s.TokenTimeout
	if timeout <= 0 {
		timeout = DefaultTokenTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return tokenResponse{}, &endpointError{msg: "the provider's token_url is not a URL"}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// GitHub answers form-encoded unless JSON is asked for.
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "stepgraph-agent-auth")
	if p.TokenEndpointAuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(clientSecret))
	}
	res, err := s.HTTPClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return tokenResponse{}, &endpointError{msg: fmt.Sprintf("the token endpoint at %s did not answer within %s", host, timeout)}
		}
		return tokenResponse{}, &endpointError{msg: "the token endpoint could not be called: " + weburl.CallFailure(target, err)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxTokenResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return tokenResponse{}, &endpointError{msg: fmt.Sprintf("the token endpoint at %s did not answer within %s", host, timeout)}
		}
		return tokenResponse{}, &endpointError{msg: fmt.Sprintf("the token endpoint at %s broke off its answer", host)}
	}
	if len(body) > maxTokenResponseBytes {
		return tokenResponse{}, &endpointError{msg: fmt.Sprintf("the token endpoint at %s answered more than %d bytes", host, maxTokenResponseBytes)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		var oerr struct {
			Error string `json:"error"`
		}
		code := ""
		if json.Unmarshal(body, &oerr) == nil && oerr.Error != "" {
			code = " (error " + providerErrorCode(oerr.Error) + ")"
		}
		return tokenResponse{}, &endpointError{refused: res.StatusCode >= 400 && res.StatusCode < 500,
			msg: fmt.Sprintf("the token endpoint at %s refused the request with status %d%s", host, res.StatusCode, code)}
	}
	tr, ok := parseTokenResponse(res.Header.Get("Content-Type"), body)
	if !ok {
		return tokenResponse{}, &endpointError{msg: fmt.Sprintf("the token endpoint at %s answered something that is not a token response", host)}
	}
	return tr, nil
}

// parseTokenResponse reads a token response: JSON (RFC 6749 §5.1) or, as
// some providers answer despite Accept, a form. It must carry an access
// token and, when it says, a bearer token type.
func parseTokenResponse(contentType string, body []byte) (tokenResponse, bool) {
	var tr tokenResponse
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return tokenResponse{}, false
		}
		tr.AccessToken, tr.RefreshToken, tr.TokenType = v.Get("access_token"), v.Get("refresh_token"), v.Get("token_type")
		tr.ExpiresIn = json.Number(v.Get("expires_in"))
	} else {
		d := json.NewDecoder(strings.NewReader(string(body)))
		d.UseNumber()
		if d.Decode(&tr) != nil {
			return tokenResponse{}, false
		}
	}
	if tr.AccessToken == "" || len(tr.AccessToken) > 16<<10 || len(tr.RefreshToken) > 16<<10 {
		return tokenResponse{}, false
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return tokenResponse{}, false
	}
	if tr.ExpiresIn != "" {
		if n, err := tr.ExpiresIn.Int64(); err != nil || n < 0 {
			return tokenResponse{}, false
		}
	}
	return tr, true
}

// expiry is when a token answered at now with tr expires (zero: not said).
func (tr tokenResponse) expiry(now time.Time) time.Time {
	n, err := tr.ExpiresIn.Int64()
	if tr.ExpiresIn == "" || err != nil {
		return time.Time{}
	}
	return now.Add(time.Duration(n) * time.Second)
}

// Bounds of revocation at the provider (RFC 7009) when tokens are deleted:
// each call is a token-endpoint call (DefaultTokenTimeout, 64 KiB); one
// deletion revokes at most maxRevocations tokens within RevocationBudget,
// so deleting a provider with many users' tokens cannot hold a request (or
// a Lambda) for long. Tokens past the bound are deleted here only, as
// when the provider has no revocation endpoint.
const (
	DefaultRevocationBudget = 15 * time.Second
	maxRevocations          = 100
)

// revokeAtProvider asks the provider's revocation endpoint to revoke the
// token: the refresh token when there is one (RFC 7009 §2.1: revoking it
// should revoke the access tokens of the same grant too), else the access
// token. 200 is success, whatever the body (§2.2: an unknown token is no
// error). The error says the host and status only.
func (s *Service) revokeAtProvider(ctx context.Context, p providers.Provider, clientSecret string, v tokenValue) error {
	if p.RevocationURL == nil || *p.RevocationURL == "" {
		return nil
	}
	target, err := url.Parse(*p.RevocationURL)
	if err != nil {
		return errors.New("the provider's revocation_url is not a URL")
	}
	form := url.Values{"token": {v.AccessToken}, "token_type_hint": {"access_token"}}
	if v.RefreshToken != "" {
		form = url.Values{"token": {v.RefreshToken}, "token_type_hint": {"refresh_token"}}
	}
	s.clientAuthForm(p, clientSecret, form)
	timeout := s.TokenTimeout
	if timeout <= 0 {
		timeout = DefaultTokenTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return errors.New("the provider's revocation_url is not a URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "stepgraph-agent-auth")
	if p.TokenEndpointAuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(clientSecret))
	}
	res, err := s.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("the revocation endpoint at %s did not answer within %s", target.Host, timeout)
		}
		return errors.New("the revocation endpoint could not be called: " + weburl.CallFailure(target, err))
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxTokenResponseBytes))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the revocation endpoint at %s answered status %d", target.Host, res.StatusCode)
	}
	return nil
}

// clientAuthForm adds the client authentication that goes in the form
// (client_secret_post, none); client_secret_basic goes in the header.
func (s *Service) clientAuthForm(p providers.Provider, clientSecret string, form url.Values) {
	switch p.TokenEndpointAuthMethod {
	case "client_secret_basic":
	case "client_secret_post":
		form.Set("client_id", p.ClientID)
		form.Set("client_secret", clientSecret)
	default:
		form.Set("client_id", p.ClientID)
	}
}
