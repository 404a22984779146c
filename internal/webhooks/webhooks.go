// Package webhooks delivers run notifications: one signed JSON POST per
// terminal run, retried with backoff on network errors, 5xx and 429, never
// blocking or failing the run. It owns the destination rule (absolute
// http(s) URL; no private, loopback, link-local, metadata or other
// special-purpose address unless configured — checked again on every connection by weburl's guarded
// client, after DNS resolution and redirects, so a name cannot be pointed at
// an internal address later) and the signature, per the Standard Webhooks
// specification (https://www.standardwebhooks.com/), so receivers can verify
// with its libraries and reject replays:
//
//	webhook-id: msg_<run id>         the same on every attempt: the receiver's dedupe key
//	webhook-timestamp: <unix seconds> of this attempt, inside the signed content
//	webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">
//
// with one v1 signature per signing secret of the organization (two while a
// rotated secret is still in its overlap; keys.go).
package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/stepgraph/stepgraph/internal/fail"
	"github.com/stepgraph/stepgraph/internal/weburl"
)

// The Standard Webhooks headers of a delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts a signing secret in the Standard Webhooks form
// whsec_<base64 of the key>.
const SecretPrefix = "whsec_"

// Limits of a webhook URL and of delivery.
const (
	MaxURLLen      = 65536
	maxAttempts    = 3
	attemptTimeout = 30 * time.Second
)

// SigningKeys gives an organization's signing secrets.
type SigningKeys interface {
	// SigningSecrets returns the secrets that sign the organization's
	// webhooks now, each whsec_<base64>, the current one first.
	SigningSecrets(ctx context.Context, orgID string) ([]string, error)
}

// Sign is the webhook-signature value of one attempt: a v1 signature per
// secret, space-separated — HMAC-SHA256, keyed with the secret's decoded
// bytes, of "<id>.<timestamp>.<body>", in standard base64.
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("no signing secret: a webhook is never sent unsigned")
	}
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
		if err != nil || !strings.HasPrefix(s, SecretPrefix) {
			// The value is never in the message: it is a secret.
			return "", errors.New("a signing secret is not in the form whsec_<base64>")
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}

// messageID is a delivery's webhook-id: derived from the run, so a
// notification sent again for the same run (retries, a worker that crashed
// after sending) carries the same id and receivers drop the duplicate. A
// run id is a UUID, so the id has no "." to confuse the signed content.
func messageID(payload map[string]any) string {
	if id, ok := payload["run_id"].(string); ok && id != "" && !strings.ContainsAny(id, ". ") {
		return "msg_" + id
	}
	return "msg_" + uuid.NewString()
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
func (s *Sender) Deliver(ctx context.Context, orgID, url string, payload map[string]any) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.send(context.WithoutCancel(ctx), orgID, url, payload); err != nil {
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
	secrets, err := s.Keys.SigningSecrets(ctx, orgID)
	if err != nil {
		return fmt.Errorf("signing secret: %w", err)
	}
	id := messageID(payload)
	body := map[string]any{}
	for k, v := range payload {
		body[k] = v
	}
	backoff := s.Backoff
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	for attempt := 1; ; attempt++ {
		// Each attempt is signed at its own time (the timestamp a receiver
		// checks against its tolerance window); the id stays.
		now := time.Now().UTC()
		body["webhook_sent_at"] = now.Format(time.RFC3339Nano)
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		signature, err := Sign(secrets, id, now.Unix(), raw)
		if err != nil {
			return err
		}
		retry, err := s.post(ctx, url, raw, http.Header{HeaderID: {id},
			HeaderTimestamp: {strconv.FormatInt(now.Unix(), 10)}, HeaderSignature: {signature}})
		if err == nil || !retry || attempt == maxAttempts {
			return err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

// post makes one attempt; retry says whether another may succeed.
func (s *Sender) post(ctx context.Context, url string, body []byte, signed http.Header) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stepgraph-webhook")
	for k, v := range signed {
		// Set as written: the specification spells them in lower case.
		req.Header[k] = v
	}
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
