package secrets

import (
	"context"
	"errors"
	"fmt"
)

// MaxHintLen is the longest hint ValidHint accepts, in characters (bytes: the
// allowed characters are all ASCII).
const MaxHintLen = 200

var (
	// ErrNotFound: no value is stored under the reference.
	ErrNotFound = errors.New("secret not found")
	// ErrInvalidHint: the hint passed to Create breaks the rule of ValidHint.
	ErrInvalidHint = errors.New("invalid secret hint")
)

// Store keeps secret values; callers keep only the returned reference.
//
// Implementations are safe for concurrent use. Values passed in and returned
// are copies: changing them afterwards does not change what is stored.
type Store interface {
	// Create stores value under a new, unique reference derived from hint and
	// returns the reference. The reference begins with hint. It fails with an
	// error wrapping ErrInvalidHint when ValidHint(hint) fails.
	Create(ctx context.Context, hint string, value []byte) (ref string, err error)
	// Get returns the value; ErrNotFound for an unknown ref.
	Get(ctx context.Context, ref string) ([]byte, error)
	// Delete removes the value; deleting an unknown ref is not an error
	// (idempotent).
	Delete(ctx context.Context, ref string) error
}

// ValidHint reports whether hint may prefix a reference: it must be 1 to
// MaxHintLen characters, each one of A-Z a-z 0-9 / _ . -. The returned error
// wraps ErrInvalidHint and names the rule.
func ValidHint(hint string) error {
	const rule = "must be 1-200 characters of [A-Za-z0-9/_.-]"
	if hint == "" {
		return fmt.Errorf("%w: %s, got an empty hint", ErrInvalidHint, rule)
	}
	if len(hint) > MaxHintLen {
		return fmt.Errorf("%w: %s, got %d bytes", ErrInvalidHint, rule, len(hint))
	}
	for i := 0; i < len(hint); i++ {
		if !hintChar(hint[i]) {
			return fmt.Errorf("%w: %s, byte %d (%q) is not allowed", ErrInvalidHint, rule, i, hint[i])
		}
	}
	return nil
}

func hintChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '/', c == '_', c == '.', c == '-':
		return true
	}
	return false
}
