package payloads

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// MaxBytes bounds one object. It is far above any request the API accepts
// (10 MB locally, 6 MB on Lambda) and lets a run's state grow to tens of
// megabytes; a larger document is refused with ErrTooLarge rather than
// exhausting a function's memory.
const MaxBytes = 64 << 20

// MaxKeyBytes bounds a key (S3 allows 1,024 bytes).
const MaxKeyBytes = 512

var (
	// ErrNotFound: no object under the key.
	ErrNotFound = errors.New("payloads: not found")
	// ErrTooLarge: the object is over MaxBytes.
	ErrTooLarge = errors.New("payloads: object over the size limit")
)

// Store keeps objects by key. Implementations are safe for concurrent use.
// Writes are whole-object and strongly consistent: a Get after a Put
// returns the object written.
type Store interface {
	// Put stores data under key, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns the object under key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes the objects under keys; missing ones are no error.
	Delete(ctx context.Context, keys ...string) error
	// DeletePrefix removes every object whose key begins with prefix
	// (which must end with "/").
	DeletePrefix(ctx context.Context, prefix string) error
}

// CheckKey is the rule every adapter applies to keys: 1 to MaxKeyBytes of
// letters, digits and "/_-.=#", made of non-empty segments separated by
// "/" that are not "." or "..", so a key is a safe relative file path too.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyBytes {
		return fmt.Errorf("payloads: key of %d bytes (1 to %d)", len(key), MaxKeyBytes)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("payloads: key %q has an empty, \".\" or \"..\" segment", key)
		}
		for _, r := range seg {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_-.=#", r)) {
				return fmt.Errorf("payloads: key %q has the character %q", key, r)
			}
		}
	}
	return nil
}

// CheckPrefix is the rule for DeletePrefix: a key followed by "/".
func CheckPrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("payloads: prefix %q does not end with /", prefix)
	}
	return CheckKey(strings.TrimSuffix(prefix, "/"))
}

// CheckPut is the rule for Put: a valid key and at most MaxBytes.
func CheckPut(key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(data) > MaxBytes {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrTooLarge, len(data), MaxBytes)
	}
	return nil
}
