package kmsvault

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/secrets"
)

// ContextKey is the one key of the KMS encryption context; its value is
// the hint of the reference. IAM policies condition on it
// (kms:EncryptionContext:stepgraph:vault).
const ContextKey = "stepgraph:vault"

// Defaults of Options.
const (
	DefaultDataKeyTTL       = 5 * time.Minute
	DefaultDataKeyUses      = 1000
	DefaultDataKeyCacheSize = 1000
)

// suffixHexLen is the length of the random part of a reference.
const suffixHexLen = 24

// itemVersion is the layout of an item; a later layout gets a new number.
const itemVersion = "1"

// Options configure a Store.
type Options struct {
	// Table is the full name of the DynamoDB table (a pk/sk string key
	// schema).
	Table string
	// KeyID is the KMS key (id, ARN or alias) that wraps the data keys.
	KeyID string
	// DataKeyTTL bounds how long a data key stays in memory; 0 means
	// DefaultDataKeyTTL, a negative value disables the cache.
	DataKeyTTL time.Duration
	// DataKeyUses bounds how many values one cached data key seals; 0
	// means DefaultDataKeyUses.
	DataKeyUses int
	// DataKeyCacheSize bounds the cached data keys (each cache); 0 means
	// DefaultDataKeyCacheSize.
	DataKeyCacheSize int
}

// Store is a secrets.Store on DynamoDB and KMS. It is safe for concurrent
// use.
type Store struct {
	ddb  *dynamodb.Client
	kms  *kms.Client
	opts Options
	now  func() time.Time

	mu      sync.Mutex
	sealing map[string]*sealKey // hint → the data key new values use
	opening map[string]openKey  // sha256(hint, wrapped key) → data key

	// kmsCalls counts GenerateDataKey and Decrypt calls (tests).
	kmsCalls int
}

type sealKey struct {
	plain, wrapped []byte
	expires        time.Time
	uses           int
}

type openKey struct {
	plain   []byte
	expires time.Time
}

var _ secrets.Store = (*Store)(nil)

// New returns a Store using cfg (region, credentials, endpoint).
func New(cfg awssdk.Config, opts Options) (*Store, error) {
	if opts.Table == "" {
		return nil, errors.New("kmsvault: no table")
	}
	if opts.KeyID == "" {
		return nil, errors.New("kmsvault: no KMS key")
	}
	if opts.DataKeyTTL == 0 {
		opts.DataKeyTTL = DefaultDataKeyTTL
	}
	if opts.DataKeyUses <= 0 {
		opts.DataKeyUses = DefaultDataKeyUses
	}
	if opts.DataKeyCacheSize <= 0 {
		opts.DataKeyCacheSize = DefaultDataKeyCacheSize
	}
	return &Store{ddb: dynamodb.NewFromConfig(cfg), kms: kms.NewFromConfig(cfg), opts: opts, now: time.Now,
		sealing: map[string]*sealKey{}, opening: map[string]openKey{}}, nil
}

// Create implements secrets.Store.
func (s *Store) Create(ctx context.Context, hint string, value []byte) (string, error) {
	if err := secrets.ValidHint(hint); err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		ref, err := s.create(ctx, hint, value)
		if !errors.Is(err, errNameTaken) {
			return ref, err
		}
		if attempt == 2 {
			return "", fmt.Errorf("kmsvault: create %q: %w", hint, err)
		}
	}
}

// errNameTaken: the random reference is another value's (96 random bits:
// never seen in practice); Create tries another.
var errNameTaken = errors.New("reference taken")

func (s *Store) create(ctx context.Context, hint string, value []byte) (string, error) {
	suffix := make([]byte, suffixHexLen/2)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("kmsvault: create %q: random suffix: %v", hint, err)
	}
	ref := hint + "-" + hex.EncodeToString(suffix)
	plain, wrapped, err := s.dataKeyToSeal(ctx, hint)
	if err != nil {
		return "", fmt.Errorf("kmsvault: create %q: %w", hint, err)
	}
	gcm, err := newGCM(plain)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("kmsvault: create %q: nonce: %v", hint, err)
	}
	sealed := gcm.Seal(nil, nonce, value, []byte(ref))
	_, err = s.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: awssdk.String(s.opts.Table),
		Item: map[string]ddbtypes.AttributeValue{
			"pk":      &ddbtypes.AttributeValueMemberS{Value: pk(ref)},
			"sk":      &ddbtypes.AttributeValueMemberS{Value: "value"},
			"v":       &ddbtypes.AttributeValueMemberS{Value: itemVersion},
			"key":     &ddbtypes.AttributeValueMemberB{Value: wrapped},
			"nonce":   &ddbtypes.AttributeValueMemberB{Value: nonce},
			"sealed":  &ddbtypes.AttributeValueMemberB{Value: sealed},
			"created": &ddbtypes.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339)},
		},
		ConditionExpression: awssdk.String("attribute_not_exists(pk)"),
	})
	if err != nil {
		var cond *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &cond) {
			return "", awsErr("create", ref, err)
		}
		// The SDK retries a request whose answer was lost, and the retry
		// finds the item the first attempt wrote: ours when it holds our
		// value.
		got, gerr := s.Get(ctx, ref)
		switch {
		case gerr == nil && bytes.Equal(got, value):
		case gerr == nil:
			return "", errNameTaken
		default:
			return "", gerr
		}
	}
	return ref, nil
}

