package aws

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/secrets"
)

// Defaults of Options.
const (
	DefaultCacheTTL  = 5 * time.Minute
	DefaultCacheSize = 10000
)

// suffixHexLen is the length of the random part of a reference.
const suffixHexLen = 24

// maxNameLen is Secrets Manager's limit on a secret name.
const maxNameLen = 512

// Options configure a Store.
type Options struct {
	// Prefix is prepended to every secret name (not to references), e.g.
	// "stepgraph/prod/". It may be empty; it must consist of the characters
	// Secrets Manager allows in names: A-Z a-z 0-9 / _ + = . @ -.
	Prefix string
	// KMSKeyID encrypts new secrets with this key; "" means the
	// AWS-managed key aws/secretsmanager.
	KMSKeyID string
	// CacheTTL is how long Get keeps a value; 0 means DefaultCacheTTL and a
	// negative value disables the cache.
	CacheTTL time.Duration
	// CacheSize bounds the cached values; 0 means DefaultCacheSize.
	CacheSize int
	// Description is set on new secrets; "" means a stock description.
	Description string
	// Grouped keeps the values of one owner in one secret (see grouped.go):
	// the count of secrets, and the bill, grows with organizations and
	// deployments instead of values. References made either way stay
	// readable either way.
	Grouped bool
	// Tags, when set, gives the tags of a new secret from its name (without
	// Prefix): the deployed functions tag an organization's secrets with
	// org=<its id> (lambdaapp.OrgTags), the condition of the run worker's
	// tenant sessions (secretsmanager:ResourceTag/org).
	Tags func(name string) map[string]string
}

// Store is a secrets.Store on AWS Secrets Manager. It is safe for concurrent
// use.
type Store struct {
	client *secretsmanager.Client
	opts   Options
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	value   []byte
	expires time.Time
}

var _ secrets.Store = (*Store)(nil)

// New returns a Store using cfg (region, credentials, endpoint) and opts.
func New(cfg awssdk.Config, opts Options) (*Store, error) {
	if !validName(opts.Prefix) {
		return nil, fmt.Errorf("secrets/aws: prefix %q: must consist of [A-Za-z0-9/_+=.@-]", opts.Prefix)
	}
	if len(opts.Prefix) > maxNameLen-secrets.MaxHintLen-1-suffixHexLen {
		return nil, fmt.Errorf("secrets/aws: prefix %q is too long", opts.Prefix)
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Description == "" {
		opts.Description = "stepgraph secret (managed by stepgraph; do not edit)"
	}
	return &Store{
		client: secretsmanager.NewFromConfig(cfg),
		opts:   opts,
		now:    time.Now,
		cache:  map[string]entry{},
	}, nil
}

// Create implements secrets.Store.
func (s *Store) Create(ctx context.Context, hint string, value []byte) (string, error) {
	if err := secrets.ValidHint(hint); err != nil {
		return "", err
	}
	if s.opts.Grouped {
		ref, ok, err := s.createGrouped(ctx, hint, value)
		if ok || err != nil {
			return ref, err
		}
		// Too large for a map, or every shard full: a secret of its own.
	}
	for attempt := 0; ; attempt++ {
		ref, err := s.create(ctx, hint, value)
		if !errors.Is(err, errNameTaken) {
			return ref, err
		}
		if attempt == 2 {
			return "", fmt.Errorf("secrets/aws: create %q: %w", hint, err)
		}
	}
}

// errNameTaken: the random name is another secret's (never seen in practice:
// 96 random bits); Create tries another.
var errNameTaken = errors.New("secret name taken")

func (s *Store) create(ctx context.Context, hint string, value []byte) (string, error) {
	suffix := make([]byte, suffixHexLen/2)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("secrets/aws: create %q: random suffix: %v", hint, err)
	}
	ref := hint + "-" + hex.EncodeToString(suffix)
	in := &secretsmanager.CreateSecretInput{
		Name:        awssdk.String(s.opts.Prefix + ref),
		Description: awssdk.String(s.opts.Description),
		Tags:        s.tags(ref),
	}
	if s.opts.KMSKeyID != "" {
		in.KmsKeyId = awssdk.String(s.opts.KMSKeyID)
	}
	if len(value) > 0 && utf8.Valid(value) {
		in.SecretString = awssdk.String(string(value))
	} else {
		in.SecretBinary = bytes.Clone(value)
	}
	if _, err := s.client.CreateSecret(ctx, in); err != nil {
		var exists *smtypes.ResourceExistsException
		if !errors.As(err, &exists) {
			return "", scrub("create", ref, err, value)
		}
		// The SDK retries a request whose answer was lost; Secrets Manager
		// recognises the retry by its ClientRequestToken, but an emulator
		// may not, and answer that the secret exists: it is ours when it
		// holds our value.
		got, gerr := s.fetch(ctx, ref)
		switch {
		case gerr == nil && bytes.Equal(got, value): // ours
		case gerr == nil:
			return "", errNameTaken
		default:
			return "", gerr
		}
	}
	s.put(ref, value)
	return ref, nil
}

