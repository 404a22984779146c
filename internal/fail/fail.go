// Package fail is the error vocabulary shared by the use-case packages: an
// error says what kind of failure it is (invalid input, missing resource,
// conflict) without knowing about HTTP. The api package maps kinds to status
// codes; nothing else needs to.
package fail

import (
	"errors"
	"fmt"
	"strings"
)

// Kind classifies a failure by what the caller did wrong (or didn't).
type Kind int

const (
	// KindInvalid: the input breaks a rule; the message names field and rule.
	KindInvalid Kind = iota + 1
	// KindBadRequest: the request is well-formed but cannot be served as asked.
	KindBadRequest
	// KindNotFound: no such resource (or not the caller's).
	KindNotFound
	// KindConflict: the request collides with the current state.
	KindConflict
	// KindUnavailable: the storage under the request failed (disk full,
	// read-only or failing file system); nothing was changed, and the same
	// request may succeed later.
	KindUnavailable
	// KindQuota: the write would take the organization past one of its
	// quotas; the message names the quota. It succeeds once the
	// organization deleted enough.
	KindQuota
)

// Error is a classified failure. Its Message is safe to show to the caller:
// it never contains secret values. Error() adds the cause, when there is one.
type Error struct {
	Kind    Kind
	Message string
	// Err is the underlying cause, for logs and errors.Is; it may name
	// files and driver codes, so it is not part of Message.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// MessageOf returns the caller-safe message of the classified failure in
// err's chain, or "" when there is none.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}

// KindOf returns the kind of err, or 0 when err is not a classified failure.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// Invalid reports that field breaks rule, e.g. Invalid("provider_id", "must be 1-64 characters").
func Invalid(field, rule string, args ...any) error {
	return &Error{Kind: KindInvalid, Message: field + ": " + fmt.Sprintf(rule, args...)}
}

// BadRequest reports a request that cannot be served as asked.
func BadRequest(format string, args ...any) error {
	return &Error{Kind: KindBadRequest, Message: fmt.Sprintf(format, args...)}
}

// NotFound reports a missing resource.
func NotFound(format string, args ...any) error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

// Conflict reports a collision with the current state.
func Conflict(format string, args ...any) error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(format, args...)}
}

// Quota reports a write refused by an organization's quota.
func Quota(format string, args ...any) error {
	return &Error{Kind: KindQuota, Message: fmt.Sprintf(format, args...)}
}

// Unavailable reports that the storage failed under a request. what is the
// caller-safe cause ("no space left on device"); cause is the full error.
func Unavailable(what string, cause error) error {
	return &Error{Kind: KindUnavailable, Message: "storage unavailable: " + what, Err: cause}
}

// Checks collects rule violations so a caller sees every broken rule of a
// request at once. The zero value is ready to use.
type Checks struct {
	problems []string
}

// Add records that field breaks rule when bad is true.
func (c *Checks) Add(bad bool, field, rule string, args ...any) {
	if bad {
		c.problems = append(c.problems, field+": "+fmt.Sprintf(rule, args...))
	}
}

// AddErr records err (a field error from a nested check) when it is not nil.
func (c *Checks) AddErr(err error) {
	if err != nil {
		c.problems = append(c.problems, err.Error())
	}
}

// Err returns nil when no rule was broken, else one KindInvalid error listing them.
func (c *Checks) Err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return &Error{Kind: KindInvalid, Message: strings.Join(c.problems, "; ")}
}