// Get implements secrets.Store.
func (s *Store) Get(ctx context.Context, ref string) ([]byte, error) {
	hint, ok := hintOf(ref)
	if !ok {
		return nil, fmt.Errorf("kmsvault: get %q: %w", ref, secrets.ErrNotFound)
	}
	out, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      awssdk.String(s.opts.Table),
		Key:            key(ref),
		ConsistentRead: awssdk.Bool(true),
	})
	if err != nil {
		return nil, awsErr("get", ref, err)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("kmsvault: get %q: %w", ref, secrets.ErrNotFound)
	}
	wrapped, nonce, sealed := bin(out.Item, "key"), bin(out.Item, "nonce"), bin(out.Item, "sealed")
	if str(out.Item, "v") != itemVersion || wrapped == nil || nonce == nil || sealed == nil {
		return nil, fmt.Errorf("kmsvault: get %q: the item is not a vault value of this version", ref)
	}
	plain, err := s.dataKeyToOpen(ctx, hint, wrapped)
	if err != nil {
		return nil, fmt.Errorf("kmsvault: get %q: %w", ref, err)
	}
	gcm, err := newGCM(plain)
	if err != nil {
		return nil, err
	}
	if len(nonce) != gcm.NonceSize() {
		return nil, fmt.Errorf("kmsvault: get %q: the item's nonce is malformed", ref)
	}
	v, err := gcm.Open(nil, nonce, sealed, []byte(ref))
	if err != nil {
		return nil, fmt.Errorf("kmsvault: get %q: the value does not authenticate (altered, or moved from another reference)", ref)
	}
	return v, nil
}

// Delete implements secrets.Store.
func (s *Store) Delete(ctx context.Context, ref string) error {
	if _, ok := hintOf(ref); !ok {
		return nil // never created here
	}
	if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: awssdk.String(s.opts.Table), Key: key(ref),
	}); err != nil {
		return awsErr("delete", ref, err)
	}
	return nil
}

// encryptionContext binds a data key to the hint of the values it seals.
func encryptionContext(hint string) map[string]string { return map[string]string{ContextKey: hint} }

// dataKeyToSeal returns the hint's cached data key, or a new one from KMS.
func (s *Store) dataKeyToSeal(ctx context.Context, hint string) (plain, wrapped []byte, err error) {
	now := s.now()
	if s.opts.DataKeyTTL > 0 {
		s.mu.Lock()
		if k, ok := s.sealing[hint]; ok && now.Before(k.expires) && k.uses < s.opts.DataKeyUses {
			k.uses++
			plain, wrapped = k.plain, k.wrapped
			s.mu.Unlock()
			return plain, wrapped, nil
		}
		s.mu.Unlock()
	}
	out, err := s.kms.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId: awssdk.String(s.opts.KeyID), KeySpec: kmstypes.DataKeySpecAes256,
		EncryptionContext: encryptionContext(hint),
	})
	s.count()
	if err != nil {
		return nil, nil, kmsErr("GenerateDataKey", err)
	}
	if len(out.Plaintext) != 32 || len(out.CiphertextBlob) == 0 {
		return nil, nil, errors.New("KMS GenerateDataKey answered no AES-256 key")
	}
	if s.opts.DataKeyTTL > 0 {
		s.mu.Lock()
		evict(s.sealing, s.opts.DataKeyCacheSize, now, func(k *sealKey) time.Time { return k.expires })
		s.sealing[hint] = &sealKey{plain: out.Plaintext, wrapped: out.CiphertextBlob, expires: now.Add(s.opts.DataKeyTTL), uses: 1}
		// The key just made opens what it sealed without another call.
		evict(s.opening, s.opts.DataKeyCacheSize, now, func(k openKey) time.Time { return k.expires })
		s.opening[openID(hint, out.CiphertextBlob)] = openKey{plain: out.Plaintext, expires: now.Add(s.opts.DataKeyTTL)}
		s.mu.Unlock()
	}
	return out.Plaintext, out.CiphertextBlob, nil
}

