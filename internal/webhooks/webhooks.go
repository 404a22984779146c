// Package webhooks delivers run notifications: one signed JSON POST per
// terminal run, retried with backoff on network errors, 5xx and 429, never
// blocking or failing the run. It owns the destination rule (absolute
// http(s) URL; no private, loopback, link-local or metadata address unless
// configured — checked again on every connection by weburl's guarded
// client, after DNS resolution and redirects, so a name cannot be pointed at
// an internal address later) and the signature: X-Stepgraph-Signature:
// sha256=<hex HMAC-SHA256 of the body> with the organization's signing
// secret.
package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// SignatureHeader carries the body's HMAC.
const SignatureHeader = "X-Stepgraph-Signature"

// Limits of a webhook URL and of delivery.
const (
	MaxURLLen      = 65536
	maxAttempts    = 3
	attemptTimeout = 30 * time.Second
)

// SigningKeys gives an organization's signing secret.
type SigningKeys interface {
	SigningSecret(ctx context.Context, orgID string) ([]byte, error)
}

// Sender delivers webhooks in the background. The zero value is not
// usable: Keys is required.
type Sender struct {
	Keys SigningKeys
	Log  *slog.Logger
	// AllowPrivate lets webhooks reach private, loopback and link-local
	// addresses (local development, tests).
	AllowPrivate bool
	// Backoff is the wait before the second attempt, doubled after
	// (default 500 ms).
	Backoff time.Duration

	once   sync.Once
	client *http.Client
	wg     sync.WaitGroup
}

// Check is the rule for a webhook URL at run creation.
func (s *Sender) Check(raw string) error {
	if len(raw) > MaxURLLen {
		return fail.Invalid("webhook", "must be at most %d characters", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fail.Invalid("webhook", "must be an absolute http:// or https:// URL")
	}
	if u.User != nil {
		return fail.Invalid("webhook", "must not contain credentials")
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil && !s.AllowPrivate && weburl.IsInternal(ip) {
		return fail.Invalid("webhook", "must not point at a private, loopback, link-local, metadata or other special-purpose address")
	}
	return nil
}

// Deliver sends payload (plus webhook_sent_at) to url in the background.
// A failure is logged with the destination's host only: webhook URLs are
// often capabilities (Slack's /services/T…/B…/<secret>, ?token=…), so
// neither their path nor their query may reach a log line.
func (s *Sender) Deliver(orgID, url string, payload map[string]any) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.send(context.Background(), orgID, url, payload); err != nil {
			runID, _ := payload["run_id"].(string)
			s.log().Warn("webhook not delivered", "org_id", orgID, "run_id", runID,
				"host", hostOf(url), "error", redactURLs(err.Error(), url))
		}
	}()
}

// hostOf is the host[:port] of a webhook URL, what a log may name of it.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "(unparsable URL)"
}

// absoluteURL matches a URL inside an error message (net/http quotes the
// request's URL, and a redirect's target, in its errors).
var absoluteURL = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]*`)

// redactURLs cuts every URL in msg down to scheme://host, and removes the
// webhook's own path and query wherever they appear (a relative Location, a
// receiver's message): an error must not carry what Deliver does not log.
func redactURLs(msg, webhook string) string {
	msg = absoluteURL.ReplaceAllStringFunc(msg, func(m string) string {
		u, err := url.Parse(m)
		if err != nil || u.Host == "" {
			return "[url redacted]"
		}
		return u.Scheme + "://" + u.Host
	})
	if u, err := url.Parse(webhook); err == nil {
		for _, part := range []string{u.RawQuery, u.EscapedPath(), u.Path} {
			if len(part) > 1 {
				msg = strings.ReplaceAll(msg, part, "[redacted]")
			}
		}
	}
	return msg
}

// Wait blocks until deliveries in flight are done (shutdown, tests).
func (s *Sender) Wait() { s.wg.Wait() }

func (s *Sender) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *Sender) send(ctx context.Context, orgID, url string, payload map[string]any) error {
	key, err := s.Keys.SigningSecret(ctx, orgID)
	if err != nil {
		return fmt.Errorf("signing secret: %w", err)
	}
	body := map[string]any{}
	for k, v := range payload {
		body[k] = v
	}
	body["webhook_sent_at"] = time.Now().UTC().Format(time.RFC3339Nano)
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(raw)
	signature := "sha256=" + hex.EncodeToString(mac.Sum(nil))

	backoff := s.Backoff
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	for attempt := 1; ; attempt++ {
		retry, err := s.post(ctx, url, raw, signature)
		if err == nil || !retry || attempt == maxAttempts {
			return err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

// post makes one attempt; retry says whether another may succeed.
func (s *Sender) post(ctx context.Context, url string, body []byte, signature string) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, signature)
	req.Header.Set("User-Agent", "stepgraph-webhook")
	res, err := s.httpClient().Do(req)
	if err != nil {
		var refused *weburl.RefusedError
		return !errors.As(err, &refused), err
	}
	res.Body.Close()
	switch {
	case res.StatusCode < 300:
		return false, nil
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return true, fmt.Errorf("receiver answered %s", res.Status)
	default:
		return false, fmt.Errorf("receiver answered %s", res.Status)
	}
}

// httpClient dials only allowed addresses (weburl's guard): the check runs
// on the resolved IP of every connection, redirects included.
func (s *Sender) httpClient() *http.Client {
	s.once.Do(func() {
		transport := weburl.GuardedTransport(s.AllowPrivate)
		transport.MaxIdleConnsPerHost, transport.IdleConnTimeout = 4, 30*time.Second
		transport.ResponseHeaderTimeout = attemptTimeout
		s.client = &http.Client{Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("too many redirects")
			}
			return nil
		}}
	})
	return s.client
}