// Get implements secrets.Store.
func (s *Store) Get(ctx context.Context, ref string) ([]byte, error) {
	name, key, grouped := groupedRef(ref)
	if !grouped && !validRef(ref) {
		return nil, fmt.Errorf("secrets/aws: get %q: %w", ref, secrets.ErrNotFound)
	}
	if v, ok := s.cached(ref); ok {
		return v, nil
	}
	var v []byte
	var err error
	if grouped {
		v, err = s.getGrouped(ctx, ref, name, key)
	} else {
		v, err = s.fetch(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	s.put(ref, v)
	return bytes.Clone(v), nil
}

// fetch reads a value from Secrets Manager.
func (s *Store) fetch(ctx context.Context, ref string) ([]byte, error) {
	out, err := s.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{
		SecretId: awssdk.String(s.opts.Prefix + ref),
	})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("secrets/aws: get %q: %w", ref, secrets.ErrNotFound)
		}
		return nil, scrub("get", ref, err, nil)
	}
	if out.SecretString != nil {
		return []byte(*out.SecretString), nil
	}
	return bytes.Clone(out.SecretBinary), nil
}

// Delete implements secrets.Store.
func (s *Store) Delete(ctx context.Context, ref string) error {
	s.drop(ref)
	if name, key, ok := groupedRef(ref); ok {
		err := s.deleteGrouped(ctx, ref, name, key)
		s.drop(ref) // a Get racing the delete may have cached it again
		return err
	}
	if !validRef(ref) {
		return nil // never created here
	}
	_, err := s.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
		SecretId:                   awssdk.String(s.opts.Prefix + ref),
		ForceDeleteWithoutRecovery: awssdk.Bool(true),
	})
	if err != nil && !isNotFound(err) {
		return scrub("delete", ref, err, nil)
	}
	s.drop(ref) // a Get racing the delete may have cached it again
	return nil
}

// ---- cache ---------------------------------------------------------------------

func (s *Store) cached(ref string) ([]byte, bool) {
	if s.opts.CacheTTL < 0 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[ref]
	if !ok {
		return nil, false
	}
	if !s.now().Before(e.expires) {
		delete(s.cache, ref)
		return nil, false
	}
	return bytes.Clone(e.value), true
}

func (s *Store) put(ref string, value []byte) {
	if s.opts.CacheTTL < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.cache) >= s.opts.CacheSize {
		for k, e := range s.cache {
			if !now.Before(e.expires) {
				delete(s.cache, k)
			}
		}
		for k := range s.cache { // still full: drop arbitrary entries
			if len(s.cache) < s.opts.CacheSize {
				break
			}
			delete(s.cache, k)
		}
	}
	s.cache[ref] = entry{value: bytes.Clone(value), expires: now.Add(s.opts.CacheTTL)}
}

func (s *Store) drop(ref string) {
	s.mu.Lock()
	delete(s.cache, ref)
	s.mu.Unlock()
}

// ---- names and errors -------------------------------------------------------------

// validRef reports whether ref has the shape Create gives references.
func validRef(ref string) bool {
	i := strings.LastIndexByte(ref, '-')
	if i < 1 || len(ref)-i-1 != suffixHexLen {
		return false
	}
	if secrets.ValidHint(ref[:i]) != nil {
		return false
	}
	for _, c := range []byte(ref[i+1:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validName reports whether s consists of characters allowed in names.
func validName(s string) bool {
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("/_+=.@-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isNotFound(err error) bool {
	var nf *smtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return true
	}
	// A secret being deleted answers InvalidRequestException ("marked for
	// deletion" / "scheduled for deletion").
	var ir *smtypes.InvalidRequestException
	if errors.As(err, &ir) {
		msg := strings.ToLower(ir.ErrorMessage())
		return strings.Contains(msg, "deletion") || strings.Contains(msg, "deleted")
	}
	return false
}

// opError is an error of the service, rebuilt from strings so that nothing
// of the request (the value) can be reached through it. It keeps the
// context's error for errors.Is.
type opError struct {
	msg   string
	cause error // context.Canceled, context.DeadlineExceeded or nil
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.cause }

// scrub turns an SDK error into an opError naming op and ref, with value (if
// any) cut out of the text.
func scrub(op, ref string, err error, value []byte) error {
	text := err.Error()
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		text = apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	if len(value) > 0 {
		text = strings.ReplaceAll(text, string(value), "[value]")
	}
	var cause error
	switch {
	case errors.Is(err, context.Canceled):
		cause = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		cause = context.DeadlineExceeded
	}
	return &opError{msg: fmt.Sprintf("secrets/aws: %s %q: %s", op, ref, text), cause: cause}
}