// dataKeyToOpen unwraps a data key (cached briefly).
func (s *Store) dataKeyToOpen(ctx context.Context, hint string, wrapped []byte) ([]byte, error) {
	id, now := openID(hint, wrapped), s.now()
	if s.opts.DataKeyTTL > 0 {
		s.mu.Lock()
		k, ok := s.opening[id]
		s.mu.Unlock()
		if ok && now.Before(k.expires) {
			return k.plain, nil
		}
	}
	out, err := s.kms.Decrypt(ctx, &kms.DecryptInput{
		KeyId: awssdk.String(s.opts.KeyID), CiphertextBlob: wrapped,
		EncryptionContext: encryptionContext(hint),
	})
	s.count()
	if err != nil {
		return nil, kmsErr("Decrypt", err)
	}
	if len(out.Plaintext) != 32 {
		return nil, errors.New("KMS Decrypt answered no AES-256 key")
	}
	if s.opts.DataKeyTTL > 0 {
		s.mu.Lock()
		evict(s.opening, s.opts.DataKeyCacheSize, now, func(k openKey) time.Time { return k.expires })
		s.opening[id] = openKey{plain: out.Plaintext, expires: now.Add(s.opts.DataKeyTTL)}
		s.mu.Unlock()
	}
	return out.Plaintext, nil
}

func (s *Store) count() {
	s.mu.Lock()
	s.kmsCalls++
	s.mu.Unlock()
}

// evict makes room for one entry: expired entries go first, then (the
// cache being full of live keys) the one expiring soonest. Called with
// s.mu held; the caches are small, so a scan is fine.
func evict[V any](m map[string]V, size int, now time.Time, expires func(V) time.Time) {
	if len(m) < size {
		return
	}
	var oldest string
	var oldestAt time.Time
	for id, v := range m {
		at := expires(v)
		if !now.Before(at) {
			delete(m, id)
			continue
		}
		if oldest == "" || at.Before(oldestAt) {
			oldest, oldestAt = id, at
		}
	}
	if len(m) >= size && oldest != "" {
		delete(m, oldest)
	}
}

func openID(hint string, wrapped []byte) string {
	h := sha256.New()
	h.Write([]byte(hint))
	h.Write([]byte{0})
	h.Write(wrapped)
	return hex.EncodeToString(h.Sum(nil))
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("kmsvault: data key: %v", err)
	}
	return cipher.NewGCM(block)
}

func pk(ref string) string { return "vault#" + ref }

func key(ref string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: pk(ref)},
		"sk": &ddbtypes.AttributeValueMemberS{Value: "value"},
	}
}

func bin(item map[string]ddbtypes.AttributeValue, name string) []byte {
	if b, ok := item[name].(*ddbtypes.AttributeValueMemberB); ok {
		return b.Value
	}
	return nil
}

func str(item map[string]ddbtypes.AttributeValue, name string) string {
	if s, ok := item[name].(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// hintOf returns the hint of a reference this store makes (hint, "-", 24
// lowercase hex digits); ok is false for any other string.
func hintOf(ref string) (string, bool) {
	i := len(ref) - suffixHexLen - 1
	if i < 1 || ref[i] != '-' {
		return "", false
	}
	for _, c := range ref[i+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	hint := ref[:i]
	if secrets.ValidHint(hint) != nil {
		return "", false
	}
	return hint, true
}

// awsErr describes a failed DynamoDB call by its code only: values never
// reach DynamoDB in the clear, and the reference is not secret.
func awsErr(op, ref string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		return fmt.Errorf("kmsvault: %s %q: DynamoDB %s", op, ref, api.ErrorCode())
	}
	return fmt.Errorf("kmsvault: %s %q: %w", op, ref, err)
}

// kmsErr names the KMS error code (a denied grant, a disabled key, a
// context that does not match), never a key.
func kmsErr(op string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		return fmt.Errorf("KMS %s: %s", op, api.ErrorCode())
	}
	return fmt.Errorf("KMS %s: %v", op, err)
}
